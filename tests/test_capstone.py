"""The capstone (exercise ``bert``): the repository's solution passes every stage, the stub is a TODO,
and a fault planted in a piece, in the optimiser or in the assembly is named by the swap diagnosis."""
from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from exercises import pieces  # noqa: E402
from exercises.cases import TABLES  # noqa: E402
from exercises.checks import CHECKS, WHOLE, bert, run_check  # noqa: E402
from exercises.sandbox import check_isolated  # noqa: E402
from exercises.solutions import bert as solution  # noqa: E402


def planted(replace: dict, **functions):
    """The solution's three functions over its globals with ``replace`` written in (a student's file
    whose pieces are these), and any of the three given instead."""
    g = {**vars(solution), **replace}
    out = {name: pieces._with_globals(functions.get(name, getattr(solution, name)), g) for name in bert.FUNCTIONS}
    return types.SimpleNamespace(**out, __name__="bert (planted)")


def case(exercise: str, name: str) -> dict:
    return next(c for c in TABLES[exercise].cases if c.name == name).wrong


def first_failure(report):
    assert report.status in ("fail", "todo"), report.render()
    return report.first_failure


# one fault in each of the model's pieces, the case tables' own wrong functions
PIECE_FAULTS = [
    ("embedding", "embedding", "[PAD] row not zeroed"),
    ("linear", "linear", "dW transposed"),
    ("linear", "linear", "db averaged instead of summed"),
    ("layernorm", "layernorm", "dx without the mean term"),
    ("gelu", "gelu", "derivative without x phi(x)"),
    ("attention", "dropout", "attention backward mask without its scale"),
    ("dropout", "dropout", "a new mask in the backward pass"),
    ("cross_entropy", "cross_entropy", "backward without 1/n_valid"),
    ("pooler", "pooler", "tanh derivative as 1 - tanh"),
]


@pytest.mark.parametrize("piece, exercise, fault", PIECE_FAULTS, ids=[f[2] for f in PIECE_FAULTS])
def test_a_wrong_piece_is_named_by_the_swap(piece, exercise, fault):
    report = run_check("bert", planted(case(exercise, fault)), functions=("bert_forward", "bert_backward"))
    what, hint = first_failure(report)
    assert hint is not None and f"the mistake is in your {piece} " in hint, report.render()
    assert f"exercise {pieces.EXERCISE_OF[piece]}" in hint


@pytest.mark.parametrize("piece, exercise, fault", [
    ("adamw", "adamw", "no bias correction"),
    ("adamw", "adamw", "decays LayerNorm/bias (decay flag ignored)"),
    ("schedule", "schedule", "warm-up counted from 1"),
    ("schedule", "schedule", "each array clipped alone"),
])
def test_a_wrong_optimiser_is_named_by_the_swap(piece, exercise, fault):
    report = run_check("bert", planted(case(exercise, fault)))
    what, hint = first_failure(report)
    assert "12 steps" in what, report.render()
    assert hint is not None and f"the mistake is in your {piece} " in hint, report.render()


def edited(old, new):
    """The solution's module with one edit of its source (or a few, given as tuples): a student's bert.py
    with one slip."""
    source = Path(solution.__file__).read_text()
    for a, b in zip(*((old, new) if isinstance(old, tuple) else ((old,), (new,)))):
        assert source.count(a) == 1, a
        source = source.replace(a, b)
    namespace = {"__name__": "planted_bert"}
    exec(compile(source, "planted_bert.py", "exec"), namespace)
    return types.SimpleNamespace(**{n: namespace[n] for n in bert.FUNCTIONS}, __name__="bert (edited)")


# slips in the assembly itself: no swap of a piece mends them, the loss or the gradients say where they are
ASSEMBLY_SLIPS = [
    (") + dW_decoder", ")", "all 46 gradients", "lacks the decoder's share"),
    ("dh = dh + dcls", "dh = dh", "all 46 gradients", "the SUM of the MLM head's (every position) and the pooler's"),
    ("dh = dsum                                                    # x also", "dh = 0  # x also", "all 46 gradients",
     "the gradient leaving a layer through its input x is the SUM"),
    ("dh = linear(gelu_backward(df, c[P + \"gelu\"]), P + \"intermediate.dense\") + dsum",
     "dh = linear(gelu_backward(df, c[P + \"gelu\"]), P + \"intermediate.dense\")", "all 46 gradients",
     "h feeds the feed-forward block and the residual sum h + f"),
    ("np.arange(T), (B, T)", "np.arange(1, T + 1), (B, T)", "the loss vs minibert's", "positions counted from 1"),
    (("h = norm(h + a, P", "h = norm(h + f, P"), ("h = h + norm(a, P", "h = h + norm(f, P"), "the loss vs minibert's",
     "LayerNorm(f(x)) + x"),
    ("q, k, v, mask, p_attn", "q, k, v, np.ones_like(mask), p_attn", "the loss vs minibert's",
     "without the padding mask"),
    ("return mlm_loss + nsp_loss, c", "return mlm_loss, c", "the loss vs minibert's", "the MLM loss alone"),
]


@pytest.mark.parametrize("old, new, line, named", ASSEMBLY_SLIPS, ids=[s[3][:30] for s in ASSEMBLY_SLIPS])
def test_a_slip_in_the_assembly_is_located(old, new, line, named):
    report = run_check("bert", edited(old, new), functions=("bert_forward", "bert_backward"))
    what, hint = first_failure(report)
    assert line in what and named in hint, report.render()
    assert "the mistake is in bert.py itself" in report.render()


def test_each_forward_mistake_has_its_own_loss():
    """The assembly's usual forward mistakes give losses that differ from BERT's and from each other's,
    and without a mistake the loss is minibert's."""
    from exercises.checks import bert_diagnosis, bert_model
    config, params, batch = bert_model.small_case()
    want, _ = bert_model._reference(config, params, batch)
    assert abs(bert_diagnosis._loss(params, batch, config) - want) < 1e-12 * want
    losses = [want] + [bert_diagnosis._loss(params, batch, config, m) for m in bert_diagnosis.FORWARD_MISTAKES]
    gaps = [abs(a - b) / b for i, a in enumerate(losses) for b in losses[i + 1:]]
    assert min(gaps) > 1e-7


@pytest.mark.parametrize("mistake", ["decay_all", "decay_none"])
def test_a_training_loop_that_decays_wrongly_is_named(mistake):
    decays = (lambda name: True) if mistake == "decay_all" else (lambda name: False)
    report = run_check("bert", planted({"_decays": decays}))
    what, hint = first_failure(report)
    assert "12 steps" in what and hint == bert.LOOP_MISTAKES[mistake], report.render()
    assert "the mistake is in bert.py itself" in report.render()


def test_an_unfinished_piece_is_a_todo_that_names_it():
    def linear_backward(dy, cache):
        raise NotImplementedError
    report = run_check("bert", planted({"linear_backward": linear_backward}),
                       functions=("bert_forward", "bert_backward"))
    assert report.status == "todo"
    assert "your linear is not written yet" in report.render()


def test_the_stub_is_a_todo_with_the_first_stage_hint():
    report = check_isolated("bert", "stubs")
    assert report.status == "todo", report.render()
    text = report.render()
    assert "TODO  bert_forward is not implemented yet" in text
    assert "stage (a) comes first" in text


def test_minibert_pieces_pass_the_piece_exercises():
    """The swap's replacements are right answers of their exercises (else a swap would prove nothing)."""
    by_exercise: dict = {}
    for piece, names in pieces.PIECES.items():
        by_exercise.setdefault(pieces.EXERCISE_OF[piece], []).extend(names)
    for exercise, names in by_exercise.items():
        module = types.SimpleNamespace(**pieces.miniberts(
            [p for p in pieces.PIECES if pieces.EXERCISE_OF[p] == exercise]), __name__=f"minibert's {exercise}")
        report = run_check(exercise, module, functions=names)
        assert report.passed, report.render()
    assert set(CHECKS) == set(WHOLE) | {"wordpiece", "schedule", "step_flops", "classifier_head", "encoder_layer",
                                        "loss_scaler", "ring_allreduce", "seed_comparison", "dropout"}


def test_swapping_leaves_the_students_globals_alone():
    fns = {name: getattr(solution, name) for name in bert.FUNCTIONS}
    swapped = pieces.swapped(fns, ["linear"])
    assert solution.bert_forward.__globals__["linear_forward"].__module__ == "exercises.solutions.linear"
    assert swapped["bert_forward"].__globals__["linear_forward"] is pieces.MINIBERTS["linear_forward"]
    assert swapped["train"].__globals__["bert_forward"].__globals__ is swapped["train"].__globals__


@pytest.mark.slow
def test_the_solution_passes_every_stage_in_a_worker():
    """The whole check as `python -m exercises check bert --solutions` runs it: the model, the short
    and the full training run (400 steps: the time is printed on its line), the held-out loss."""
    report = check_isolated("bert", "solutions")
    assert report.passed, report.render()
    text = report.render()
    for line in ("the loss vs minibert's BertForPreTraining", "all 46 gradients vs minibert's",
                 "with dropout: gradients vs central differences", "12 steps (warm-up 3)",
                 f"{bert.STEPS} steps: the loss curve vs minibert's run", "held-out MLM loss",
                 "skip  (c) the same code on CuPy"):
        assert line in text, text
    print(text)


def test_the_student_copy_holds_the_stub_not_the_solution(tmp_path):
    res = subprocess.run([sys.executable, "-m", "exercises", "make-student", str(tmp_path / "copy")], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    copy = tmp_path / "copy" / "exercises"
    assert not (copy / "solutions").exists()
    stub = (copy / "stubs" / "bert.py").read_text()
    assert "raise NotImplementedError" in stub and "dW_decoder" not in stub
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-m", "exercises", "check", "bert"], cwd=tmp_path / "copy",
                         capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 1
    assert "[TODO] bert" in res.stdout and "stage (a) comes first" in res.stdout, res.stdout + res.stderr


class _OnDevice(np.ndarray):
    """An array 'on a device': what CuPy's arrays have that NumPy's do not, ``get()`` back to the host."""

    def get(self):
        return np.asarray(self).copy()


def test_the_gpu_stage_sends_device_arrays_and_reads_them_back():
    """Stage (c)'s plumbing without a GPU: the inputs go in as the array module's arrays, the loss and
    the gradients come back with get(), and the comparison is stage (a)'s."""
    seen = []

    def asarray(a):
        seen.append(type(a))
        return np.asarray(a).view(_OnDevice)

    xp = types.SimpleNamespace(asarray=asarray)
    fns = {name: getattr(solution, name) for name in bert.FUNCTIONS}
    out = bert.model_stage(fns, xp)
    assert out.passed, out.lines
    assert seen and len(out.lines) == 2                             # the model at evaluation: no dropout
    assert out.lines[0][1].startswith("the loss vs minibert's") and "all 46 gradients" in out.lines[1][1]


HOSTILE = {
    "forward returns None": dict(bert_forward=lambda p, b, c, rng=None: None),
    "a loss of two numbers": dict(bert_forward=lambda p, b, c, rng=None: (np.ones(2), None)),
    "a NaN loss": dict(bert_forward=lambda p, b, c, rng=None: (float("nan"), None)),
    "gradients in a list": dict(bert_backward=lambda c: [1, 2]),
    "gradients in float32": dict(bert_backward=lambda c: {k: v.astype(np.float32)
                                                          for k, v in solution.bert_backward(c).items()}),
    "train returns None": dict(train=lambda *a, **k: None),
    "losses as a string": dict(train=lambda p, b, c, **k: (p, "abc")),
    "parameters of the wrong shapes": dict(train=lambda p, b, c, **k: ({n: np.zeros(3) for n in p}, [1.0] * len(b))),
    "NaN losses": dict(train=lambda p, b, c, **k: (p, [float("nan")] * len(b))),
    "train raises": dict(train=lambda *a, **k: 1 / 0),
}


@pytest.mark.parametrize("what", HOSTILE)
def test_a_hostile_result_is_one_fail_line(what):
    functions = {name: getattr(solution, name) for name in bert.FUNCTIONS}
    functions.update(HOSTILE[what])
    report = run_check("bert", types.SimpleNamespace(**functions, __name__="hostile"))
    assert report.status == "fail", report.render()
    assert "could not use what the functions returned" not in report.render()


def test_a_sys_exit_in_a_notebook_is_a_fail_line_swapped_or_not(capsys):
    """A notebook's check wraps the student's functions against sys.exit(); the capstone's swaps rebuild
    them, and the result is wrapped again: the exit is a FAIL line, never the end of the cell."""
    from exercises.notebook import check

    def bert_forward(params, batch, config, rng=None):
        sys.exit(3)

    assert check("bert", bert_forward=bert_forward, bert_backward=solution.bert_backward) is False
    out = capsys.readouterr().out
    assert "FAIL  bert_forward raised ExitCalled: sys.exit(3) was called" in out, out
