"""The exercises inside the notebooks, and the student copy of the notebooks.

Every notebook has at least two exercises: a ``solution`` cell where the
student writes the piece just taught, and a ``check`` cell that judges it with
the exercise's own checker (``exercises/notebook.py``).  The repository's
notebooks carry the solutions, and nbval runs them in ``make test``; here:

* every committed check says PASS;
* ``python -m exercises make-student`` turns exactly the solution cells into
  stubs (signatures and docstrings, no code) and clears the checks' outputs;
  putting the solutions back gives the repository's notebooks again;
* the student copy of every notebook, executed top to bottom, fails exactly at
  its check cells (each says TODO) and nowhere else.  It is executed up to its
  last check where no later cell can reach a stub (read from the code): from
  there on it is the notebook itself, which nbval runs.
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from exercises.student_notebooks import (CHECK, OWN_PIECES, SOLUTION, exercise_cells, revealing_cells,  # noqa: E402
                                        solutions_put_back, source, stub_of, tags)
from test_notebooks_meta import text_of  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def text(cell) -> str:
    """What a cell printed, an exception as 'Name: message'."""
    return "".join(f"{o['ename']}: {o['evalue']}" if o["output_type"] == "error" else text_of(o)
                   for o in cell.get("outputs", []))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_has_checked_exercises(path):
    pairs = exercise_cells(load(path))
    assert len(pairs) >= 2, f"{path.name}: {len(pairs)} exercise cells; every notebook has at least two"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_checks_pass(path):
    nb = load(path)
    cells = nb["cells"]
    for i, j in exercise_cells(nb):
        assert "check(" in source(cells[j]), f"{path.name}, cell {j}: a check cell calls exercises.notebook.check"
        assert text(cells[j]).startswith("[PASS]"), \
            f"{path.name}, cell {j}: the committed check does not pass:\n{text(cells[j])}"
        assert "NotImplementedError" not in source(cells[i]), f"{path.name}, cell {i}: the solution is a stub"


@pytest.fixture(scope="module")
def student_copy(tmp_path_factory, recorded_cases):
    target = tmp_path_factory.mktemp("student")
    res = subprocess.run([sys.executable, "-m", "exercises", "make-student", str(target)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    return target


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_student_copy_changes_the_exercises_only(student_copy, path):
    original = load(path)
    student = load(student_copy / "notebooks" / path.name)
    assert len(student["cells"]) == len(original["cells"])
    revealing = revealing_cells(original)
    for k, (got, orig) in enumerate(zip(student["cells"], original["cells"])):
        where = f"{path.name}, cell {k}"
        if SOLUTION in tags(orig):
            stub = source(got)
            assert "raise NotImplementedError" in stub, f"{where}: the student's cell is not a stub:\n{stub}"
            assert stub != source(orig), where
            assert got["outputs"] == [], where
        elif CHECK in tags(orig) or k in revealing:
            assert source(got) == source(orig) and got["outputs"] == [], where
        elif OWN_PIECES in tags(orig):         # the capstone's pieces: the student's own files
            assert source(got) == source(orig).replace("exercises.solutions.", "exercises.stubs.") != source(orig)
            assert "exercises.solutions" not in source(got) and got["outputs"] == orig["outputs"], where
        else:
            assert got == orig, f"{where}: the student copy changed a cell that is not an exercise"
    back = solutions_put_back(student, original)
    assert [source(c) for c in back["cells"]] == [source(c) for c in original["cells"]]


def _solution_lines(cell) -> list[str]:
    """The lines of a solution cell that the stub leaves out and that say something: code a student
    could copy (not blank, not a comment, not a bare keyword, a bracket or a return of one name)."""
    kept = set(stub_of(cell).splitlines())
    lines = [line.strip() for line in source(cell).splitlines() if line not in kept]
    return [line for line in lines if len(line) >= 20 and not line.startswith("#")]


# where the course still prints a solution above its exercise (strict: the mark goes when it is mended)
REVEALED: dict = {}


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.xfail(reason=REVEALED[p.name], strict=True))
                                  if p.name in REVEALED else p for p in NOTEBOOKS], ids=lambda p: p.name)
def test_the_student_copy_reveals_no_solution(student_copy, path):
    """No line of a solution's body is in the student copy, in a cell or an output; no cell that calls
    a solution's function keeps its output; the cell a "Predict, then run" question asks about has
    none; and the copy keeps every other output."""
    original, student = load(path), load(student_copy / "notebooks" / path.name)
    for k, cell in enumerate(student["cells"]):
        if k in revealing_cells(original):
            assert cell.get("outputs", []) == [], f"{path.name}, cell {k} keeps an output that answers"
    # the cell each question is about: the next code cell after it that is not a graded answer or its check
    predicted = [k + 1 + next(j for j, c in enumerate(original["cells"][k + 1:]) if c["cell_type"] == "code"
                              and not {SOLUTION, CHECK} & set(c.get("metadata", {}).get("tags", [])))
                 for k, c in enumerate(original["cells"])
                 if c["cell_type"] == "markdown" and "Predict, then run" in source(c)]
    assert all(student["cells"][k]["outputs"] == [] for k in predicted), path.name
    kept = [k for k, c in enumerate(original["cells"]) if c.get("outputs") and k not in revealing_cells(original)]
    assert all(student["cells"][k]["outputs"] == original["cells"][k]["outputs"] for k in kept), path.name
    shown = "\n".join(source(c) + "\n" + text(c) for c in student["cells"])
    found = [f"cell {i}: {line!r}" for i, _ in exercise_cells(original)
             for line in _solution_lines(original["cells"][i]) if line in shown]
    assert not found, f"{path.name}: the student copy shows lines of the solutions: {found}"


def test_student_copy_stubs_keep_signatures_and_docstrings(student_copy):
    """A stub gives the student what to write: each function's name, arguments and docstring."""
    for path in NOTEBOOKS:
        original, student = load(path), load(student_copy / "notebooks" / path.name)
        for i, _ in exercise_cells(original):
            want = {f.name: (ast.unparse(f.args), ast.get_docstring(f))
                    for f in ast.parse(source(original["cells"][i])).body if isinstance(f, ast.FunctionDef)}
            got = {f.name: (ast.unparse(f.args), ast.get_docstring(f))
                   for f in ast.parse(source(student["cells"][i])).body if isinstance(f, ast.FunctionDef)}
            assert got == want, f"{path.name}, cell {i}"


def _execute(path: Path, cells: int | None = None) -> dict:
    """The notebook at ``path`` executed, its first ``cells`` cells only (all of them with None)."""
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    nb.cells = nb.cells[:cells]
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return nb


def _loads(tree) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _binds(node) -> set[str]:
    """The names a top-level statement binds: a definition its own name; any other statement every
    name it assigns, loops over, imports or defines, however deeply (an ``if`` holding a ``def``)."""
    if isinstance(node, DEFINITIONS):
        return {node.name}
    inner = list(ast.walk(node))
    return ({n.id for n in inner if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            | {n.name for n in inner if isinstance(n, DEFINITIONS)}
            | {(a.asname or a.name).split(".")[0] for n in inner if isinstance(n, (ast.Import, ast.ImportFrom))
               for a in n.names})


def cells_the_stubs_reach(nb) -> int | None:
    """How many cells of ``nb`` a student copy must run to be judged: up to its last check cell, if no
    later cell can reach a stub, else all (None).

    A student copy differs from the notebook only in the bodies of its solution cells' functions, and
    nbval runs the notebook itself.  A later cell behaves as it does there unless it uses one of those
    functions, or something defined in the notebook that uses one (followed to its end); a cell that
    is not Python counts as reaching them, and an IPython magic line (``%matplotlib inline``) as the
    tuple of its words."""
    cells = nb["cells"]
    pairs = exercise_cells(nb)
    last = max(j for _, j in pairs) + 1

    def python(text):            # each magic line as an expression of its words, which can then be looked up
        lines = text.splitlines()
        for k, line in enumerate(lines):
            if line.lstrip()[:1] in ("%", "!"):
                lines[k] = ", ".join(re.findall(r"[A-Za-z_]\w*", line)) or "None"
        return "\n".join(lines)
    try:
        trees = [ast.parse(python(source(c))) if c["cell_type"] == "code" else ast.Module(body=[], type_ignores=[])
                 for c in cells]
    except SyntaxError:
        return None
    reach = {f.name for i, _ in pairs for f in trees[i].body if isinstance(f, ast.FunctionDef)}
    grew = True
    while grew:                      # what is defined from a reaching name reaches too
        grew = False
        for tree in trees:
            for node in tree.body:
                names = _binds(node)
                if names - reach and _loads(node) & reach:
                    reach |= names
                    grew = True
    return None if any(_loads(tree) & reach for tree in trees[last:]) else last


@pytest.mark.parametrize("after, cells", [
    (["x = sum([1, 2])"], 5),                               # nothing after the check uses the stub
    (["y = f(2)"], None),                                   # the stub itself
    (["def g():\n    return f()"], None),                   # a function that calls it
    (["%timeit f(3)"], None),                               # a magic that calls it
    (["g()"], None),                                        # g = f, defined before the check
    (["h()"], None),                                        # h, defined inside an if before the check
    (["e()"], None),                                        # e, bound by a for loop before the check
], ids=["independent", "call", "def", "magic", "alias", "nested def", "loop"])
def test_a_student_copy_runs_as_far_as_its_stubs_reach(after, cells):
    def code(text, tag=None):
        return {"cell_type": "code", "source": text, "metadata": {"tags": [tag] if tag else []}}
    before = ["g = f", "if True:\n    def h():\n        return f()", "for e in [f]:\n    pass"]
    nb = {"cells": [code("def f(x=1):\n    return x", SOLUTION), *map(code, before), code("check('f', f=f)", CHECK)]
                   + [code(text) for text in after]}
    assert cells_the_stubs_reach(nb) == cells


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_student_copy_fails_exactly_at_its_exercises(student_copy, path):
    """Run top to bottom, the student's notebook stops nowhere; each check says TODO, and only they do.
    (It runs up to its last check where nothing after it can reach the stubs: the rest is the
    notebook's own, which nbval runs.)"""
    nb = _execute(student_copy / "notebooks" / path.name, cells_the_stubs_reach(load(path)))
    checks = {j for _, j in exercise_cells(load(path))}
    errors = [k for k, c in enumerate(nb.cells) if any(o.output_type == "error" for o in c.get("outputs", []))]
    assert not errors, f"{path.name}: cells {errors} raised in the student copy:\n" + \
        "\n".join(text(nb.cells[k]) for k in errors)
    not_passing = {k for k, c in enumerate(nb.cells) if c.cell_type == "code"
                   and any(v in text(c) for v in ("[TODO]", "[FAIL]"))}
    assert not_passing == checks, f"{path.name}: checks that do not pass at {sorted(not_passing)}, " \
        f"the check cells are {sorted(checks)}"
    for j in checks:
        assert text(nb.cells[j]).startswith("[TODO]"), f"{path.name}, cell {j}:\n{text(nb.cells[j])}"


# ------------------------------------------------------------ check() and hint() as a notebook cell calls them
def test_check_in_a_notebook_gives_the_command_lines_verdict(capsys):
    from exercises.cases import TABLES
    from exercises.notebook import check
    case = next(c for c in TABLES["layernorm"].cases if c.name == "dx without the mean term")
    wrong = case.module
    assert not check("layernorm", layernorm_forward=wrong.layernorm_forward,
                     layernorm_backward=wrong.layernorm_backward)
    out = capsys.readouterr().out
    assert out.startswith("[FAIL] layernorm") and case.hint in " ".join(out.split())
    assert "hint('layernorm')" in out
    right = TABLES["schedule"].module
    assert check("schedule", learning_rate=right.learning_rate)       # only the learning rate's checks run
    assert capsys.readouterr().out == "[PASS] schedule: your learning_rate passed all 4 checks.\n"
    with pytest.raises(ValueError, match="checks layernorm_backward together with layernorm_forward"):
        check("layernorm", layernorm_backward=TABLES["layernorm"].module.layernorm_backward)


def test_check_says_what_is_wrong_with_its_own_arguments():
    from exercises.notebook import check
    with pytest.raises(ValueError, match="no exercise 'layernrom'"):
        check("layernrom", layernorm_forward=print)
    with pytest.raises(ValueError, match="checks the functions layernorm_forward, layernorm_backward"):
        check("layernorm")
    with pytest.raises(ValueError, match="not one of them: layer_norm"):
        check("layernorm", layer_norm=print)
    with pytest.raises(TypeError, match="layernorm_forward should be the function you wrote, got a int"):
        check("layernorm", layernorm_forward=42)
    with pytest.raises(ValueError, match=r"check's first argument is an exercise's name.*not \['gelu'\]"):
        check(["gelu"], gelu_forward=print)


def _right(name):
    from exercises.cases import TABLES
    return TABLES[name].module


def test_sys_exit_in_the_students_cell_is_a_fail_not_the_end_of_the_cell(capsys):
    import sys as _sys

    from exercises.notebook import check

    def gelu_forward(x):
        _sys.exit()

    assert check("gelu", gelu_forward=gelu_forward, gelu_backward=_right("gelu").gelu_backward) is False
    out = capsys.readouterr().out
    assert "[FAIL] gelu" in out and "sys.exit(None) was called" in out and "Traceback" not in out, out


def test_an_exception_in_the_students_cell_is_a_fail_not_a_traceback(capsys):
    from exercises.notebook import check

    def gelu_forward(x):
        return x * undefined_name      # noqa: F821

    assert not check("gelu", gelu_forward=gelu_forward, gelu_backward=_right("gelu").gelu_backward)
    out = capsys.readouterr().out
    assert "[FAIL] gelu" in out and "NameError" in out and "Traceback" not in out


def test_hint_gives_one_level_and_names_the_next(capsys):
    from exercises.hints import HINTS
    from exercises.notebook import hint
    hint("attention")
    out = capsys.readouterr().out
    assert "hint 1 of 3 (the idea)" in out and HINTS["attention"][0] in out and 'hint(\'attention\', 2)' in out
    hint("attention", 3)
    out = capsys.readouterr().out
    assert HINTS["attention"][2] in out and "next" not in out
    with pytest.raises(ValueError, match="hints 1 to 3"):
        hint("attention", 0)
    hint("attention", "2")                              # as typed on a command line
    assert "hint 2 of 3" in capsys.readouterr().out
    for level in (True, 2.0, "two", None):
        with pytest.raises(ValueError, match=f"hints 1 to 3 .*not {level!r}"):
            hint("attention", level)


# ---------------------------------------------------------------- no later cell gives the answer away
def _expressions(cell, size: int) -> set:
    """Every expression of at least ``size`` syntax nodes in a code cell, as text (magics left out)."""
    text = "\n".join(line for line in source(cell).splitlines() if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    return {ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.expr) and sum(1 for _ in ast.walk(n)) >= size}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_later_cell_computes_an_exercises_answer(path):
    """The student copy keeps every cell but the solutions: a later cell that computes the same
    expressions as a solution (11 syntax nodes or more, as `2 * 2 * B * T * T * H`) hands the answer
    over.  Notebook 7 had its FLOPs count whole three cells below the exercise (it now imports
    minibert's), notebook 1 its greedy WordPiece (it now watches minibert's search through a
    vocabulary that records), notebook 3 its attention (the by-hand encoder calls minibert's)."""
    cells = load(path)["cells"]
    for i, cell in enumerate(cells):
        if SOLUTION not in tags(cell):
            continue
        answer = _expressions(cell, 11)
        for k in range(i + 1, len(cells)):
            later = cells[k]
            if later["cell_type"] == "code" and SOLUTION not in tags(later):
                shared = answer & _expressions(later, 11)
                assert not shared, f"{path.name}: cell {k} computes what the solution in cell {i} does: {sorted(shared)}"
