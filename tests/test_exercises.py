"""The exercise checkers are real: each fails on its untouched stub and on planted
mistakes (every case of exercises/cases/, with that case's hint under the first
FAIL line), and passes on the solution and on right answers written differently."""
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:          # the exercises live next to the package, not inside it
    sys.path.insert(0, str(ROOT))

from exercises import CHECKABLE, EXERCISES  # noqa: E402
from exercises.checks import CHECKS, run_check  # noqa: E402
from exercises.cli import LoadError, load_module  # noqa: E402
from exercises.cases import TABLES  # noqa: E402

PLANTED = [(ex, case) for ex, table in TABLES.items() for case in table.cases]
VARIANTS = [(ex, name, module) for ex, table in TABLES.items() for name, module in table.variants]
# how many planted mistakes each exercise had before they became one table (the first eleven), or when it was
# written with its table (the others): never fewer
CASES_BEFORE = {"wordpiece": 15, "linear": 4, "embedding": 2, "layernorm": 8, "gelu": 5, "softmax": 5,
                "attention": 15, "cross_entropy": 5, "dropout": 11, "mlm_masking": 11, "nsp_pairing": 9,
                "pooler": 14, "adamw": 5, "schedule": 17, "step_flops": 11, "classifier_head": 13,
                "encoder_layer": 14, "loss_scaler": 12, "ring_allreduce": 11, "seed_comparison": 14}


def first_fail(text: str):
    """The first FAIL line of a rendered report and the hint printed under it ('' if none)."""
    lines = text.splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith("  FAIL"))
    hints = []
    for line in lines[i + 1:]:
        if not line.startswith("        hint: "):
            break
        hints.append(line[len("        hint: "):])
    return lines[i], " ".join(hints)


def hint_pattern(hint: str):
    """A case's hint as a pattern: each {field} the check fills in (a size, a share) matches any text."""
    return re.compile(".+?".join(re.escape(part) for part in re.split(r"\{[^{}]*\}", hint)))


def test_every_exercise_has_a_checker_and_its_table_of_mistakes():
    assert set(CHECKS) == set(EXERCISES) == set(TABLES)
    for ex in EXERCISES:
        assert len(TABLES[ex].cases) >= CASES_BEFORE[ex], ex
        assert len({case.name for case in TABLES[ex].cases}) == len(TABLES[ex].cases), ex
        assert (ROOT / "exercises" / "stubs" / f"{ex}.py").is_file()
        assert (ROOT / "exercises" / "solutions" / f"{ex}.py").is_file()


def test_the_readme_counts_the_planted_mistakes_and_right_answers_the_tests_run():
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    sizes = [len(table.cases) for table in TABLES.values()]
    words = {3: "three", 25: "twenty-five"}      # a size not here: write its word into the README and here
    assert (f"({words[min(sizes)]} to {words[max(sizes)]} per exercise, {len(PLANTED)} in all)" in text
            and f"on {len(VARIANTS)} right answers written differently" in text)


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


@pytest.mark.parametrize("name,case", PLANTED, ids=[f"{e}-{c.name}" for e, c in PLANTED])
def test_planted_mistake_fails_with_its_hint(name, case):
    """The case's own hint is the one under the FIRST FAIL line, the one the student reads: the
    checker recognised the case (by its value, its exception or the sign it leaves)."""
    report = run_check(name, case.module)
    text = report.render()
    assert report.status == "fail", text
    line, hint = first_fail(text)
    assert hint_pattern(case.hint).search(hint), f"first FAIL line: {line.strip()}\n\n{text}"
    assert report.first_failure == (line[len("  FAIL  "):], hint), text
    later = [h for what, h in report.failures[1:] if h]
    assert all(h == report.failures[0][1] for h in later), f"a later FAIL line's hint names another mistake:\n{text}"


def test_one_diagnosis_per_report():
    """After the first hint, a FAIL line with a different hint shows none: the report names one mistake."""
    from exercises.report import Report
    r = Report("x")
    r.fail("first", "the mean term is missing")
    r.fail("second", "the variance term is missing")
    r.fail("third", "the mean term is missing")
    assert r.failures == [("first", "the mean term is missing"), ("second", None), ("third", "the mean term is missing")]
    assert r.render().count("hint:") == 1
    r = Report("y")
    r.fail("no hint here")
    r.fail("then one", "a hint")
    assert r.first_failure == ("no hint here", None) and r.failures[1] == ("then one", "a hint")


def test_the_first_flops_probe_tells_every_miscount_apart():
    """step_flops' first probe has sizes where no two usual miscounts (nor one and the right count) give the
    same total, so the first FAIL line's hint is the student's miscount, not another with the same number."""
    from exercises.checks.step_flops import CONFIGS
    table, sizes = TABLES["step_flops"], CONFIGS[0][1:]
    totals = [case.module.training_step_flops(*sizes) for case in table.cases if "training_step_flops" in case.wrong]
    totals.append(table.module.training_step_flops(*sizes))
    assert len(totals) >= 9 and len(set(totals)) == len(totals), totals


def test_a_wrong_value_no_usual_mistake_explains_is_described_by_its_relation_to_the_right_one():
    """harness.relation: what the numbers alone say when no case matches (a factor, the sign, a transpose, the
    right numbers elsewhere, the rows that differ), and nothing when they say nothing."""
    from exercises.harness import relation
    rng = np.random.default_rng(0)
    want = rng.standard_normal((4, 3, 3))
    assert "twice" in relation(2 * want, want) and "half" in relation(0.5 * want, want)
    assert "3 times" in relation(3 * want, want)
    assert relation(want / 4, want, "dx").startswith("dx: every entry is 1/4 of the right one: divided by 4 (the size "
                                                     "of axis 0)")
    assert "1.5 times" in relation(1.5 * want, want) and "a constant factor" in relation(1.5 * want, want)
    assert "wrong sign" in relation(-want, want)
    assert "transposed" in relation(np.swapaxes(want, -1, -2), want)
    assert "wrong places" in relation(want.reshape(3, 4, 3).swapaxes(0, 1).reshape(4, 3, 3), want)
    rows = want.copy()
    rows[0, 1] += 1.0
    assert "right in 11 of the 12 rows" in relation(rows, want) and "row 1:" in relation(rows, want)
    assert relation(want + rng.standard_normal(want.shape), want) is None
    assert relation(want[0], want) is None and relation(want, np.zeros_like(want)) is None
    averaged = want.copy()                       # rows each divided by a count of their own: a sum averaged
    averaged[0, 0] /= 3
    averaged[2, 1] /= 2
    text = relation(averaged, want, "dW")
    assert text.startswith("dW: right in 10 of the 12 rows") and "row 0 by 3, row 7 by 2" in text, text
    assert "averaged" in text
    scaled = want.copy()
    scaled[1, 2] *= 1.7
    assert "row 5 1.7 times" in relation(scaled, want)


def test_a_table_passes_its_own_checker():
    """The right functions the cases are built on pass: a case fails by its own change alone."""
    for name, table in TABLES.items():
        assert run_check(name, table.module).passed, name


def test_the_hint_pattern_fills_the_fields():
    assert hint_pattern("the row padding_idx={padding_idx} ([PAD])").search("the row padding_idx=0 ([PAD])")
    assert not hint_pattern("got {n} with max_len={max_len}").search("got 9 with max_len")


@pytest.mark.parametrize("name,variant,module", VARIANTS, ids=[f"{e}-{v}" for e, v, _ in VARIANTS])
def test_correct_variant_passes(name, variant, module):
    """Right answers written another way (google-research/bert's among them) pass."""
    report = run_check(name, module)
    assert report.passed, report.render()


def test_a_structural_failure_is_reported_once(tmp_path):
    """An exception stops the check with one note; nothing after it repeats the failure."""
    report, text = _failing_solution(tmp_path, "softmax", "return p * (dp - (dp * p).sum(axis=-1, keepdims=True))",
                                     "return p * (dp - (dp * p).sum(axis=-1))")
    lines = text.splitlines()
    assert sum(line.startswith("  FAIL") for line in lines) == 1, text
    assert "keepdims=True" in first_fail(text)[1], text
    notes = [i for i, line in enumerate(lines) if "were not run" in line]
    assert len(notes) == 1 and lines[notes[0] + 1].startswith("  ->"), text


def test_layernorm_default_eps_is_the_stubs():
    """The checker holds layernorm_forward without eps to the default the stub's signature gives."""
    from exercises.checks.layernorm import DEFAULT_EPS
    stub = load_module("layernorm", "stubs")
    assert inspect.signature(stub.layernorm_forward).parameters["eps"].default == DEFAULT_EPS


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
    text = run_check("layernorm", TABLES["layernorm"].cases[0].module).render()
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
                          capture_output=True, text=True, timeout=300)


def test_cli_on_the_stubs_fails_cleanly():
    res = _run("check", "all")
    assert res.returncode != 0
    for name in CHECKABLE:                      # the pieces, the questions, then the capstone
        assert f"[TODO] {name}" in res.stdout
    assert f"0 of {len(CHECKABLE)} exercises pass" in res.stdout
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
    """The copy has the stubs, the checkers and the table of mistakes as recorded data, never the
    solutions; and it checks, with the same hints (test_student_cases.py), without them."""
    res = _run("make-student", str(tmp_path))
    assert res.returncode == 0, res.stderr
    copy = tmp_path / "exercises"
    assert (copy / "stubs" / "layernorm.py").is_file() and (copy / "checks" / "layernorm.py").is_file()
    assert (copy / "cases" / "layernorm.py").is_file()
    assert not (copy / "solutions").exists()
    assert not any(".solutions" in f.read_text() for f in (copy / "cases").glob("*.py")), "a case uses a solution"
    env = dict(os.environ, PYTHONPATH=str(ROOT))   # minibert importable, the copy's exercises first
    res = _run("check", "layernorm", cwd=tmp_path, env=env)
    assert res.returncode == 1 and "[TODO] layernorm" in res.stdout
    assert str(copy / "stubs") in res.stdout or "exercises/stubs/layernorm.py" in res.stdout
    res = _run("check", "layernorm", "--solutions", cwd=tmp_path, env=env)
    assert res.returncode == 1 and "no solutions" in res.stdout
    wrong = tmp_path / "gelu.py"                   # a usual mistake, recognised in the copy by its case
    wrong.write_text("import math\nimport numpy as np\nfrom scipy.special import erf\n\n"
                     "def gelu_forward(x):\n    cdf = 0.5 * (1.0 + erf(x / 2))\n    return x * cdf, (x, cdf)\n\n"
                     "def gelu_backward(dy, cache):\n    x, cdf = cache\n"
                     "    return dy * (cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi))\n")
    res = _run("check", "gelu", "--path", str(wrong), cwd=tmp_path, env=env)
    assert res.returncode == 1 and "erf's argument is x / sqrt(2), not x / 2" in res.stdout, res.stdout


# ---------------------------------------------------------------- against the references
def test_mlm_rule_matches_minibert_data_module():
    """The exercise's count of predictions is the one minibert's data pipeline uses."""
    pd = pytest.importorskip("minibert.data.pretraining_data", reason="data module not importable yet")
    from exercises.checks.mlm_runner import expected_predictions
    rng = np.random.default_rng(0)
    for n in (3, 9, 20, 43, 80, 128, 200):
        tokens = ["[CLS]"] + [f"w{i}" for i in range(n - 2)] + ["[SEP]"]
        ref = pd.mask_tokens(tokens, ["a", "b"], rng, 0.15, 20)
        assert len(ref.positions) == expected_predictions(n, n - 2), n


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


# ---------------------------------------------------------------- wrong answers the checks must catch
def _solution_with(tmp_path, name, old, new):
    """The solution of ``name`` with ``old`` replaced by ``new``, written to tmp_path and checked."""
    src = (ROOT / "exercises" / "solutions" / f"{name}.py").read_text()
    assert src.count(old) == 1, f"{old!r} is not (once) in the solution of {name}"
    f = tmp_path / f"{name}.py"
    f.write_text(src.replace(old, new))
    report = run_check(name, load_module(name, str(f)))
    return report, report.render()


def _failing_solution(tmp_path, name, old, new):
    """``_solution_with``, which must fail: (report, text)."""
    report, text = _solution_with(tmp_path, name, old, new)
    assert report.status == "fail", text
    return report, text


FLOAT32 = {   # results returned in float32: float32 rounding lies below the 1e-7 threshold
    "linear dx": ("linear", "return dx, dW, db", "return dx.astype('float32'), dW, db", "dx"),
    "layernorm dx": ("layernorm", "return dx, dgamma, dbeta", "return dx.astype('float32'), dgamma, dbeta",
                     "dx"),
    "gelu dx": ("gelu", "return dy * (cdf + x * pdf)", "return (dy * (cdf + x * pdf)).astype('float32')",
                "dx"),
    "softmax forward": ("softmax", "return p, p", "return p.astype('float32'), p", "p"),
    "embedding dW": ("embedding", "return dW", "return dW.astype('float32')", "dW (padding_idx=None)"),
    "cross-entropy loss": ("cross_entropy", "return loss, cache", "return np.float32(loss), cache", "loss"),
    "dropout out": ("dropout", "return x * mask, mask", "return (x * mask).astype('float32'), mask",
                    "out (train=True)"),
}


@pytest.mark.parametrize("case", list(FLOAT32))
def test_a_float32_result_fails_and_says_so(tmp_path, case):
    name, old, new, what = FLOAT32[case]
    report, text = _failing_solution(tmp_path, name, old, new)
    assert f"{what}: the check runs in float64; your code returned float32" in text
    assert not any("flatten" in h for h in report.hints), text


def test_a_float32_linear_layer_is_not_blamed_on_the_backward_pass(tmp_path):
    to_float32 = "    x, W, b = (a.astype('float32') for a in (x, W, b))\n"
    report, text = _solution_with(tmp_path, "linear", "    y = x @ W.T + b", to_float32 + "    y = x @ W.T + b")
    assert "returned float32" in text
    assert "vs numerical gradient" not in text and not any("flatten" in h for h in report.hints), text


IN_PLACE = {   # changing an argument in place: the returned values are right, the caller's arrays are not
    "gelu dy *=": ("gelu", "    return dy * (cdf + x * pdf)", "    dy *= cdf + x * pdf\n    return dy",
                   "gelu_backward changed dy (the upstream gradient) in place"),
    "softmax dp -=": ("softmax", "    return p * (dp - (dp * p).sum(axis=-1, keepdims=True))",
                      "    dp -= (dp * p).sum(axis=-1, keepdims=True)\n    dp *= p\n    return dp",
                      "softmax_backward changed dp (the upstream gradient) in place"),
    "layernorm g = dy": ("layernorm", "    g = dy * gamma", "    g = dy\n    g *= gamma",
                         "layernorm_backward changed dy (the upstream gradient) in place"),
    "linear dy wiped": ("linear", "    return dx, dW, db", "    dy[...] = 0.0\n    return dx, dW, db",
                        "linear_backward changed dy (the upstream gradient) in place"),
    "attention into probs": ("attention",
                             "    dscores = probs * (dprobs - (dprobs * probs).sum(axis=-1, keepdims=True))",
                             "    probs *= dprobs - (dprobs * probs).sum(axis=-1, keepdims=True)\n"
                             "    dscores = probs",
                             "attention_backward changed cache[3] (an array of the cache) in place"),
    "layernorm x -= mu": ("layernorm", "    xc = x - mu", "    x -= mu\n    xc = x",
                          "layernorm_forward changed x (an input) in place"),
    "softmax x -= max": ("softmax", "    z = x - x.max(axis=-1, keepdims=True)",
                         "    x -= x.max(axis=-1, keepdims=True)\n    z = x",
                         "softmax_forward changed x (an input) in place"),
    "cross-entropy logits -= max": ("cross_entropy", "    z = logits - logits.max(axis=1, keepdims=True)",
                                    "    logits -= logits.max(axis=1, keepdims=True)\n    z = logits",
                                    "softmax_cross_entropy_forward changed logits (an input) in place"),
    "dropout dout *= mask": ("dropout", "    return dout if mask is None else dout * mask",
                             "    if mask is not None:\n        dout *= mask\n    return dout",
                             "dropout_backward changed dout (the upstream gradient) in place"),
}


@pytest.mark.parametrize("case", list(IN_PLACE))
def test_changing_an_argument_in_place_fails_and_says_which(tmp_path, case):
    name, old, new, message = IN_PLACE[case]
    report, text = _failing_solution(tmp_path, name, old, new)
    assert message in text
    assert any("residual connection" in h or "used again" in h for h in report.hints), text
    # the values are right: no gradient check fails, so the backward pass is not blamed
    assert not any(line.startswith("  FAIL") and "numerical gradient" in line for line in report.lines), text


def test_dropout_in_place_is_named_before_what_it_breaks(tmp_path):
    """x *= mask in dropout_forward also overwrites attention's P, and its gradients go wrong:
    the first FAIL line names the cause, the in-place change."""
    report, text = _failing_solution(tmp_path, "dropout", "    return x * mask, mask",
                                     "    x *= mask\n    return x, mask")
    line, hint = first_fail(text)
    assert "dropout_forward changed x (an input) in place" in line and "residual connection" in hint, text


HINTS = {   # usual mistakes and a piece of the hint each must get
    "softmax p * dp": ("softmax", "return p * (dp - (dp * p).sum(axis=-1, keepdims=True))", "return p * dp",
                       "missing the term that subtracts"),
    "gelu tanh derivative": ("gelu", "    return dy * (cdf + x * pdf)",
                             "    c = math.sqrt(2 / math.pi)\n"
                             "    t = np.tanh(c * (x + 0.044715 * x ** 3))\n"
                             "    return dy * (0.5 * (1 + t)\n"
                             "                 + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x))",
                             "derivative of the tanh approximation"),
    "cross-entropy without 1/n_valid": ("cross_entropy", "(dloss / n_valid)", "dloss",
                                        "1/n_valid of the mean is missing"),
    "cross-entropy 1/n_valid twice": ("cross_entropy", "(dloss / n_valid)", "(dloss / n_valid / n_valid)",
                                      "divide by n_valid once"),
    "attention dk not transposed": ("attention", "dk = dscores.swapaxes(-1, -2) @ q", "dk = dscores @ q",
                                    "transpose dS"),
    "attention dv not transposed": ("attention", "dv = probs.swapaxes(-1, -2) @ dout", "dv = probs @ dout",
                                    "dv = P^T dout"),
    "attention dq masked": ("attention", "    return dq, dk, dv",
                            "    return dq * (probs.sum(-2)[..., None] > 0), dk, dv",   # zero at padded keys
                            "do not mask dq"),
    "linear dW divided by N": ("linear", "dW = dy2.T @ x2 ", "dW = dy2.T @ x2 / len(x2) ",
                               "SUM over the rows of dy^T @ x"),
    "linear dW of the first sequence": ("linear", "dW = dy2.T @ x2 ",
                                        "dW = dy[0].T @ x[0] if dy.ndim == 3 else dy2.T @ x2 ",
                                        "flatten x and dy to 2-D"),
    "mlm replace=True": ("mlm_masking", "replace=False", "replace=True", "replace=False"),
}


@pytest.mark.parametrize("case", list(HINTS))
def test_usual_mistake_gets_its_hint(tmp_path, case):
    name, old, new, hint = HINTS[case]
    report, text = _failing_solution(tmp_path, name, old, new)
    assert hint in first_fail(text)[1], text


def test_hints_that_do_not_fit_are_not_given(tmp_path):
    # dW / N: not a flattening problem
    report, text = _solution_with(tmp_path, "linear", "dW = dy2.T @ x2 ", "dW = dy2.T @ x2 / len(x2) ")
    assert not any("flatten" in h for h in report.hints), text
    # replace=True gives FEWER predictions than n, never more
    report, text = _solution_with(tmp_path, "mlm_masking", "replace=False", "replace=True")
    assert not any("never more than max_predictions" in h or "coin flip" in h for h in report.hints), text


@pytest.mark.parametrize("valid", ["labels != -100", "labels >= 0"])
def test_cross_entropy_must_use_its_ignore_index(tmp_path, valid):
    report, text = _failing_solution(tmp_path, "cross_entropy", "valid = labels != ignore_index",
                                     f"valid = {valid}")
    assert any("ignore_index argument" in h for h in report.hints), text


def test_a_file_not_named_py_is_read_as_python(tmp_path):
    """A student who saves gelu.txt or gelu.py.txt (a browser's download) gets a verdict, not
    a traceback: the file is Python whatever its name ends with."""
    solution = (ROOT / "exercises" / "solutions" / "gelu.py").read_text()
    for name in ("gelu.txt", "gelu.py.txt"):
        f = tmp_path / name
        f.write_text(solution)
        res = _run("check", "gelu", "--path", str(f))
        assert res.returncode == 0, res.stdout + res.stderr
        assert res.stdout.startswith(f"[PASS] gelu  ({f})")
        assert load_module("gelu", str(f)).gelu_forward is not None
    f.write_text((ROOT / "exercises" / "stubs" / "gelu.py").read_text())
    res = _run("check", "gelu", "--path", str(f))
    assert res.returncode == 1 and "[TODO] gelu" in res.stdout
    assert "Traceback" not in res.stdout + res.stderr and "loader" not in res.stdout


def test_an_exception_at_import_is_reported_with_its_line(tmp_path):
    f = tmp_path / "linear.py"
    f.write_text("import numpy as np\n\nSCALE = undefined_name * 2\n")
    with pytest.raises(LoadError) as err:
        load_module("linear", str(f))
    assert "NameError" in str(err.value) and "line 3" in str(err.value)
    assert "undefined_name * 2" in str(err.value)


def test_a_missing_file_gets_a_hint_that_fits(tmp_path):
    with pytest.raises(LoadError) as err:
        load_module("linear", str(tmp_path / "no_such.py"))
    assert "does not exist" in err.value.hint and "import" not in err.value.hint
    with pytest.raises(LoadError) as err:
        load_module("linear", str(tmp_path))          # a directory without linear.py
    assert "linear.py" in err.value.hint and "import" not in err.value.hint


def test_a_random_replacement_that_avoids_the_original_fails(tmp_path):
    # BERT draws the random token from every ordinary id, the original one included
    report, text = _solution_with(tmp_path, "mlm_masking", "int(rng.choice(ordinary))",
                                  "int(rng.choice(ordinary[ordinary != ids[pos]]))")
    assert not report.passed, text
    assert "the original one included" in text


# ------------------------------------------------------------ tiered hints: the idea, the shapes, the formula
@pytest.mark.parametrize("name", list(EXERCISES))
def test_every_exercise_has_three_tiers_of_hints(name):
    from exercises.hints import HINTS
    assert len(HINTS.get(name, ())) == 3 and all(tier.strip() for tier in HINTS[name]), name


@pytest.mark.parametrize("name,formula", [("layernorm", "mean(g * xhat)"), ("attention", "dS k / sqrt(D)"),
                                          ("dropout", "dPd * mask"), ("linear", "G^T X"),
                                          ("softmax", "sum(dp * p")])
def test_the_stub_leaves_the_derivation_to_the_hints(name, formula):
    from exercises.hints import HINTS
    stub = (ROOT / "exercises" / "stubs" / f"{name}.py").read_text()
    assert formula in HINTS[name][2]
    assert formula not in stub, f"the {name} stub gives the formula away"
    assert f"python -m exercises hint {name}" in stub, f"the {name} stub does not say where the hints are"


def test_cli_hint_gives_one_tier_at_a_time():
    from exercises.hints import HINTS
    res = _run("hint", "layernorm", "2")
    assert res.returncode == 0 and HINTS["layernorm"][1].split(".")[0] in res.stdout
    assert HINTS["layernorm"][2].split(",")[0] not in res.stdout        # the formula waits for level 3
    bad = _run("hint", "layernorm", "4")
    assert bad.returncode == 2 and "hints 1 to 3" in bad.stderr and "Traceback" not in bad.stderr
    assert _run("hint", "nonsense").returncode == 2


# ---------------------------------------------------------------- make-student keeps the instructor's files
def _tree_digest(*folders) -> dict:
    import hashlib
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for folder in folders for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.parametrize("target", [".", "exercises", "exercises/stubs", ".."], ids=["is", "inside", "deeper", "holds"])
def test_make_student_refuses_the_repository(target):
    """--force on the repository, a folder inside it or one that holds it: one line, and not a byte
    of the solutions, checkers, cases or notebooks changed."""
    before = _tree_digest(ROOT / "exercises", ROOT / "notebooks")
    res = _run("make-student", target, "--force", cwd=ROOT)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "repository" in res.stderr, res.stderr
    assert _tree_digest(ROOT / "exercises", ROOT / "notebooks") == before


def test_make_student_force_replaces_only_its_own_copy(tmp_path):
    copy = tmp_path / "course"
    assert _run("make-student", str(copy)).returncode == 0
    assert (copy / ".minibert-student-copy").is_file()
    (copy / "exercises" / "stubs" / "gelu.py").write_text("# a student's work in progress\n")
    res = _run("make-student", str(copy))                       # without --force: nothing touched
    assert res.returncode == 2 and "--force" in res.stderr and "Traceback" not in res.stderr
    assert (copy / "exercises" / "stubs" / "gelu.py").read_text().startswith("# a student's")
    assert _run("make-student", str(copy), "--force").returncode == 0
    assert "raise NotImplementedError" in (copy / "exercises" / "stubs" / "gelu.py").read_text()
    assert not [p for p in copy.iterdir() if p.name.startswith(".student-copy-")]   # nothing left beside

    other = tmp_path / "someone_elses"                          # not a copy it made: refused
    (other / "exercises").mkdir(parents=True)
    (other / "exercises" / "mine.txt").write_text("keep me")
    res = _run("make-student", str(other), "--force")
    assert res.returncode == 2 and "no student copy made by make-student" in res.stderr
    assert (other / "exercises" / "mine.txt").read_text() == "keep me"


def test_make_student_bad_targets_are_one_line(tmp_path):
    blocked = tmp_path / "a_file"
    blocked.write_text("x")
    linked = tmp_path / "linked"
    assert _run("make-student", str(linked)).returncode == 0
    (linked / "notebooks").rename(tmp_path / "nb")
    (linked / "notebooks").symlink_to(tmp_path / "nb")
    for target, words in ((blocked, "is a file"), (blocked / "sub", "Not a directory"),
                          (linked, "is a symbolic link")):
        res = _run("make-student", str(target), "--force")
        assert res.returncode == 2 and words in res.stderr and "Traceback" not in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert (tmp_path / "nb").is_dir()


def test_a_students_message_cannot_print_a_line_of_the_report():
    """An exception message with line breaks stays on its FAIL line: it cannot add a line that reads
    like the report's own ([PASS], ok) under the verdict."""
    from types import SimpleNamespace
    fake = "no\n[PASS] gelu\n  ok    forward vs minibert\r\n  -> passed: all 2 checks are right."

    def gelu_forward(x):
        raise ValueError(fake)
    module = SimpleNamespace(gelu_forward=gelu_forward, gelu_backward=TABLES["gelu"].module.gelu_backward)
    text = run_check("gelu", module).render()
    lines = text.splitlines()
    assert lines[0].startswith("[FAIL] gelu") and not any(
        line.startswith(("[PASS]", "  ok", "  -> passed")) for line in lines), text
    assert "no\\n[PASS] gelu" in text
