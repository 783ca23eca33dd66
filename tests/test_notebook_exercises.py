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
  its check cells (each says TODO) and nowhere else.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from exercises.student_notebooks import CHECK, SOLUTION, exercise_cells, solutions_put_back, source, tags  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def text(cell) -> str:
    out = []
    for o in cell.get("outputs", []):
        if o["output_type"] == "stream":
            out.append("".join(o["text"]) if isinstance(o["text"], list) else o["text"])
        elif o["output_type"] == "error":
            out.append(f"{o['ename']}: {o['evalue']}")
        else:
            t = o.get("data", {}).get("text/plain", "")
            out.append("".join(t) if isinstance(t, list) else t)
    return "".join(out)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_has_checked_exercises(path):
    pairs = exercise_cells(load(path))
    assert len(pairs) >= 2, f"{path.name}: {len(pairs)} exercise cells; every notebook has at least two"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_checks_pass(path):
    cells = load(path)["cells"]
    for i, j in exercise_cells(load(path)):
        assert "check(" in source(cells[j]), f"{path.name}, cell {j}: a check cell calls exercises.notebook.check"
        assert text(cells[j]).startswith("[PASS]"), \
            f"{path.name}, cell {j}: the committed check does not pass:\n{text(cells[j])}"
        assert "NotImplementedError" not in source(cells[i]), f"{path.name}, cell {i}: the solution is a stub"


@pytest.fixture(scope="module")
def student_copy(tmp_path_factory):
    target = tmp_path_factory.mktemp("student")
    res = subprocess.run([sys.executable, "-m", "exercises", "make-student", str(target)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    return target


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_student_copy_changes_the_exercises_only(student_copy, path):
    original = load(path)
    student = load(student_copy / "notebooks" / path.name)
    assert len(student["cells"]) == len(original["cells"])
    for k, (got, orig) in enumerate(zip(student["cells"], original["cells"])):
        where = f"{path.name}, cell {k}"
        if SOLUTION in tags(orig):
            stub = source(got)
            assert "raise NotImplementedError" in stub, f"{where}: the student's cell is not a stub:\n{stub}"
            assert stub != source(orig), where
            assert got["outputs"] == [], where
        elif CHECK in tags(orig):
            assert source(got) == source(orig) and got["outputs"] == [], where
        else:
            assert got == orig, f"{where}: the student copy changed a cell that is not an exercise"
    back = solutions_put_back(student, original)
    assert [source(c) for c in back["cells"]] == [source(c) for c in original["cells"]]


def test_student_copy_stubs_keep_signatures_and_docstrings(student_copy):
    """A stub gives the student what to write: each function's name, arguments and docstring."""
    import ast
    for path in NOTEBOOKS:
        original, student = load(path), load(student_copy / "notebooks" / path.name)
        for i, _ in exercise_cells(original):
            want = {f.name: (ast.unparse(f.args), ast.get_docstring(f))
                    for f in ast.parse(source(original["cells"][i])).body if isinstance(f, ast.FunctionDef)}
            got = {f.name: (ast.unparse(f.args), ast.get_docstring(f))
                   for f in ast.parse(source(student["cells"][i])).body if isinstance(f, ast.FunctionDef)}
            if "stub" not in original["cells"][i].get("metadata", {}).get("exercise", {}):
                assert got == want, f"{path.name}, cell {i}"


def _execute(path: Path) -> dict:
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return nb


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_student_copy_fails_exactly_at_its_exercises(student_copy, path):
    """Run top to bottom, the student's notebook stops nowhere; each check says TODO, and only they do."""
    nb = _execute(student_copy / "notebooks" / path.name)
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
