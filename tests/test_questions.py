"""The graded questions (exercises/checks/questions.py): one per notebook at least, each answer compared with
what minibert computes when the check runs, every usual slip named by its hint, a malformed answer a FAIL
line, never the right answer in a report; `grade` counts them from one file, questions.py."""
import ast
import csv
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from exercises import CHECKABLE, QUESTIONS  # noqa: E402
from exercises.checks import run_check  # noqa: E402
from exercises.checks import questions as Q  # noqa: E402
from exercises.hints import HINTS  # noqa: E402
from exercises.solutions import questions as solutions  # noqa: E402
from exercises.student_notebooks import CHECK, SOLUTION, source, tags  # noqa: E402
from test_autograder import SANDBOX  # noqa: E402

STUB = ROOT / "exercises" / "stubs" / "questions.py"
MISTAKES = [(name, i) for name, q in Q.QUESTIONS.items() for i in range(len(q.mistakes))]


def answer(name, value):
    """A module whose question ``name`` returns ``value``."""
    return SimpleNamespace(**{name: lambda: value}, __name__="answers")


def test_every_question_has_a_check_a_stub_an_answer_and_two_hints():
    stub = {f.name for f in ast.parse(STUB.read_text()).body if isinstance(f, ast.FunctionDef)}
    assert set(QUESTIONS) == set(Q.QUESTIONS) == stub and set(QUESTIONS) <= set(CHECKABLE)
    assert all(callable(getattr(solutions, n)) and len(HINTS[n]) == 2 for n in QUESTIONS)


@pytest.mark.parametrize("name", list(QUESTIONS))
def test_the_answer_passes(name):
    report = run_check(name, solutions)
    assert report.passed and report.n_ok == 1, report.render()


@pytest.mark.parametrize("name", list(QUESTIONS))
def test_the_stub_is_todo(name):
    from exercises.stubs import questions as stubs
    report = run_check(name, stubs)
    assert report.status == "todo", report.render()


@pytest.mark.parametrize("name,i", MISTAKES, ids=[f"{n}-{i}" for n, i in MISTAKES])
def test_each_usual_slip_fails_with_its_own_hint(name, i):
    wrong, hint = Q.QUESTIONS[name].mistakes[i]
    report = run_check(name, answer(name, wrong))
    assert report.status == "fail" and report.first_failure[1] == hint, report.render()


@pytest.mark.parametrize("name", list(QUESTIONS))
def test_a_wrong_answer_never_shows_the_right_one(name):
    q = Q.QUESTIONS[name]
    right = q.truth()
    wrong = (next(o for o in q.options if o != right) if q.kind == "choice" else [["x"]] * q.size
             if q.kind == "tokens" else 12345.0 if q.kind == "number" else [12345.0] * q.size)
    report = run_check(name, answer(name, wrong))
    assert report.status == "fail", report.render()
    shown = report.render()
    if q.kind.startswith("number"):            # each right number, as %g or to 3 digits, not inside another
        pieces = {f for v in (right if isinstance(right, list) else [right]) for f in (f"{v:g}", f"{v:.3g}")}
        assert not any(re.search(rf"(?<![\d.]){re.escape(p)}(?!\d)", shown) for p in pieces), shown
    else:
        assert repr(right) not in shown, shown
    if not any(same == wrong for same, _ in q.mistakes):
        assert report.first_failure[1] == HINTS[name][0]        # not a usual slip: the question's first hint


@pytest.mark.parametrize("name,value,says", [
    ("untrained_loss", "7.6, 0.69", "2 numbers in a tuple or a list"),
    ("untrained_loss", (7.6,), "2 numbers"),
    ("untrained_loss", (7.6, float("nan")), "a finite number"),
    ("longer_sequences", True, "a number, not bool"),
    ("longer_sequences", "4.3", "a number, not str"),
    ("layernorm_sum", "e", "one of the letters 'a', 'b', 'c', 'd'"),
    ("layernorm_sum", 0, "one of the letters"),
    ("snowman", ("[UNK]", "token"), "two lists of str"),
    ("snowman", [["[UNK]"]], "2 lists of tokens"),
    ("masked_count", {"a": 1, "b": 2, "c": 3}, "3 numbers"),
])
def test_a_malformed_answer_is_a_fail_line_that_says_what_to_return(name, value, says):
    report = run_check(name, answer(name, value))
    assert report.status == "fail" and says in report.first_failure[0], report.render()


def test_a_letter_may_be_capital_and_a_number_an_integer_or_numpy():
    import numpy as np
    assert run_check("layernorm_sum", answer("layernorm_sum", " A ")).passed
    assert run_check("word_rows", answer("word_rows", np.int64(31))).passed
    assert run_check("ring_bytes", answer("ring_bytes", np.array([12000.0, 24000.0]))).passed


def test_the_truth_is_computed_by_minibert_when_the_check_runs(monkeypatch):
    """Change minibert, and the same answers no longer pass: nothing is a stored number."""
    import minibert.model.flops as flops
    import minibert.ops.layernorm as layernorm
    assert run_check("longer_sequences", solutions).passed and run_check("layernorm_sum", solutions).passed
    monkeypatch.setattr(flops, "step_flops", lambda cfg, B, T, n: T)          # no attention term: exactly 4
    monkeypatch.setattr(layernorm, "layernorm_backward", lambda dy, cache: (dy, None, None))
    assert not run_check("longer_sequences", solutions).passed
    assert not run_check("layernorm_sum", solutions).passed


def test_each_notebook_asks_its_questions_and_the_answers_pass():
    """Each question's answer cell (tagged solution, the function of its name) and check cell are in the
    notebook its description names; every notebook has one at least, after a "Predict, then run" cell."""
    found = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for k, cell in enumerate(cells):
            if SOLUTION in tags(cell):
                defined = {f.name for f in ast.parse(source(cell)).body if isinstance(f, ast.FunctionDef)}
                for name in defined & set(QUESTIONS):
                    found[name] = path.name.split("_")[0]
                    assert "Predict, then run (graded)" in source(cells[k - 1]), (path.name, k)
                    check = cells[k + 1]
                    assert CHECK in tags(check) and f'check("{name}", {name}={name})' in source(check)
                    assert "[PASS]" in "".join("".join(o.get("text", [])) for o in check["outputs"]), (path.name, name)
    assert found == {n: d.split(":")[0] for n, d in QUESTIONS.items()}
    assert sorted({v[:2] for v in found.values()}) == [f"{i:02d}" for i in range(1, 14)]


def test_grade_counts_the_questions_from_one_file(tmp_path):
    """A class: one student answers all, one gets two wrong, one hands in no questions.py. One row per
    question, from the one file; the wrong ones fail with their hints."""
    subs, out = tmp_path / "submissions", tmp_path / "grades"
    right = (ROOT / "exercises" / "solutions" / "questions.py").read_text()
    wrong = right.replace('return "a"\n', 'return "c"\n', 1).replace("return 0.25", "return 1.0")
    for student, text in (("ada", right), ("bob", wrong), ("cy", None)):
        (subs / student).mkdir(parents=True)
        if text:
            (subs / student / "questions.py").write_text(text)
    (subs / "cy" / "gelu.py").write_text("")
    names = ["layernorm_sum", "float16_total", "ring_bytes"]
    res = subprocess.run([sys.executable, "-m", "exercises", "grade", str(subs), "--out", str(out),
                          "--exercises", ",".join(names), "--jobs", "2", *SANDBOX],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    with open(out / "grades.csv", newline="") as f:
        got = {(r["student"], r["exercise"]): r for r in csv.DictReader(f)}
    assert {n: got["ada", n]["verdict"] for n in names} == dict.fromkeys(names, "pass")
    assert [got["bob", n]["verdict"] for n in names] == ["fail", "fail", "pass"]
    assert got["bob", "layernorm_sum"]["hint"] == Q.QUESTIONS["layernorm_sum"].mistakes[1][1]
    assert got["bob", "float16_total"]["hint"] == Q.QUESTIONS["float16_total"].mistakes[0][1]
    assert all(got["cy", n]["verdict"] == "missing" and "no questions.py" in got["cy", n]["first_fail"]
               for n in names)
    results = json.loads((out / "gradescope" / "bob" / "results.json").read_text())
    assert results["score"] == 1.0 and [t["name"] for t in results["tests"]] == names


def test_check_and_hint_on_the_command_line():
    res = subprocess.run([sys.executable, "-m", "exercises", "check", "t_quantile", "word_rows", "--solutions"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and "2 of 2 exercises pass" in res.stdout, res.stdout + res.stderr
    res = subprocess.run([sys.executable, "-m", "exercises", "hint", "word_rows", "2"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "hint 2 of 2 (the working)" in res.stdout, res.stdout + res.stderr
    listing = subprocess.run([sys.executable, "-m", "exercises", "list"], cwd=ROOT, capture_output=True,
                             text=True, timeout=60).stdout
    assert "graded questions, each a function of questions.py" in listing
    assert all(name in listing for name in QUESTIONS)


def test_untrained_loss_is_uniform_guessing():
    """The truth the question compares with: ln V and ln 2, measured on minibert's model at its init."""
    mlm, nsp = Q.QUESTIONS["untrained_loss"].truth()
    assert abs(mlm - math.log(2000)) < 0.02 and abs(nsp - math.log(2)) < 0.01
