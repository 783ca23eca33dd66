"""The wrong answers in tests/data/wrong_answers: each one fails its checker.

They run through tools/hint_census.py's own path (the command line, one
process per answer), so a wrong answer the checker passes shows up here and
in the census alike.  The first hint under the first FAIL line must name the
mistake by the file's own rule: the census went from 47 of 50 (the checkers
before their diagnosis probes) to 50 of 50 (tests/data/wrong_answers/README.md),
and a checker change that loses one fails here.
"""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("hint_census", ROOT / "tools" / "hint_census.py")
census = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(census)

FILES = census.answer_files()
HOLDOUT = census.answer_files(root=ROOT / "tests" / "data" / "wrong_answers_holdout")
THIRD = census.answer_files(root=ROOT / "tests" / "data" / "wrong_answers_holdout_2")
FOURTH = census.answer_files(root=ROOT / "tests" / "data" / "wrong_answers_holdout_3")
EXERCISES = {p.name for p in (ROOT / "exercises" / "stubs").glob("*.py") if p.name != "__init__.py"}


def _id(path):
    return f"{path.parent.name}/{path.stem}"


def test_the_set_is_wide_enough():
    exercises = {p.parent.name for p in FILES}
    assert len(FILES) >= 20 and len(exercises) >= 6, (len(FILES), sorted(exercises))
    assert {f"{name}.py" for name in exercises} <= EXERCISES, sorted(exercises)


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_every_file_says_its_slip_and_rule(path):
    answer = census.read_answer(path)
    assert answer["slip"], f"{_id(path)}: no '# slip:' line"
    assert answer["names_it"], f"{_id(path)}: no '# names it:' rule"
    # the rule reads the hint, so it must not be matched by nothing at all or by any text
    assert not census.names_the_mistake("", answer["names_it"])


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_the_checker_rejects_it_and_names_the_mistake(path):
    result = census.census_one(path)
    assert result["verdict"] == "FAIL", f"{_id(path)} got [{result['verdict']}]: {result['slip']}"
    assert result["first_fail"], f"{_id(path)}: [FAIL] without a FAIL line"
    assert result["named"], f"{_id(path)}: the first hint does not name the slip ({result['slip']}): " \
        f"{result['first_hint'] or '(no hint)'}"


def test_names_it_rules():
    rule = [["keepdims"], ["axis", "last"]]
    assert census.names_the_mistake("Use KEEPDIMS=True", rule)
    assert census.names_the_mistake("sum over the last axis", rule)
    assert not census.names_the_mistake("sum over the axis 0", rule)


def test_first_failure_reads_the_first_fail_and_its_hint():
    output = "\n".join([
        "[FAIL] softmax  (x.py)",
        "  ok    forward vs minibert                          max_rel_error 2.2e-16 (< 1e-07)",
        "  FAIL  dx vs numerical gradient                     max_rel_error 1.0e+00 (must be < 1e-07)",
        "        hint: the sum runs over",
        "        the last axis",
        "  FAIL  dx again",
        "        hint: another",
        "  -> failed: read the first FAIL line and its hint, fix it, run again.",
    ])
    verdict, fail, hint = census.first_failure(output)
    assert verdict == "FAIL"
    assert fail.startswith("dx vs numerical gradient")
    assert hint == "the sum runs over the last axis"
    assert census.first_failure("[PASS] softmax  (x.py)\n  ok    forward\n") == ("PASS", "", "")


@pytest.mark.parametrize("path", HOLDOUT + THIRD + FOURTH, ids=_id)
def test_the_checker_rejects_the_held_out_answers(path):
    """The second, third and fourth sets measure the hints (their READMEs); every one of their answers must at
    least fail, the two the third set's census before found accepted among them (str.isspace() in the basic
    split; 'if v' dropping a result of 0.0)."""
    answer = census.read_answer(path)
    assert answer["slip"] and answer["names_it"], _id(path)
    assert not census.names_the_mistake("", answer["names_it"]), _id(path)
    result = census.census_one(path)
    assert result["verdict"] == "FAIL" and result["first_fail"], f"{_id(path)} got [{result['verdict']}]"


def test_the_third_set_is_wide_enough():
    """The set written before the diagnosis by mutation (its README has the census before): at least 40
    answers over at least 15 exercises."""
    assert len(THIRD) >= 40 and len({p.parent.name for p in THIRD}) >= 15
    assert len(FOURTH) >= 40 and len({p.parent.name for p in FOURTH}) >= 15
