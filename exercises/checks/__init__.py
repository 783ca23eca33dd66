"""One checker per exercise, one module each.

``run_check(name, module)`` runs the checker of exercise ``name`` on
``module`` (the student's file, the solution, or anything with the same
functions) and returns a ``Report``.  Layers are compared with minibert's
reference implementation and gradient-checked against central differences
of the student's own forward pass, in float64, with ``max_rel_error``
(the largest error relative to the largest entry) below 1e-7.  The data
exercises are checked against BERT's rules, structurally on every example
and statistically over many; AdamW against ``minibert.optim.AdamW`` to 1e-12.
A failure's hint comes from the exercise's table of usual mistakes
(``exercises/cases/``).
"""
from __future__ import annotations

import warnings

import numpy as np

from .. import CAPSTONE, QUESTIONS
from ..calls import no_exit
from ..cases import TABLES
from ..cases.table import PASSED
from ..pieces import swapped
from ..remote import RemoteModule, WorkerGone
from ..report import Abort, Report
from . import adamw, attention, attention_dropout, bert, classifier_head, cross_entropy, dropout, embedding, encoder_layer
from . import gelu, layernorm, linear, mlm_masking, nsp_pairing, pooler, schedule, seed_comparison, softmax
from . import loss_scaler, questions, ring_allreduce, step_flops, wordpiece

# The parts of an exercise whose functions a notebook checks one at a time (``check("schedule",
# learning_rate=...)``): each part names the functions it calls.  The other exercises are one part.
PARTS = {"wordpiece": wordpiece.PARTS, "schedule": schedule.PARTS, "step_flops": step_flops.PARTS,
         "classifier_head": classifier_head.PARTS, "encoder_layer": encoder_layer.PARTS,
         "loss_scaler": loss_scaler.PARTS, "ring_allreduce": ring_allreduce.PARTS,
         "seed_comparison": seed_comparison.PARTS,
         # dropout alone, then on the attention weights: one exercise
         "dropout": ((("dropout_forward", "dropout_backward"), dropout.check),
                     (("attention_dropout_forward", "attention_dropout_backward"), attention_dropout.check))}
WHOLE = {"linear": linear.check, "embedding": embedding.check, "layernorm": layernorm.check, "gelu": gelu.check,
         "softmax": softmax.check, "attention": attention.check, "cross_entropy": cross_entropy.check,
         "mlm_masking": mlm_masking.check, "nsp_pairing": nsp_pairing.check, "pooler": pooler.check,
         "adamw": adamw.check}


def _all(parts):
    def check(r: Report) -> None:
        for _, part in parts:
            part(r)
    return check


CHECKS = {**WHOLE, **{name: _all(parts) for name, parts in PARTS.items()}}


def parts_for(name: str, functions) -> list:
    """The parts of exercise ``name`` that check nothing but ``functions`` (every part when all are given)."""
    if name in WHOLE:
        return [CHECKS[name]] if set(functions) >= set(TABLES[name].functions) else []
    return [part for needs, part in PARTS[name] if set(needs) <= set(functions)]


def _capstone(module, functions):
    """The capstone's check of ``module``: the student's file in a worker, or functions in this process.
    Without ``train`` (a notebook's cell before the loop is written), the model's stages alone."""
    names = bert.FUNCTIONS if functions is None else tuple(functions)
    if isinstance(module, RemoteModule):
        own = {n: getattr(module, n) for n in names}

        def variant(pieces):              # the worker's functions call minibert's pieces from now on
            module.swap(pieces)
            return own
    else:
        # a notebook's functions come wrapped (calls.no_exit): swap inside the wrapper, then wrap the
        # result again, so that a sys.exit() in the student's code stays a FAIL line, swapped or not
        own = {n: getattr(getattr(module, n), "__wrapped__", getattr(module, n)) for n in names}

        def variant(pieces):
            return {n: no_exit(f) for n, f in (swapped(own, pieces) if pieces else own).items()}
    return lambda r: bert.check(r, variant, in_process=not isinstance(module, RemoteModule),
                                train="train" in names)


def run_check(name: str, module, functions=None) -> Report:
    """Run the checker of exercise ``name`` on ``module``; never raises for the student's bugs.

    ``functions``: check only the parts that call nothing but these (a notebook's cell writes one
    function of an exercise); by default every part."""
    report = Report(name, module)
    PASSED.clear()                  # the comparisons passed so far: this check's own
    if name in CAPSTONE:
        checks = [_capstone(module, functions)]
    elif name in QUESTIONS:
        checks = [lambda r: questions.check(r, name)]
    else:
        checks = [CHECKS[name]] if functions is None else parts_for(name, functions)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            for check in checks:
                check(report)
    except Abort:
        report.stopped()
    except WorkerGone as gone:  # ran out of time, exited, crashed: nothing more can be asked of it
        report.fail(gone.message, gone.hint)
        report.stopped()
    except Exception as exc:  # a result the checker could not even inspect
        report.fail(f"could not use what the functions returned ({type(exc).__name__}: {exc})",
                    "compare the return values with what the stub's docstring asks for")
    return report
