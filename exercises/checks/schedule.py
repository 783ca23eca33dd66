"""The learning-rate schedule and clipping by the global norm, against ``minibert.optim`` to 1e-12.

The rate is compared at every step of four schedules (the notebook's, one without warm-up, one
that is all warm-up, BERT's own) with ``peak_lr * linear_warmup_decay``; clipping with
``clip_grad_norm`` on a ``ParamStore`` holding the same arrays, above max_norm, below it, and at a
norm exactly max_norm.  minibert's eps (max_norm / (norm + 1e-6)) changes a result by about 1e-7
of itself, less than a case table tells apart (1e-6), so a result that differs by that much
only is recognised by ``_fine``, against each case to 1e-12.
"""
from __future__ import annotations

import numpy as np

from minibert.gradcheck import max_rel_error
from minibert.model.params import ParamSpec, ParamStore
from minibert.optim import clip_grad_norm, linear_warmup_decay

from ..calls import call, call_each
from ..cases import schedule as cases
from ..harness import as_array, compare
from ..report import Abort, Report
from .common import unpack

T = cases.TABLE
TOL = 1e-12
# (peak_lr, warmup_steps, total_steps, the steps asked): the notebook's run, no warm-up, all warm-up, BERT's
SCHEDULES = ((3e-3, 30, 300, range(0, 320)), (1e-4, 0, 50, range(0, 60)), (0.5, 10, 10, range(0, 15)),
             (1e-4, 10_000, 1_000_000, (0, 1, 9_999, 10_000, 10_001, 500_000, 999_999, 1_000_000, 1_000_001)))


def _check_schedules(r: Report) -> None:
    for peak, warmup, total, steps in SCHEDULES:
        _check_schedule(r, peak, warmup, total, list(steps))


def _check_clips(r: Report) -> None:
    rng = np.random.default_rng(11)
    grads = [rng.standard_normal((4, 6)), rng.standard_normal(6) * 0.5, rng.standard_normal((2, 3, 5)) * 2]
    _check_clip(r, grads, 1.0, "above max_norm")
    _check_clip(r, grads, 100.0, "below max_norm")
    # norm sqrt(9 + 16 + 144) = 13 exactly, and an array that got no gradient
    exact = [np.array([3.0, 4.0, 12.0]), np.zeros((2, 2))]
    _check_clip(r, exact, 13.0, "exactly max_norm")


def _check_schedule(r: Report, peak, warmup, total, steps) -> None:
    kw = dict(peak_lr=peak, warmup_steps=warmup, total_steps=total)

    def rates(m):
        return [m.learning_rate(s, **kw) for s in steps]
    calls = [((s,), kw) for s in steps]
    got = np.array([_number(r, "learning_rate", v)
                    for v in call_each(r, "learning_rate", calls, hint=_division(T.raised(rates), warmup, total))])
    want = np.array([peak * linear_warmup_decay(s, total, warmup) for s in steps])
    what = f"rate, warm-up {warmup:,} of {total:,} steps"
    compare(r, what, got, want, TOL, known=T.known(rates), explain=_fine(rates, want),
            hint="peak_lr * step / warmup_steps while step < warmup_steps, then peak_lr * (total_steps - step) / "
                 "(total_steps - warmup_steps), never below 0")


def _division(raised, warmup, total):
    """A hint for an exception: its case's; a division by zero (int or float, either message) where the
    schedule has no warm-up or nothing but warm-up is one of the two cases that divide by 0 there."""
    def hint(exc):
        text = raised(exc)
        if text is None and type(exc).__name__ == "ZeroDivisionError":
            text = cases.ZERO_WARMUP.hint if warmup == 0 else cases.NO_DECAY.hint if warmup == total else None
        return text
    return hint


def _check_clip(r: Report, grads, max_norm, where) -> None:
    def clip(m):
        return m.clip_by_global_norm([g.copy() for g in grads], max_norm)
    want_grads, want_norm = _reference(grads, max_norm)
    res = unpack(r, "clip_by_global_norm", call(r, "clip_by_global_norm", [g.copy() for g in grads], max_norm,
                                                hint=T.raised(clip)), 2, "clipped, norm")
    clipped, norm = res
    if not isinstance(clipped, (list, tuple)) or len(clipped) != len(grads):
        r.fail(f"clipped should be a list of {len(grads)} arrays, one per gradient, got "
               f"{len(clipped) if isinstance(clipped, (list, tuple)) else type(clipped).__name__}",
               "return the clipped arrays as a list, in the order of grads")
        raise Abort
    norm = _number(r, "the norm", norm)
    compare(r, f"norm, {where} ({want_norm:.3g}, max_norm {max_norm:g})", np.array(norm), np.array(want_norm), TOL,
            known=T.known(lambda m: clip(m)[1]), explain=_fine(lambda m: clip(m)[1], want_norm),
            hint="the global norm: sqrt of the sum of the squares of every entry of every array, before clipping")
    flat = np.concatenate([as_array(r, f"clipped[{i}]", c, g.shape).ravel()
                           for i, (c, g) in enumerate(zip(clipped, grads))])
    flatten = lambda m: np.concatenate([np.ravel(c) for c in clip(m)[0]])   # noqa: E731
    compare(r, f"clipped, {where}, vs minibert", flat, np.concatenate([g.ravel() for g in want_grads]), TOL,
            known=T.known(flatten), explain=_fine(flatten, np.concatenate([g.ravel() for g in want_grads])),
            hint="every array times max_norm / (norm + 1e-6) when that is below 1, else unchanged")


def _reference(grads, max_norm):
    """minibert.optim.clip_grad_norm on a ParamStore holding ``grads``: (the clipped arrays, the norm)."""
    store = ParamStore([ParamSpec(f"g{i}", g.shape, "zeros", True) for i, g in enumerate(grads)], np, np.float64)
    for i, g in enumerate(grads):
        store.grads[f"g{i}"][...] = g
    norm = clip_grad_norm(store, max_norm)
    return [store.grads[f"g{i}"].copy() for i in range(len(grads))], norm


def _number(r: Report, what, value) -> float:
    """The student's value as one float, or a FAIL."""
    arr = as_array(r, what, value, (), "return one number (a float), not an array or a list")
    return float(arr)


def _fine(compute, right):
    """An ``explain`` for ``compare``: the hint of the first case whose value is the student's to 1e-12 and
    differs from the right one (for the mistakes that move a result by less than a table tells apart)."""
    right = np.asarray(right, dtype=np.float64)

    def explain(got):
        for o in T.each(compute):
            try:
                value = np.asarray(o.value, dtype=np.float64)
            except Exception:
                continue
            if o.raised is None and value.shape == right.shape == np.shape(got) and np.isfinite(value).all() \
                    and max_rel_error(value, right) >= TOL and max_rel_error(value, got) < TOL:
                return o.case.hint
        return None
    return explain


# what each part checks: a notebook checks one function at a time (checks/__init__.py)
PARTS = ((("learning_rate",), _check_schedules), (("clip_by_global_norm",), _check_clips))
