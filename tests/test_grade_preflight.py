"""What ``python -m exercises grade`` refuses before it grades anyone (``exercises/preflight.py``): an output
folder that is the submissions' own, and limits under which the reference solution itself fails, where every
student would have been failed for the lecturer's setting."""
import csv
import shutil
import subprocess
import sys

import pytest

from test_notebook_grading import ROOT, SANDBOX     # the sandbox where there is one, as the other grading tests


@pytest.fixture
def class_folder(tmp_path):
    subs = tmp_path / "submissions"
    for student, source in (("alice", "solutions"), ("bob", "stubs")):
        (subs / student).mkdir(parents=True)
        shutil.copy(ROOT / "exercises" / source / "gelu.py", subs / student / "gelu.py")
    return subs


def grade(subs, *args):
    return subprocess.run([sys.executable, "-m", "exercises", "grade", str(subs), "--exercises", "gelu", *SANDBOX,
                           *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_submissions_folder_is_no_place_for_the_results(class_folder):
    # written there, the next grading read its gradescope folder as a student
    res = grade(class_folder, "--out", str(class_folder))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"--out {class_folder} is the submissions' folder" in res.stderr
    assert sorted(p.name for p in class_folder.iterdir()) == ["alice", "bob"]


def test_limits_under_which_the_reference_solution_fails_are_refused_not_charged_to_the_students(class_folder):
    out = class_folder.parent / "grades"
    res = grade(class_folder, "--out", str(out), "--timeout", "0.05")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert ("--timeout 0.05: the reference solution of gelu does not pass under these limits (the import of gelu.py "
            "did not return within 0.05 s") in res.stderr and "raise the limits" in res.stderr
    assert not out.exists()
    res = grade(class_folder, "--out", str(out), "--timeout", "60")        # limits that leave room: graded
    assert res.returncode == 0, res.stderr
    with open(out / "grades.csv", newline="") as f:
        assert {r["student"]: r["verdict"] for r in csv.DictReader(f)} == {"alice": "pass", "bob": "todo"}
