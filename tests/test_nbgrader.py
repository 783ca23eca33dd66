"""``python -m exercises export-nbgrader`` against the real nbgrader (a pinned test dependency).

In a temporary course folder: the export of notebooks 02 and 06b, ``nbgrader generate_assignment`` on
it (the release's exercise cells are the student copy's, without a line of the solutions), three
students handed in (the notebooks solved, the release untouched, and gelu's backward wrong),
``nbgrader autograde`` (every point, none, and all but gelu's, by the points table), and
``nbgrader generate_feedback`` (the wrong gelu's feedback shows the checker's hint for it).
"""
import contextlib
import html
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from exercises import nbgrader_export
from exercises.notebook import check
from exercises.student_notebooks import SOLUTION, exercise_cells, source, stub_of, tags

nbgrader = pytest.importorskip("nbgrader", reason="nbgrader is not installed: pip install -e '.[test]' "
                                                  "installs the version the tests pin")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ("02_building_blocks", "06b_reading_a_run")
POINTS = "exercise,points\ngelu,2\nlayernorm,3\n"       # the rest 1 each: layernorm_sum, nsp_prior, standard_errors
RIGHT = "dy * (phi_cdf + x * density)"                  # gelu_backward's last line, and a wrong one
WRONG = "dy * phi_cdf"


def nbgrader_cmd(course: Path, *args: str) -> str:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    return done.stdout


def course_notebook(stem: str) -> dict:
    return json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The course folder after export, generate_assignment, autograde and generate_feedback."""
    course = tmp_path_factory.mktemp("nbgrader") / "course"
    table = course.parent / "points.csv"
    table.write_text(POINTS, encoding="utf-8")
    from exercises.cli import main
    assert main(["export-nbgrader", str(course), "--assignment", "ps1", "--notebooks", "02,06b",
                 "--points", str(table)]) == 0
    nbgrader_cmd(course, "generate_assignment", "ps1")
    for student in ("solved", "blank", "wrong"):
        folder = course / "submitted" / student / "ps1"
        folder.mkdir(parents=True)
        for stem in NOTEBOOKS:
            nb = json.loads((course / "release" / "ps1" / f"{stem}.ipynb").read_text(encoding="utf-8"))
            if student != "blank":
                for cell, orig in zip(nb["cells"], course_notebook(stem)["cells"]):
                    if SOLUTION in tags(orig):
                        text = source(orig)
                        cell["source"] = text.replace(RIGHT, WRONG) if student == "wrong" else text
            (folder / f"{stem}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    nbgrader_cmd(course, "autograde", "ps1")
    nbgrader_cmd(course, "generate_feedback", "ps1")
    return course


def test_the_release_holds_the_student_copys_exercise_cells_and_no_solution(course):
    for stem in NOTEBOOKS:
        release = json.loads((course / "release" / "ps1" / f"{stem}.ipynb").read_text(encoding="utf-8"))
        orig = course_notebook(stem)
        assert len(release["cells"]) == len(orig["cells"])
        solved = [(r, o) for r, o in zip(release["cells"], orig["cells"]) if SOLUTION in tags(o)]
        assert solved
        for cell, o in solved:
            assert source(cell).rstrip() == stub_of(o).rstrip()
            given = set(stub_of(o).splitlines())
            answer = [line for line in source(o).splitlines() if line.strip() and line not in given]
            assert answer and not any(line in source(cell) for line in answer)
            assert "BEGIN SOLUTION" not in source(cell)
        tests = [c["metadata"]["nbgrader"] for c in release["cells"] if c["metadata"].get("nbgrader", {}).get("grade")]
        assert tests and all(t["locked"] and t["points"] > 0 for t in tests)


def scores(course: Path, student: str) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        out = {}
        for stem in NOTEBOOKS:
            nb = gb.find_submission_notebook(stem, "ps1", student)
            out[stem] = (nb.score, nb.max_score, {g.name: g.score for g in nb.grades})
        return out


def test_autograde_gives_every_point_none_and_all_but_the_wrong_exercises(course):
    solved, blank, wrong = (scores(course, s) for s in ("solved", "blank", "wrong"))
    # 02: layernorm 3, layernorm_sum 1, gelu 2; 06b: nsp_prior 1, standard_errors 1
    assert {k: v[:2] for k, v in solved.items()} == {NOTEBOOKS[0]: (6.0, 6.0), NOTEBOOKS[1]: (2.0, 2.0)}
    assert {k: v[:2] for k, v in blank.items()} == {NOTEBOOKS[0]: (0.0, 6.0), NOTEBOOKS[1]: (0.0, 2.0)}
    assert {k: v[:2] for k, v in wrong.items()} == {NOTEBOOKS[0]: (4.0, 6.0), NOTEBOOKS[1]: (2.0, 2.0)}
    assert wrong[NOTEBOOKS[0]][2] == {"layernorm-check": 3.0, "layernorm_sum-check": 1.0, "gelu-check": 0.0}


def test_the_feedback_shows_the_checkers_hint_for_the_wrong_exercise(course):
    cell = next(c for c in course_notebook(NOTEBOOKS[0])["cells"] if "def gelu_backward" in source(c))
    namespace = {"math": __import__("math"), "np": __import__("numpy")}
    exec(compile(source(cell).replace(RIGHT, WRONG), "gelu", "exec"), namespace)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert not check("gelu", gelu_forward=namespace["gelu_forward"], gelu_backward=namespace["gelu_backward"])
    hint = next(line.strip() for line in printed.getvalue().splitlines() if line.strip().startswith("hint:"))
    feedback = html.unescape((course / "feedback" / "wrong" / "ps1" / f"{NOTEBOOKS[0]}.html").read_text(
        encoding="utf-8"))
    assert "[FAIL] gelu" in feedback and hint in feedback
    assert "NotPassed" in feedback
    solved = html.unescape((course / "feedback" / "solved" / "ps1" / f"{NOTEBOOKS[0]}.html").read_text(
        encoding="utf-8"))
    assert "[PASS] gelu" in solved and "NotPassed" not in solved


def test_every_solution_cell_of_the_course_cleared_by_nbgrader_is_the_student_copys():
    from nbgrader.preprocessors import ClearSolutions
    from nbformat import from_dict

    clear = ClearSolutions(code_stub={"python": nbgrader_export.TODO})
    n, total = 0, 0
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        total += len(exercise_cells(nb))
        for cell in nb["cells"]:
            if SOLUTION in tags(cell):
                marked = from_dict({**cell, "source": nbgrader_export.marked_solution(source(cell))})
                assert clear._replace_solution_region(marked, "python"), path.name
                assert marked.source.rstrip() == stub_of(cell).rstrip(), path.name
                n += 1
    assert n == total > 0


@pytest.mark.parametrize("args, says", [
    (["--assignment", "../up"], "cannot name an nbgrader assignment"),
    (["--notebooks", "99"], "no notebook '99' in the course"),
    (["--notebooks", " , "], "--notebooks ' , ' names no notebook"),         # (the last --notebooks counts)
    (["--points", "{points}"], "'gelu_x' is not an exercise being graded"),
])
def test_export_refuses_in_one_line(tmp_path, capsys, args, says):
    from exercises.cli import main

    (tmp_path / "points.csv").write_text("gelu_x,2\n")
    args = [a.format(points=tmp_path / "points.csv") for a in args]
    assert main(["export-nbgrader", str(tmp_path / "course"), "--notebooks", "02", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1 and not (tmp_path / "course" / "source").exists()


def test_export_refuses_the_repository_and_replaces_only_its_own_assignment(tmp_path):
    with pytest.raises(nbgrader_export.Refused, match="the repository"):
        nbgrader_export.export(ROOT / "course", "ps1", ["02"])
    lecturer = tmp_path / "source" / "ps1"
    lecturer.mkdir(parents=True)
    (lecturer / "mine.ipynb").write_text("{}")
    with pytest.raises(nbgrader_export.Refused, match="pass --force"):
        nbgrader_export.export(tmp_path, "ps1", ["02"])
    with pytest.raises(nbgrader_export.Refused, match="replaces only an assignment this command wrote"):
        nbgrader_export.export(tmp_path, "ps1", ["02"], force=True)
    assert (lecturer / "mine.ipynb").read_text() == "{}"


def test_a_notebook_reading_beside_the_course_folder_is_not_exported_blind():
    assert nbgrader_export.local('Path("../benchmarks/results/x.json")', "c") == 'Path("benchmarks/results/x.json")'
    with pytest.raises(ValueError, match="reads a file beside the notebooks' folder"):
        nbgrader_export.local('open("../data/train.txt")', "07.ipynb, cell 3")


def test_a_lecturers_own_config_is_left_alone_and_the_settings_printed(course):
    own = course.parent / "own"
    (own / "source").mkdir(parents=True)
    (own / "nbgrader_config.py").write_text("c = get_config()\nc.CourseDirectory.course_id = 'ml101'\n")
    printed = io.StringIO()
    nbgrader_export._configure(own, printed)
    assert (own / "nbgrader_config.py").read_text().endswith("'ml101'\n")
    assert "c.ClearSolutions.code_stub" in printed.getvalue() and "c.Execute.timeout" in printed.getvalue()
