"""Grading the notebooks students hand in: each exercise is the functions its check cells pass, read as
"Restart and run all" would define them, and checked as a file is (exercises/notebook_files.py)."""
import copy
import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from exercises import EXERCISES, QUESTIONS  # noqa: E402
from exercises.confine import Confinement, Unavailable  # noqa: E402
from exercises.notebook_files import Piece, Unread, course_exercises, exercise_files  # noqa: E402
from exercises.student_notebooks import student_notebook  # noqa: E402

NAMES = [*EXERCISES, *QUESTIONS]
BLOCKS = ROOT / "notebooks" / "02_building_blocks.ipynb"
try:
    Confinement.find()
    SANDBOX = []
except Unavailable:
    SANDBOX = ["--no-sandbox"]


def _notebook(*codes, tags=None):
    cells = [{"cell_type": "code", "metadata": {"tags": list(tags or [])}, "source": code, "outputs": [],
              "execution_count": None} for code in codes]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()


def _cells_with(nb, old, new):
    """A copy of the notebook ``nb`` with ``old`` replaced by ``new`` in the code cell that holds it."""
    nb = copy.deepcopy(nb)
    hits = 0
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "code" and old in text:
            cell["source"], hits = text.replace(old, new), hits + 1
    assert hits == 1, old
    return nb


def test_each_exercise_of_the_course_s_notebooks_is_found_with_what_its_functions_use():
    found = exercise_files(BLOCKS.read_bytes(), NAMES)
    assert set(found) == {"layernorm", "gelu", "layernorm_sum"} == set(course_exercises(BLOCKS.name))
    gelu = found["gelu"]
    assert isinstance(gelu, Piece) and gelu.functions == ("gelu_forward", "gelu_backward")
    assert "def gelu_forward" in gelu.text and "import math" in gelu.text and "from scipy.special import erf" in gelu.text
    # what they do not use is left out: the figures' helpers, the other exercises, the plots
    assert "_style" not in gelu.text and "matplotlib" not in gelu.text and "def layernorm_forward" not in gelu.text
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):      # every exercise of the course is found
        assert set(exercise_files(path.read_bytes(), NAMES)) == set(course_exercises(path.name)) & set(NAMES), path.name


def test_cells_are_read_in_order_as_restart_and_run_all_runs_them():
    data = _notebook("import numpy as np\nEPS = 1e-12\nx = np.ones(3)",
                     'check("gelu", gelu_forward=mine, gelu_backward=gelu_backward)',
                     "%matplotlib inline\ndef mine(x):\n    return x, EPS",
                     "def gelu_backward(dy, cache):\n    return dy * 2",
                     "def mine(x):\n    return x * np.sqrt(EPS), None")
    piece = exercise_files(data, NAMES)["gelu"]
    assert piece.functions == ("gelu_forward", "gelu_backward")
    namespace = {}
    exec(piece.text, namespace)                 # the later definition of mine, EPS and np with it, not x
    assert namespace["gelu_forward"](4.0) == (4e-6, None) and "x" not in namespace
    assert namespace["gelu_backward"](1.0, None) == 2.0


def test_a_cell_that_does_not_parse_costs_only_the_exercises_it_defines():
    nb = json.loads(BLOCKS.read_bytes())
    broken = _cells_with(nb, "def layernorm_backward(dy, cache):", "def layernorm_backward(dy, cache)")
    found = exercise_files(json.dumps(broken).encode(), NAMES)
    assert isinstance(found["layernorm"], Unread) and "does not parse" in found["layernorm"]
    assert "layernorm_backward" in found["layernorm"]
    assert isinstance(found["gelu"], Piece) and isinstance(found["layernorm_sum"], Piece)
    with pytest.raises(ValueError, match="JSON does not parse"):
        exercise_files(BLOCKS.read_bytes()[:5000], NAMES)
    with pytest.raises(ValueError, match="no list of cells"):
        exercise_files(b'{"cells": 3}', NAMES)
    lost = exercise_files(_notebook('check("gelu", gelu_forward=gelu_forward, gelu_backward=gelu_backward)'), NAMES)
    assert "which no code cell defines" in lost["gelu"]
    odd = exercise_files(_notebook("def gelu_forward(x):\n    return x\0", "(" * 10000 + ")" * 10000,
                                   'check("gelu", gelu_forward=gelu_forward)'), NAMES)
    assert "code cell 1 does not parse" in odd["gelu"] and "gelu_forward" in odd["gelu"]
    with pytest.raises(ValueError, match="JSON does not parse"):
        exercise_files(b"[" * 100000 + b"]" * 100000, NAMES)


def _class(root: Path) -> dict:
    """Six students who hand in notebook 02: the verdicts of layernorm, gelu and the question, expected."""
    nb = json.loads(BLOCKS.read_bytes())
    moved = copy.deepcopy(nb)                   # every solution cell moved to the end, in reverse order
    solutions = [c for c in moved["cells"] if "solution" in c.get("metadata", {}).get("tags", [])]
    moved["cells"] = [c for c in moved["cells"] if c not in solutions] + solutions[::-1]
    students = {
        "solved": (nb, ("pass", "pass", "pass")),
        "blank": (student_notebook(copy.deepcopy(nb)), ("todo", "todo", "todo")),
        "one_wrong": (_cells_with(nb, "phi_cdf + x * density", "phi_cdf - x * density"), ("pass", "fail", "pass")),
        "syntax_error": (_cells_with(nb, "def layernorm_backward(dy, cache):", "def layernorm_backward(dy, cache)"),
                         ("fail", "pass", "pass")),
        "out_of_order": (moved, ("pass", "pass", "pass")),
    }
    for student, (notebook, _) in students.items():
        (root / student).mkdir(parents=True)
        (root / student / BLOCKS.name).write_text(json.dumps(notebook, indent=1))
    (root / "broken_json").mkdir()
    (root / "broken_json" / BLOCKS.name).write_bytes(BLOCKS.read_bytes()[:5000])
    (root / f"loose_1234_{BLOCKS.name}").write_text(json.dumps(students["one_wrong"][0]))   # as a course site
    (root / f"loose-broken-{BLOCKS.name}").write_bytes(b"{")                             # exports them
    return {**{s: v for s, (_, v) in students.items()}, "broken_json": ("fail", "fail", "fail"),
            "loose_1234": ("pass", "fail", "pass"), "loose-broken": ("fail", "fail", "fail")}


def test_grade_a_class_folder_of_notebooks(tmp_path):
    subs, out = tmp_path / "submissions", tmp_path / "grades"
    expected = _class(subs)
    table = tmp_path / "points.csv"
    table.write_text("exercise,points\nlayernorm,3\ngelu,2.5\n")       # the question keeps its 1 point
    res = subprocess.run([sys.executable, "-m", "exercises", "grade", str(subs), "--out", str(out),
                          "--exercises", "layernorm,gelu,layernorm_sum", "--jobs", "2", "--points", str(table),
                          *SANDBOX], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    with open(out / "grades.csv", newline="") as f:
        rows = {(r["student"], r["exercise"]): r for r in csv.DictReader(f)}
    for student, verdicts in expected.items():
        for name, verdict in zip(("layernorm", "gelu", "layernorm_sum"), verdicts):
            assert rows[student, name]["verdict"] == verdict, rows[student, name]
    assert "wrong sign" in rows["one_wrong", "gelu"]["hint"]
    assert rows["one_wrong", "gelu"]["file"].endswith(BLOCKS.name)
    assert "does not parse" in rows["syntax_error", "layernorm"]["first_fail"]
    assert "JSON does not parse" in rows["broken_json", "gelu"]["first_fail"]
    assert "Restart and run all" in rows["broken_json", "gelu"]["hint"]
    worth = {"layernorm": 3.0, "gelu": 2.5, "layernorm_sum": 1.0}         # the points, in every output
    for (student, name), row in rows.items():
        assert float(row["max_points"]) == worth[name]
        assert float(row["points"]) == (worth[name] if row["verdict"] == "pass" else 0.0)
    results = json.loads((out / "gradescope" / "one_wrong" / "results.json").read_text())
    assert results["score"] == 4.0 and [t["max_score"] for t in results["tests"]] == [3.0, 2.5, 1.0]
    assert results["output"].startswith("4 of 6.5 points")
    assert "gelu: 3 of 8 pass (4 fail, 1 todo); 2.5 points each" in (out / "summary.txt").read_text()
    report = {r["student"] + r["exercise"]: r["report"] for r in json.loads((out / "grades.json").read_text())["rows"]}
    assert BLOCKS.name in report["one_wronggelu"] and "minibert-notebook-" not in report["one_wronggelu"]


def test_a_points_table_that_names_another_exercise_or_no_number_is_refused_with_its_line(tmp_path):
    from exercises.points import read_points
    names = ["gelu", "softmax"]
    assert read_points(None, names) == {"gelu": 1.0, "softmax": 1.0}
    for text, message in (("gelu,2\nadamw,1\n", "line 2: 'adamw' is not an exercise being graded"),
                          ("gelu,two\n", "line 1: 'two' is not a number"), ("gelu,0\n", "more than 0 points"),
                          ("gelu,1,2\n", "write exercise,points"),
                          ("gelu,2\nsoftmax,1\ngelu,3\n", "line 3: gelu is given points on line 1 already")):
        (tmp_path / "p.csv").write_text(text)
        with pytest.raises(ValueError, match=message):
            read_points(tmp_path / "p.csv", names)
    res = subprocess.run([sys.executable, "-m", "exercises", "grade", str(tmp_path), "--points", str(tmp_path / "p.csv"),
                          "--exercises", "gelu,softmax"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "--points:" in res.stderr and "Traceback" not in res.stderr
