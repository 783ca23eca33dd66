"""Dynamic loss scaling: the unscaled gradients and the overflow flag, then the update rule against
``minibert.optim.LossScaler``, one call at a time and over runs of steps that feed each result back."""
from __future__ import annotations

import numbers

import numpy as np

from minibert.optim import LossScaler

from ..calls import call
from ..cases import loss_scaler as cases
from ..harness import compare, named, touch
from ..report import Abort, Report
from .common import unpack

T = cases.TABLE
SHAPES = ((3, 4), (5,), (2, 2))
UNSCALE_TOL = 1e-6      # float32 results: dividing by a scale that is not a power of two rounds once


# ------------------------------------------------------------------ unscale_and_check
def _gradients(rng, scale, poison=None):
    """Gradients of scale * loss in float32, small ones among them; poison=(tensor, value) plants an inf or NaN."""
    grads = [(rng.standard_normal(shape) * 10.0 ** rng.integers(-7, -1, shape) * scale).astype(np.float32)
             for shape in SHAPES]
    if poison is not None:
        grads[poison[0]].flat[1] = poison[1]
    return grads


def _unscale(r: Report, grads, scale):
    """The student's (unscaled as one float64 vector, found_inf as a bool)."""
    res = unpack(r, "unscale_and_check", call(r, "unscale_and_check", [g.copy() for g in grads], scale), 2,
                 "unscaled, found_inf")
    unscaled, found = res
    if not isinstance(unscaled, (list, tuple)) or len(unscaled) != len(grads):
        r.fail(f"unscaled should be a list of {len(grads)} arrays, one per gradient, got "
               f"{type(unscaled).__name__}" + (f" of {len(unscaled)}" if isinstance(unscaled, (list, tuple)) else ""),
               "return the gradients as a list, in the order they were given")
        raise Abort
    flat = []
    for i, (u, g) in enumerate(zip(unscaled, grads)):
        a = np.asarray(u, dtype=np.float64) if isinstance(u, np.ndarray) else None
        if a is None or a.shape != g.shape:
            r.fail(f"unscaled[{i}] should be an array of shape {g.shape}, got "
                   f"{getattr(u, 'shape', type(u).__name__)}", "each unscaled gradient has its gradient's shape")
            raise Abort
        flat.append(a.ravel())
    if not isinstance(found, (bool, np.bool_)):
        r.fail(f"found_inf should be True or False, got {type(found).__name__}",
               "reduce the check to one bool: bool(...) of np.isfinite(g).all() over every gradient")
        raise Abort
    return np.concatenate(flat), bool(found)


def _case_unscale(m, grads, scale, which):
    unscaled, found = m.unscale_and_check([g.copy() for g in grads], scale)
    return np.concatenate([np.asarray(u, dtype=np.float64).ravel() for u in unscaled]) if which == 0 \
        else np.array([float(found)])


def _check_unscale(r: Report) -> None:
    rng = np.random.default_rng(23)
    for scale in (2.0 ** 16, 1000.0):
        grads = _gradients(rng, scale)
        got, _ = _unscale(r, grads, scale)
        want = np.concatenate([g.astype(np.float64).ravel() / scale for g in grads])
        compare(r, f"unscaled gradients, scale {scale:g}", got, want, UNSCALE_TOL,
                hint="divide every gradient by scale",
                known=T.known(lambda m, g=grads, s=scale: _case_unscale(m, g, s, 0)))
    # the three verdicts together name a mistake better than one bool alone
    scenarios = ((None, "all finite"), ((0, np.inf), "an inf in the first of 3 tensors"),
                 ((2, np.nan), "a NaN, no inf, in the last tensor"))
    runs = [_gradients(rng, 2.0 ** 16, poison) for poison, _ in scenarios]
    found = [_unscale(r, grads, 2.0 ** 16)[1] for grads in runs]
    pattern = np.array(found, dtype=np.float64)
    known = T.known(lambda m: np.concatenate([_case_unscale(m, g, 2.0 ** 16, 1) for g in runs]))
    hint = None
    for (poison, what), got in zip(scenarios, found):
        right = poison is not None
        if got == right:
            r.ok(f"found_inf, {what}: {got}")
            continue
        if hint is None:
            hint = named(pattern, known) or "found_inf: True when any entry of any gradient is inf or NaN"
        r.fail(f"found_inf, {what}: {got} (must be {right})", hint)
    if hint is None:
        touch(known)


# ------------------------------------------------------------------ update_scale
def reference(scale, found_inf, good_steps, **rule):
    """LossScaler's answer: (scale, good_steps, take_step) after one update."""
    scaler = LossScaler(init_scale=scale, **rule)
    scaler.good_steps = good_steps
    take = scaler.update(not found_inf)
    return scaler.scale, scaler.good_steps, take


def _read(r: Report, result):
    scale, good, take = unpack(r, "update_scale", result, 3, "scale, good_steps, take_step")
    if not isinstance(scale, numbers.Real) or isinstance(scale, (bool, np.bool_)) \
            or not isinstance(good, numbers.Integral) or isinstance(good, (bool, np.bool_)) \
            or not isinstance(take, (bool, np.bool_)):
        r.fail(f"update_scale should return (a number, an integer, a bool), got ({type(scale).__name__}, "
               f"{type(good).__name__}, {type(take).__name__})", "return (scale, good_steps, take_step) in that order")
        raise Abort
    return float(scale), int(good), bool(take)


def _run(update, flags, scale, **rule):
    """(scale, good_steps, take_step) after each step of a run, each result fed back into the next call."""
    good, out = 0, []
    for found in flags:
        scale, good, take = update(scale, found, good, **rule)
        out.append((scale, good, take))
    return out


def _check_update(r: Report) -> None:
    def student(scale, found, good, **rule):
        return _read(r, call(r, "update_scale", scale, found, good, **rule))

    for scale, found, good, what in ((2.0 ** 16, True, 7, "overflow at 2^16 after 7 good steps"),
                                     (2.0 ** 16, False, 7, "finite at 2^16 after 7 good steps (of 2000)"),
                                     (2.0 ** 16, False, 1999, "finite at 2^16, the 2000th good step in a row")):
        got, want = student(scale, found, good), reference(scale, found, good)
        known = T.known(lambda m, a=(scale, found, good): np.array(m.update_scale(*a), dtype=np.float64))
        _expect(r, what, got, want, known)
    flags = [False] * 7 + [True, True] + [False] * 4 + [True] + [False] * 10 + [True] + [False] * 6
    for rule, what in ((dict(growth_interval=3), "30 steps, growth_interval 3"),
                       (dict(growth_factor=4.0, backoff_factor=0.25, growth_interval=2),
                        "30 steps, factors 4 and 0.25, growth_interval 2")):
        got = _run(student, flags, 2.0 ** 10, **rule)
        want = _run(reference, flags, 2.0 ** 10, **rule)
        known = T.known(lambda m, rule=rule: np.array(_run(m.update_scale, flags, 2.0 ** 10, **rule), dtype=float))
        bad = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), None)
        detail = "" if bad is None else (f": step {bad + 1} (found_inf={flags[bad]}) gives {_show(got[bad])}, "
                                         f"LossScaler {_show(want[bad])}")
        _expect(r, what + detail, got, want, known, show=False)


def _show(t):
    return f"(scale {t[0]:g}, good_steps {t[1]}, take_step {t[2]})"


def _expect(r: Report, what, got, want, known, show=True) -> None:
    """Exact agreement with LossScaler (powers of two: no rounding), else the hint of the case it matches."""
    if got == want:
        r.ok(f"{what}: {_show(got)}" if show else what)
        touch(known)
        return
    hint = named(np.array(got, dtype=np.float64), known) or cases.RULE
    r.fail(f"{what}: {_show(got)}, LossScaler gives {_show(want)}" if show else what, hint)


# what each part checks: a notebook checks one function at a time (checks/__init__.py)
PARTS = ((("unscale_and_check",), _check_unscale), (("update_scale",), _check_update))
