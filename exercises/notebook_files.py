"""A handed-in notebook read as the files ``grade`` checks: NAME.py for each exercise it checks.

A notebook's exercise is the functions its check cells pass, ``check("gelu",
gelu_forward=gelu_forward, ...)``, as they stand when the cells run.  Here the
code cells are read in the notebook's order, as "Restart and run all" runs
them, whatever order they were run in before it was saved: a function defined
twice is the later definition.  NAME.py holds what the functions need of the
notebook: the top-level imports, functions, classes and constants
(``EPS = 1e-12``) of the code cells that those functions use, and in turn what
these use; then the names the check cell passes.  The other top-level lines (a
plot, a training run) are left out, so a function that reads a value such a
line computes fails its check with a NameError.

A notebook whose JSON does not parse is refused as a whole; a cell that does
not parse as Python costs only the exercises whose functions it was to define.
"""
from __future__ import annotations

import ast
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

MAX_NOTEBOOK_BYTES = 20 << 20     # outputs (figures) make a notebook far larger than its code
COURSE = Path(__file__).resolve().parent.parent / "notebooks"
_MAGIC = re.compile(r"^\s*[%!]")


class Unread(str):
    """Why an exercise of a notebook is not read: the cell that defines its functions does not parse, or
    none defines them."""


@dataclass(frozen=True)
class Piece:
    """One exercise of a notebook: the text of its NAME.py, and the functions its check cells pass."""
    text: str
    functions: tuple


@functools.lru_cache(maxsize=None)
def _course() -> dict:
    """{a course notebook's file name: the exercises its check cells check}, from the course's notebooks."""
    out = {}
    for path in sorted(COURSE.glob("*.ipynb")):
        try:
            out[path.name] = tuple(_checks(code_cells(path.read_bytes())))
        except (OSError, ValueError):
            continue
    return out


def course_names() -> tuple:
    """The file names of the course's notebooks."""
    return tuple(_course())


def course_exercises(notebook_name: str) -> tuple:
    """The exercises of the course's notebook of this file name (none for another name)."""
    return _course().get(notebook_name, ())


def _checks(cells) -> dict:
    """{exercise: {stub name: the name passed}} of the check cells among ``cells`` that parse."""
    out = {}
    for text in cells:
        try:
            tree = ast.parse(_no_magic(text))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in tree.body:
            call = check_call(node)
            if call is not None:
                out[call[0]] = {**out.get(call[0], {}), **call[1]}
    return out


def _no_magic(text: str) -> str:
    """A cell's text with IPython's %magic and !shell lines blanked: they are not Python."""
    return "\n".join("" if _MAGIC.match(line) else line for line in text.splitlines())


def code_cells(data: bytes) -> list[str]:
    """The source of each code cell of a notebook (nbformat 4's JSON), in order; ValueError with a reason
    when ``data`` is not a notebook."""
    try:
        nb = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"not a notebook: its JSON does not parse ({exc or type(exc).__name__})") from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise ValueError("not a notebook: it holds no list of cells")
    out = []
    for cell in cells:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            text = cell.get("source", "")
            out.append("".join(str(t) for t in text) if isinstance(text, list) else str(text))
    return out


def exercise_files(data: bytes, names) -> dict:
    """{exercise: its ``Piece``, or why not (``Unread``)} for each of ``names`` whose check cells
    the notebook holds (the functions of every one: an exercise may be checked in parts).  ValueError when
    ``data`` is not a notebook."""
    kept: list[tuple[str, ast.stmt]] = []       # (its source, the statement), in the notebook's order
    defined: set[str] = set()
    broken: list[tuple[int, str, str]] = []     # (cell number, its text, the error)
    checks: dict[str, dict] = {}                 # {exercise: {stub name: the name passed}}
    for number, text in enumerate(code_cells(data), start=1):
        text = _no_magic(text)
        try:
            tree = ast.parse(text)
        except SyntaxError as exc:
            broken.append((number, text, f"code cell {number} does not parse: {exc.msg} (its line {exc.lineno})"))
            continue
        except (ValueError, RecursionError, MemoryError) as exc:      # a NUL byte, an expression nested too deep
            broken.append((number, text, f"code cell {number} does not parse: {exc or type(exc).__name__}"))
            continue
        for node in tree.body:
            call = check_call(node)
            if call is not None:                 # an exercise checked in parts: every part's functions
                checks[call[0]] = {**checks.get(call[0], {}), **call[1]}
            elif _kept(node):
                kept.append((ast.get_source_segment(text, node) or ast.unparse(node), node))
                defined |= _names(node)
    out = {}
    for name in names:
        if name in checks:
            out[name] = _file(name, checks[name], kept, defined, broken)
    return out


def _file(name, passed: dict, kept, defined, broken):
    missing = [v for v in passed.values() if v not in defined]
    if missing:
        cell = next((why for _, text, why in broken if any(re.search(rf"\bdef\s+{re.escape(v)}\b", text)
                                                            for v in missing)), None)
        return Unread(f"{cell}: it defines {', '.join(missing)}" if cell else
                      f"the check cell passes {', '.join(missing)}, which no code cell defines")
    lines = [f"# {name}: the functions the notebook's check cell passes, and what they use of the notebook"]
    lines += [source for source, _ in _needed(kept, passed.values())]
    lines += [f"{stub} = {given}" for stub, given in passed.items() if stub != given]
    return Piece("\n\n".join(lines) + "\n", tuple(passed))


def _needed(kept, wanted):
    """The statements of ``kept`` that bind ``wanted`` and, in turn, the names they use (each name's last
    binding, as running the cells in order leaves it), in the notebook's order."""
    last = {}
    for i, (_, node) in enumerate(kept):
        for n in _names(node):
            last[n] = i
    chosen, todo = set(), list(wanted)
    while todo:
        i = last.get(todo.pop())
        if i is not None and i not in chosen:
            chosen.add(i)
            node = kept[i][1]
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                todo += [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]
    return [kept[i] for i in sorted(chosen)]


def check_call(node):
    """(exercise, {stub name: name passed}) of a top-level ``check("NAME", f=f, ...)``, else None."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return None
    call = node.value
    func = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)
    if func != "check" or not call.args or not isinstance(call.args[0], ast.Constant) \
            or not isinstance(call.args[0].value, str):
        return None
    passed = {k.arg: k.value.id for k in call.keywords if k.arg and isinstance(k.value, ast.Name)}
    return call.args[0].value, passed


def _kept(node) -> bool:
    """A top-level statement NAME.py holds: an import, a definition, or a constant."""
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
        try:
            ast.literal_eval(node.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False
        return True
    return False


def _names(node) -> set:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets}
    return {(a.asname or a.name).split(".")[0] for a in node.names}
