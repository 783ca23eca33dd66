"""The student copy's usual mistakes are data, not code (exercises/cases/recorded.py), and give the
same hints: each case planted in the checker, its values looked up in the recording instead of
computed, gets its own hint under the first FAIL line; right answers still pass; and the copy holds
no right answer, neither as a table's functions nor as their source lines."""
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from exercises import EXERCISES  # noqa: E402
from exercises.cases import TABLES  # noqa: E402
from exercises.checks import run_check  # noqa: E402
from test_exercises import first_fail, hint_pattern  # noqa: E402


@pytest.mark.parametrize("name", list(EXERCISES))
def test_the_recorded_table_gives_every_case_its_hint(name, replayed):
    table = replayed(name)
    assert run_check(name, table.module).passed, name
    for case in table.cases:
        text = run_check(name, case.module).render()
        line, hint = first_fail(text)
        assert hint_pattern(case.hint).search(hint), f"{case.name}: first FAIL line: {line.strip()}\n\n{text}"
    for variant, module in table.variants:
        report = run_check(name, module)
        assert report.passed, f"{variant}\n{report.render()}"


def test_every_computation_of_every_check_is_recorded(recorded_cases):
    """No check asks about a computation that closes over something fingerprint.key cannot name:
    such a computation would go unrecorded, and its hint would be lost in the student copy."""
    from exercises.cases.recorded import unkeyable
    assert unkeyable(recorded_cases) == []


def test_a_lost_recording_gives_no_hint_never_a_wrong_one(replayed):
    """A computation the recording does not hold (here: all of them) finds no case: the report
    falls back to the check's own rule, and names no mistake the student did not make."""
    table = replayed("gelu")
    table.recorded = {}
    case = next(c for c in table.cases if c.name == "dy left out")
    line, hint = first_fail(run_check("gelu", case.module).render())
    assert "dx" in line and "chain rule" not in hint


def test_the_recording_names_each_computation_the_same_way_again():
    """A key is a digest of the computation as written and of what it closes over: the same for a
    fresh closure over equal inputs, another for other inputs, none for the student's own function."""
    import numpy as np
    from exercises.cases.fingerprint import Unkeyable, key

    def make(x):
        return lambda m: m.f(x)[0]
    x = np.linspace(-1, 1, 7)
    a, b, c = make(x), make(x.copy()), make(x + 1e-3)
    for f in (a, b, c):
        f.__module__ = "exercises.probe"
    assert key("e", a) == key("e", b) != key("e", c)
    assert key("e", a) != key("other", a)
    with pytest.raises(Unkeyable):
        key("e", lambda m: m.f(x))            # a function of this test module, not of the exercises
    holds_students = make(lambda v: v)        # closes over a function of the student's (this module's)
    holds_students.__module__ = "exercises.probe"
    with pytest.raises(Unkeyable):
        key("e", holds_students)


@pytest.fixture(scope="module")
def student_copy(tmp_path_factory, recorded_cases):
    copy = tmp_path_factory.mktemp("student")
    res = subprocess.run([sys.executable, "-m", "exercises", "make-student", str(copy)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return copy


def _distinctive_lines(func):
    """The lines of a function's body worth finding elsewhere: code, not docstrings or short lines."""
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError):
        return []
    lines = [line.strip() for line in source.splitlines()[1:]]
    return [line for line in lines if len(line) > 30 and not line.startswith(("#", '"', "'", "return"))]


def test_the_student_copy_holds_no_right_answer(student_copy):
    """No module of the copy but the stubs defines a function of an exercise (the tables did), and no
    line of a table's right functions or right variants is in its code.  The checkers compute what
    they expect, with minibert or inline, and the third hint gives a formula by design: both are
    left out of the line search."""
    files = [p for p in (student_copy / "exercises").rglob("*.py") if "stubs" not in p.parts]
    for name, table in TABLES.items():
        for func in table.functions:
            for path in files:
                assert f"def {func}(" not in path.read_text(), f"{path} defines {func}"
    text = "\n".join(p.read_text() for p in files if "checks" not in p.parts and p.name != "hints.py")
    for name, table in TABLES.items():
        functions = [*table.right.values(), *(f for _, m in table.variants for f in vars(m).values())]
        for func in functions:
            if not getattr(func, "__module__", "").startswith("exercises."):
                continue                      # minibert's own function: the library the copy needs
            for line in _distinctive_lines(func):
                assert line not in text, f"{name}: {func.__qualname__}'s line {line!r} is in the student copy"
    assert not (student_copy / "exercises" / "solutions").exists()
    assert (student_copy / "exercises" / "cases" / "recorded.data").is_file()


@pytest.mark.parametrize("name", ["seed_comparison", "ring_allreduce", "step_flops", "loss_scaler", "layernorm"])
def test_in_the_student_copy_the_table_holds_no_answer_to_take(student_copy, tmp_path, name):
    """The five exercises whose table's right functions passed as a student's file before: now the
    table has none to take, and the check fails."""
    (tmp_path / f"{name}.py").write_text(f"from exercises.cases.{name} import TABLE\n"
                                         "globals().update(TABLE.right)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))        # minibert importable, the copy's exercises first
    res = subprocess.run([sys.executable, "-m", "exercises", "check", name, "--path", str(tmp_path / f"{name}.py")],
                         cwd=student_copy, capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"[PASS] {name}" not in res.stdout and "Traceback" not in res.stdout + res.stderr
