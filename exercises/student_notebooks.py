"""The notebooks' exercise cells, and the student copy of the notebooks.

In the repository every notebook carries its solutions, and ``make test``
runs them.  An exercise is two code cells, marked with cell tags:

* ``solution``: the functions the student writes, solved.  In the student
  copy each top-level function keeps its signature and docstring and its body
  becomes ``raise NotImplementedError``; other top-level lines (imports) stay;
* ``check``: the call to ``exercises.notebook.check`` that judges them; in the
  student copy its output is cleared.

A cell tagged ``own-pieces`` imports the pieces of earlier exercises (the
capstone's): from ``exercises.solutions`` in the repository, from the
student's own files, ``exercises.stubs``, in the student copy.

The student copy also clears the outputs that would give an answer away: of
every later cell that calls a function an exercise's solution defines (its
printout is the solution's), and of the cell that a "Predict, then run"
question asks the student to predict.  Every other cell is copied as it is,
outputs included.
"""
from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

SOLUTION, CHECK, OWN_PIECES = "solution", "check", "own-pieces"
TODO = "raise NotImplementedError  # TODO: your code here"


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def source(cell) -> str:
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else text


def function_bodies(text: str) -> list[tuple[int, int, str]]:
    """(start, end, indent) of each top-level function of ``text``: ``lines[start:end]`` is its body after
    the docstring (empty when it has only a docstring), ``indent`` the body's indentation."""
    out = []
    for node in ast.parse(text).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        first = node.body[0]
        has_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
            and isinstance(first.value.value, str)
        out.append((first.end_lineno if has_doc else first.lineno - 1, node.end_lineno, " " * first.col_offset))
    return out


def stub_of(cell) -> str:
    """The student's version of a solution cell: each function's signature and docstring, then TODO."""
    lines, out, done = source(cell).splitlines(), [], 0      # lines[:done] are handled
    for start, end, indent in function_bodies(source(cell)):
        out += lines[done:start] + [indent + TODO]
        done = end
    out += lines[done:]
    return "\n".join(out).rstrip() + "\n"


def exercise_cells(nb) -> list[tuple[int, int]]:
    """(solution cell index, check cell index) of each exercise, in order."""
    cells = nb["cells"]
    pairs = []
    for i, cell in enumerate(cells):
        if SOLUTION in tags(cell):
            j = next((j for j in range(i + 1, len(cells)) if CHECK in tags(cells[j])), None)
            if j is None:
                raise ValueError(f"the solution cell {i} has no check cell after it")
            pairs.append((i, j))
    return pairs


PREDICT = "Predict, then run"        # a question whose answer the next code cell prints


def predicted_cells(nb) -> list[int]:
    """The cell each "Predict, then run" question is about: the next code cell that is not the answer's
    (a graded question's answer and its check come first)."""
    cells, found = nb["cells"], []
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "markdown" and PREDICT in source(cell):
            found += [next(j for j in range(i + 1, len(cells)) if cells[j]["cell_type"] == "code"
                           and not {SOLUTION, CHECK} & set(tags(cells[j])))]
    return found


def revealing_cells(nb) -> set[int]:
    """The code cells whose outputs give an answer away: the exercises' own, the cells after a
    solution that call a function it defines, and the cell a "Predict, then run" question is about."""
    cells, found, defined = nb["cells"], set(predicted_cells(nb)), set()
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        if SOLUTION in tags(cell) or CHECK in tags(cell):
            found.add(i)
            if SOLUTION in tags(cell):
                defined |= {node.name for node in ast.parse(source(cell)).body if isinstance(node, ast.FunctionDef)}
        elif defined and defined & _names(source(cell)):
            found.add(i)
    return found - {None}


def _names(text: str) -> set[str]:
    try:
        return {node.id for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Name)}
    except SyntaxError:                       # IPython syntax (%magic): no Python names to read
        return set()


def student_notebook(nb) -> dict:
    """``nb`` (a notebook as JSON) with its solution cells made stubs and the outputs that reveal an
    answer cleared (``revealing_cells``)."""
    nb = json.loads(json.dumps(nb))
    clear = revealing_cells(nb)
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        if SOLUTION in tags(cell):
            cell["source"] = stub_of(cell)
        if OWN_PIECES in tags(cell):
            cell["source"] = source(cell).replace("exercises.solutions.", "exercises.stubs.")
        if i in clear:
            cell["outputs"], cell["execution_count"] = [], None
    return nb


def solutions_put_back(student, original) -> dict:
    """The student copy with the original's solution cells in place of the stubs (sources only)."""
    nb = json.loads(json.dumps(student))
    for cell, orig in zip(nb["cells"], original["cells"]):
        if SOLUTION in tags(orig) or OWN_PIECES in tags(orig):
            cell["source"] = orig["source"]
    return nb


def make_student_notebooks(src: Path, dest: Path) -> tuple[list[Path], int]:
    """Copy the notebooks folder ``src`` to ``dest``, every notebook as its student copy.

    Returns the notebooks written and how many exercise cells they hold."""
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints"))
    written, exercises = [], 0
    for path in sorted(dest.glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        exercises += len(exercise_cells(nb))
        path.write_text(json.dumps(student_notebook(nb), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)
    return written, exercises
