"""The capstone: BERT for pre-training from the student's own pieces, checked in three stages.

(a) **The model.**  ``bert_forward`` and ``bert_backward`` on a small random
    BERT in float64: the loss against minibert's ``BertForPreTraining`` and
    every gradient against minibert's; then, with dropout on, the gradients
    against central differences of the student's own forward pass (the same
    seed, so the same dropout masks, at every call).
(b) **Training.**  ``train`` on the built-in corpus, from minibert's
    initialisation, without dropout so that every step can be compared: first
    a short run (warm-up, peak and decay in 12 steps) whose losses and final
    parameters must be minibert's own run's (``minibert.optim.AdamW``,
    ``linear_warmup_decay``, ``clip_grad_norm``), then the full run, whose loss
    curve must follow minibert's to ``CURVE_TOL`` and whose held-out MLM loss
    must be below the unigram baseline (guessing by word frequency).
(c) **The GPU.**  Stage (a) again with CuPy arrays, where CuPy and a GPU are at
    hand; skipped, with the reason, where they are not.

When a stage fails, the checker puts minibert's version of one piece in place
of the student's (``exercises/pieces.py``), in the course's order, and runs
the stage again: the first piece whose swap makes it pass is named.  When no
single swap does, the assembly itself (``bert.py``) is at fault, and
``bert_diagnosis.py`` (the model) or ``bert_training.py``'s usual loop mistakes
say where.
"""
from __future__ import annotations

from ..pieces import EXERCISE_OF, MODEL_PIECES, PIECES, TRAINING_PIECES
from ..report import Abort, Report
from .bert_model import minibert_model, model_stage, small_case, student_config
from .bert_outcome import Outcome
from .bert_training import (LOOP_MISTAKES, SHORT_STEPS, STEPS, heldout_mlm, last_run,
                            training_data, training_stage)

MODEL_FUNCTIONS = ("bert_forward", "bert_backward")      # stage (a) and (c) need these two
FUNCTIONS = MODEL_FUNCTIONS + ("train",)
# what notebook 13 and the tests use, from the stages' modules
__all__ = ["FUNCTIONS", "LOOP_MISTAKES", "MODEL_FUNCTIONS", "SHORT_STEPS", "STEPS", "check", "heldout_mlm", "last_run", "minibert_model",
           "model_stage", "small_case", "student_config", "training_data", "training_stage"]


# ------------------------------------------------------------------------------ the check
def _find_piece(variant, stage, pieces) -> str | None:
    """The first piece whose swap for minibert's makes ``stage`` pass."""
    for piece in pieces:
        if stage(variant((piece,))).passed:
            return piece
    return None


def _piece_hint(piece: str) -> str:
    names = ", ".join(PIECES[piece])
    exercise = EXERCISE_OF[piece]
    return (f"with minibert's {names} in place of yours, this stage passes: the mistake is in your {piece} "
            f"(exercise {exercise}: python -m exercises check {exercise})")


def _diagnose(variant, stage, pieces, outcome: Outcome) -> str | None:
    piece = _find_piece(variant, stage, pieces)
    if piece is not None:
        if outcome.todo is not None:
            exercise = EXERCISE_OF[piece]
            return (f"your {piece} is not written yet (it raises NotImplementedError): with minibert's in its "
                    f"place this stage passes; do exercise {exercise} first (python -m exercises check {exercise})")
        return _piece_hint(piece)
    whole = stage(variant(pieces))
    if outcome.todo is not None:
        if whole.passed:
            return ("some of your pieces are not written yet (they raise NotImplementedError): with minibert's in "
                    "their place this stage passes; python -m exercises check all says which")
        return FIRST.get(outcome.todo)
    if whole.passed:
        return "more than one of your pieces is wrong: with all of minibert's in place of yours, this stage passes"
    return ASSEMBLY


ASSEMBLY = ("with minibert's pieces in place of all of yours this stage still fails: the mistake is in bert.py "
            "itself, how the pieces are put together")


# what a function still to write is checked against first
FIRST = {
    "bert_forward": "stage (a) comes first: bert_forward's loss and bert_backward's gradients against minibert's "
                    "BertForPreTraining on a small BERT (notebook 13, part 1)",
    "bert_backward": "stage (a) comes first: bert_forward's loss and bert_backward's gradients against minibert's "
                     "BertForPreTraining on a small BERT (notebook 13, part 1)",
    "train": f"stage (b): train runs {SHORT_STEPS} steps, then {STEPS}, against minibert's own run on the same "
             f"batches (notebook 13, part 2)",
}


def gpu_reason() -> str | None:
    """Why stage (c) cannot run here, or None."""
    try:
        import cupy
    except Exception as exc:
        return f"CuPy cannot be imported ({type(exc).__name__})"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no GPU"
    except Exception as exc:
        return f"no GPU ({type(exc).__name__})"
    return None


def check(r: Report, variant, in_process: bool, train: bool = True) -> None:
    """The stages on ``variant(())``, the student's functions; ``variant(pieces)`` gives them with
    minibert's ``pieces`` in place of the student's.  ``train``: False skips stage (b)."""
    a = model_stage(variant(()))
    if not a.passed:
        hint = _diagnose(variant, model_stage, MODEL_PIECES, a)
        a.into(r, hint, own_first=hint == ASSEMBLY)
        r.stopped()
        raise Abort
    a.into(r)
    if train:
        b = training_stage(variant(()))
        if not b.passed:
            # the short run's failure is diagnosed on the short run, in seconds; the full run's on the full run
            full = training_stage(variant(()), full=False).passed
            hint = _diagnose(variant, lambda f: training_stage(f, full=full), TRAINING_PIECES, b)
            b.into(r, hint, own_first=hint == ASSEMBLY)
            r.stopped()
            raise Abort
        b.into(r)
    fns = variant(())
    reason = gpu_reason() if in_process else "the worker process exchanges NumPy arrays; run the GPU stage in a notebook"
    if reason is not None:
        r.lines.append(f"  skip  (c) the same code on CuPy: {reason}")
        return
    import cupy
    c = model_stage(fns, cupy)
    c.into(r)
