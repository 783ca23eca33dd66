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

from ..remote import WorkerGone
from ..report import Abort, Report
from . import adamw, attention, attention_dropout, classifier_head, cross_entropy, dropout, embedding, encoder_layer
from . import gelu, layernorm, linear, mlm_masking, nsp_pairing, pooler, schedule, seed_comparison, softmax
from . import loss_scaler, ring_allreduce, step_flops, wordpiece

def _dropout(r: Report) -> None:
    """Dropout alone, then on the attention weights: one exercise."""
    dropout.check(r)
    attention_dropout.check(r)


CHECKS = {"wordpiece": wordpiece.check, "linear": linear.check, "embedding": embedding.check,
          "layernorm": layernorm.check, "gelu": gelu.check, "softmax": softmax.check, "attention": attention.check,
          "cross_entropy": cross_entropy.check, "dropout": _dropout, "mlm_masking": mlm_masking.check,
          "nsp_pairing": nsp_pairing.check, "pooler": pooler.check, "adamw": adamw.check, "schedule": schedule.check,
          "step_flops": step_flops.check, "classifier_head": classifier_head.check,
          "encoder_layer": encoder_layer.check, "loss_scaler": loss_scaler.check,
          "ring_allreduce": ring_allreduce.check, "seed_comparison": seed_comparison.check}


def run_check(name: str, module) -> Report:
    """Run the checker of exercise ``name`` on ``module``; never raises for the student's bugs."""
    report = Report(name, module)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            CHECKS[name](report)
    except Abort:
        report.stopped()
    except WorkerGone as gone:  # ran out of time, exited, crashed: nothing more can be asked of it
        report.fail(gone.message, gone.hint)
        report.stopped()
    except Exception as exc:  # a result the checker could not even inspect
        report.fail(f"could not use what the functions returned ({type(exc).__name__}: {exc})",
                    "compare the return values with what the stub's docstring asks for")
    return report
