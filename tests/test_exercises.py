"""The exercise checkers are real: each fails on its untouched stub and on planted
mistakes (with the hint meant for that mistake), and passes on the solution."""
import inspect
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:          # the exercises live next to the package, not inside it
    sys.path.insert(0, str(ROOT))

from exercises import EXERCISES  # noqa: E402
from exercises.checks import CHECKS, run_check  # noqa: E402
from exercises.cli import load_module  # noqa: E402
from exercises.mistakes import build  # noqa: E402

MISTAKES = build()
PLANTED = [(ex, m) for ex, ms in MISTAKES.items() for m in ms]


def test_every_exercise_has_a_checker_and_two_mistakes():
    assert set(CHECKS) == set(EXERCISES) == set(MISTAKES)
    for ex in EXERCISES:
        assert len(MISTAKES[ex]) >= 2, ex
        assert (ROOT / "exercises" / "stubs" / f"{ex}.py").is_file()
        assert (ROOT / "exercises" / "solutions" / f"{ex}.py").is_file()


@pytest.mark.parametrize("name", list(EXERCISES))
def test_stub_fails(name):
    report = run_check(name, load_module(name, "stubs"))
    assert not report.passed
    assert report.status == "todo"
    assert "not implemented yet" in report.render()


@pytest.mark.parametrize("name", list(EXERCISES))
def test_solution_passes(name):
    report = run_check(name, load_module(name, "solutions"))
    assert report.passed, report.render()
    assert "FAIL" not in report.render()


@pytest.mark.parametrize("name,mistake", PLANTED, ids=[f"{e}-{m.name}" for e, m in PLANTED])
def test_planted_mistake_fails_with_its_hint(name, mistake):
    report = run_check(name, mistake.module)
    text = report.render()
    assert report.status == "fail", text
    assert any(mistake.hint in h for h in report.hints), text


@pytest.mark.parametrize("name", list(EXERCISES))
def test_stub_matches_solution_api(name):
    stub, sol = load_module(name, "stubs"), load_module(name, "solutions")
    funcs = [n for n, f in vars(stub).items() if inspect.isfunction(f) and f.__module__ == stub.__name__]
    assert funcs
    src = inspect.getsource(stub)
    assert "TODO" in src and "NotImplementedError" in src
    for f in funcs:
        assert inspect.signature(getattr(stub, f)) == inspect.signature(getattr(sol, f)), f
        assert getattr(stub, f).__doc__, f"{name}.{f} needs a docstring (shapes, hints)"


def test_verdict_shows_the_error_measure():
    text = run_check("layernorm", MISTAKES["layernorm"][0].module).render()
    assert "max_rel_error" in text and "FAIL" in text and "hint:" in text


def test_partial_work_is_checked_up_to_the_todo(tmp_path):
    """Forward written, backward still a stub: the forward is checked, the backward is TODO."""
    src = (ROOT / "exercises" / "stubs" / "softmax.py").read_text()
    head, tail = src.split("def softmax_backward")
    head = head.replace("    # TODO\n    raise NotImplementedError",
                        "    e = np.exp(x - x.max(axis=-1, keepdims=True))\n"
                        "    p = e / e.sum(axis=-1, keepdims=True)\n    return p, p", 1)
    f = tmp_path / "softmax.py"
    f.write_text(head + "def softmax_backward" + tail)
    report = run_check("softmax", load_module("softmax", str(f)))
    assert report.status == "todo"
    assert any("forward vs minibert" in line and "ok" in line for line in report.lines)


def test_student_exception_is_reported_not_raised(tmp_path):
    f = tmp_path / "gelu.py"
    f.write_text("def gelu_forward(x):\n    return x.nonexistent, None\n\n"
                 "def gelu_backward(dy, cache):\n    return dy\n")
    report = run_check("gelu", load_module("gelu", str(f)))
    assert report.status == "fail"
    assert "AttributeError" in report.render() and "line 2" in report.render()


def _run(*args, cwd=ROOT, env=None):
    return subprocess.run([sys.executable, "-m", "exercises", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_on_the_stubs_fails_cleanly():
    res = _run("check", "all")
    assert res.returncode != 0
    for name in EXERCISES:
        assert f"[TODO] {name}" in res.stdout
    assert "0 of 10 exercises pass" in res.stdout
    assert "Traceback" not in res.stdout + res.stderr


def test_cli_on_a_solution_passes_and_on_a_broken_file_fails(tmp_path):
    assert _run("check", "layernorm", "--solutions").returncode == 0
    bad = tmp_path / "linear.py"
    bad.write_text("def linear_forward(x, W, b)\n    return x\n")   # a syntax error
    res = _run("check", "linear", "--path", str(bad))
    assert res.returncode == 1
    assert "does not compile" in res.stdout
    assert "Traceback" not in res.stdout + res.stderr
    assert _run("check", "nonsense").returncode == 2


def test_make_student_leaves_the_solutions_out(tmp_path):
    res = _run("make-student", str(tmp_path))
    assert res.returncode == 0, res.stderr
    copy = tmp_path / "exercises"
    assert (copy / "stubs" / "layernorm.py").is_file() and (copy / "checks.py").is_file()
    assert not (copy / "solutions").exists() and not (copy / "mistakes.py").exists()
    env = dict(os.environ, PYTHONPATH=str(ROOT))   # minibert importable, the copy's exercises first
    res = _run("check", "layernorm", cwd=tmp_path, env=env)
    assert res.returncode == 1 and "[TODO] layernorm" in res.stdout
    assert str(copy / "stubs") in res.stdout or "exercises/stubs/layernorm.py" in res.stdout
    res = _run("check", "layernorm", "--solutions", cwd=tmp_path, env=env)
    assert res.returncode == 1 and "no solutions" in res.stdout


# ---------------------------------------------------------------- against the references
def test_mlm_rule_matches_minibert_data_module():
    """The exercise's count of predictions is the one minibert's data pipeline uses."""
    pd = pytest.importorskip("minibert.pretraining_data", reason="data module not importable yet")
    from exercises.checks import _expected_predictions
    rng = np.random.default_rng(0)
    for n in (3, 9, 20, 43, 80, 128, 200):
        tokens = ["[CLS]"] + [f"w{i}" for i in range(n - 2)] + ["[SEP]"]
        ref = pd.mask_tokens(tokens, ["a", "b"], rng, 0.15, 20)
        assert len(ref.positions) == _expected_predictions(n, n - 2), n


def test_adamw_solution_matches_torch():
    torch = pytest.importorskip("torch")
    sol = load_module("adamw", "solutions")
    rng = np.random.default_rng(0)
    p0 = rng.standard_normal((4, 3))
    grads = [rng.standard_normal((4, 3)) for _ in range(4)]
    for decay in (True, False):
        wd = 0.1 if decay else 0.0
        tp = torch.tensor(p0.copy(), requires_grad=True)
        opt = torch.optim.AdamW([tp], lr=1e-2, betas=(0.9, 0.999), eps=1e-6, weight_decay=wd)
        p, m, v = p0.copy(), np.zeros_like(p0), np.zeros_like(p0)
        for t, g in enumerate(grads, start=1):
            tp.grad = torch.tensor(g)
            opt.step()
            p, m, v = sol.adamw_step(p, g, m, v, t, lr=1e-2, eps=1e-6, weight_decay=0.1, decay=decay)
        np.testing.assert_allclose(p, tp.detach().numpy(), rtol=1e-12, atol=1e-14)
