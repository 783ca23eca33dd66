"""``python -m exercises gradescope-bundle``: the zip Gradescope runs, and its run_autograder run here.

The bundle is unpacked into a folder laid out as Gradescope lays out /autograder (source/, submission/,
results/, and run_autograder copied beside them), and run_autograder is run as Gradescope runs it, with
``MINIBERT_AUTOGRADER`` pointing at that folder: on NAME.py files (right ones, and ones that flood, hang
and kill their process), on a notebook of the course, and where the grader itself cannot run.  Each
time results.json must be what Gradescope's specification asks for.
"""
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from exercises.student_notebooks import solutions_put_back, student_notebook

ROOT = Path(__file__).resolve().parents[1]
NAMES = ("gelu", "layernorm", "linear", "softmax", "layernorm_sum")
HOSTILE = {
    "layernorm.py": "import sys\nwhile True:\n    sys.stdout.write('x' * 100000)\n",          # floods, never ends
    "softmax.py": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "linear.py": "import time\ntime.sleep(3600)\n",                                         # hangs
}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    from exercises.cli import main

    folder = tmp_path_factory.mktemp("gradescope")
    (folder / "points.csv").write_text("gelu,2\nlayernorm,3\n", encoding="utf-8")
    out = folder / "autograder.zip"
    assert main(["gradescope-bundle", str(out), "--exercises", ",".join(NAMES), "--timeout", "5",
                 "--points", str(folder / "points.csv")]) == 0
    return out


def autograder(bundle: Path, where: Path, files: dict) -> dict:
    """Lay out ``where`` as /autograder, hand in ``files`` ({name: text or bytes}), run run_autograder."""
    with zipfile.ZipFile(bundle) as z:
        z.extractall(where / "source")
    for name in ("setup.sh", "run_autograder"):
        (where / "source" / name).chmod(0o755)         # as Gradescope's unzip keeps them
    shutil.copy(where / "source" / "run_autograder", where / "run_autograder")
    (where / "submission").mkdir()
    for name, data in files.items():
        path = where / "submission" / name
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    env = {**os.environ, "MINIBERT_AUTOGRADER": str(where), "MINIBERT_AUTOGRADER_PYTHON": sys.executable}
    done = subprocess.run([str(where / "run_autograder")], cwd=where, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    results = json.loads((where / "results" / "results.json").read_text(encoding="utf-8"))
    assert_gradescope_format(results)
    return {t["name"]: t for t in results["tests"]} | {"": results}


def assert_gradescope_format(results: dict) -> None:
    """The fields of Gradescope's autograder specification, each of its type."""
    assert isinstance(results["score"], float) and isinstance(results["execution_time"], int)
    assert results["stdout_visibility"] in ("hidden", "visible", "after_due_date", "after_published")
    assert isinstance(results["output"], str) and results["tests"]
    for test in results["tests"]:
        assert set(test) >= {"name", "score", "max_score", "status", "output", "visibility"}
        assert test["status"] in ("passed", "failed") and test["visibility"] == "visible"
        assert 0 <= test["score"] <= test["max_score"] and isinstance(test["output"], str)
    assert results["score"] == sum(t["score"] for t in results["tests"])


def test_the_bundle_holds_what_gradescope_runs_and_no_solution(bundle):
    with zipfile.ZipFile(bundle) as z:
        names = z.namelist()
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
        requirements = z.read("requirements.txt").decode()
        settings = json.loads(z.read("gradescope.json"))
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert {"pyproject.toml", "README.md", "minibert/__init__.py", "exercises/__main__.py",
            "exercises/cases/recorded.data"} <= set(names)
    assert not [n for n in names if n.startswith("exercises/solutions") or "__pycache__" in n]
    assert all("==" in line for line in requirements.splitlines())
    assert settings == {"exercises": list(NAMES), "timeout": 5.0,
                        "points": {"gelu": 2.0, "layernorm": 3.0, "linear": 1.0, "softmax": 1.0, "layernorm_sum": 1.0}}
    with zipfile.ZipFile(bundle) as z:
        setup = z.read("setup.sh")
    assert subprocess.run(["bash", "-n"], input=setup).returncode == 0


def test_py_files_right_flooding_hanging_and_killing_each_get_a_test(bundle, tmp_path):
    right = {f"{n}.py": (ROOT / "exercises" / "solutions" / f"{n}.py").read_text() for n in ("gelu",)}
    tests = autograder(bundle, tmp_path, {**right, **HOSTILE})
    assert (tests["gelu"]["status"], tests["gelu"]["score"], tests["gelu"]["max_score"]) == ("passed", 2.0, 2.0)
    for name in ("layernorm", "softmax", "linear"):
        assert tests[name]["status"] == "failed" and tests[name]["score"] == 0, tests[name]
    assert "did not return within 5 s" in tests["layernorm"]["output"]
    assert "did not return within 5 s" in tests["linear"]["output"]
    assert "SIGKILL" in tests["softmax"]["output"]
    assert "no questions.py" in tests["layernorm_sum"]["output"]
    assert tests[""]["score"] == 2.0


def test_a_notebook_of_the_course_is_graded_as_its_check_cells_say(bundle, tmp_path):
    course = json.loads((ROOT / "notebooks" / "02_building_blocks.ipynb").read_text(encoding="utf-8"))
    solved = solutions_put_back(student_notebook(course), course)
    for cell in solved["cells"]:
        if "def gelu_backward" in "".join(cell["source"]):
            cell["source"] = "".join(cell["source"]).replace("dy * (phi_cdf + x * density)", "dy * phi_cdf")
    tests = autograder(bundle, tmp_path, {"02_building_blocks.ipynb": json.dumps(solved)})
    assert {n: tests[n]["status"] for n in NAMES} == {"gelu": "failed", "layernorm": "passed", "linear": "failed",
                                                      "softmax": "failed", "layernorm_sum": "passed"}
    assert "hint:" in tests["gelu"]["output"] and "02_building_blocks.ipynb" in tests["gelu"]["output"]
    assert tests[""]["score"] == 4.0


def test_where_the_grader_cannot_run_results_json_still_says_why(bundle, tmp_path):
    with zipfile.ZipFile(bundle) as z:
        z.extractall(tmp_path / "unpacked")
    settings = tmp_path / "unpacked" / "gradescope.json"
    data = json.loads(settings.read_text())
    settings.write_text(json.dumps({**data, "exercises": ["gelu", "no_such_exercise"]}))
    broken = tmp_path / "broken.zip"
    with zipfile.ZipFile(broken, "w") as z:
        for path in sorted((tmp_path / "unpacked").rglob("*")):
            if path.is_file():
                z.write(path, path.relative_to(tmp_path / "unpacked").as_posix())
    tests = autograder(broken, tmp_path / "ag", {"gelu.py": "def gelu_forward(x): pass\n"})
    assert tests[""]["score"] == 0.0 and "could not grade" in tests[""]["output"]
    assert "no_such_exercise" in tests["no_such_exercise"]["output"]
