"""Comparing the student's results: float64 arrays of the right shape, within tolerance, gradient-checked.

``compare`` records max_rel_error against the tolerance and, when it fails,
gives the hint of the usual mistake the value matches (``known``, usually
a case table's ``Table.known``, or an ``explain`` function that looks at the
result); ``grad_check`` compares an analytic gradient with central
differences of the student's own forward pass, and with a worker sends all
its perturbed inputs in one message (``Forward``).
"""
from __future__ import annotations

import numpy as np

from minibert.gradcheck import max_rel_error, numerical_gradient

from .cases.table import LATER, recording_now
from .report import Abort, Report

TOL = 1e-7          # gradient checks and comparisons with minibert, float64
MEASURE = "max_rel_error"

def as_array(report: Report, what: str, value, shape, hint: str | None = None,
             finite: bool = True) -> np.ndarray:
    """The student's result as a float64 array of the expected shape, or a FAIL and Abort.

    finite=False lets NaN and inf through, for a check that looks at them itself.
    """
    # Look at the dtype before converting: a float32 result would be converted silently, and
    # float32's rounding error (about 6e-8) lies below TOL, so a float32 gradient would pass.
    try:
        dtype = np.dtype(getattr(value, "dtype", np.float64))
    except TypeError:                       # not a NumPy dtype: the conversion below decides
        dtype = np.dtype(np.float64)
    if np.issubdtype(dtype, np.inexact) and dtype != np.float64:
        report.fail(f"{what}: the check runs in float64; your code returned {dtype}",
                    f"keep every array in float64, as the inputs are: leave out .astype({dtype.name}) and "
                    f"dtype={dtype.name}. A lower precision rounds by about as much as the check's "
                    f"tolerance ({TOL:.0e}), so the check could not tell a right result from a wrong one")
        raise Abort
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        report.fail(f"{what} should be an array, got {type(value).__name__}",
                    hint or "return NumPy arrays (check that the function returns what the stub says)")
        raise Abort
    if arr.shape != tuple(shape):
        report.fail(f"{what} has shape {arr.shape}, expected {tuple(shape)}",
                    hint or "a gradient always has the shape of the thing it is the gradient of")
        raise Abort
    if finite and not np.isfinite(arr).all():
        report.fail(f"{what} contains inf or NaN", hint)
        raise Abort
    return arr


def compare(report: Report, what: str, got, want, tol: float = TOL, hint: str | None = None,
            known: list | tuple = (), explain=None) -> bool:
    """Record max_rel_error(got, want) against ``tol``.

    ``known``: (wrong_value, hint) pairs, the results of usual mistakes.  When
    the student's value matches one of them, that mistake's hint is given
    instead of ``hint``.  ``explain``: a function of the student's value that
    returns the hint of a mistake it recognises by some other sign, or None;
    asked when no known value matches.
    """
    err = max_rel_error(got, want)
    line = f"{what:<44s} {MEASURE} {err:.1e}"
    if err < tol:
        report.ok(f"{line} (< {tol:.0e})")
        if hasattr(known, "passed"):
            known.passed()
        touch(known)
        return True
    known = iter(known)
    text = diagnose(got, known)            # the hand-written cases: up to LATER
    if text is None and explain is not None:
        try:
            text = explain(got)
        except Exception:       # a diagnosis that cannot run gives no hint, never a crash
            text = None
    if text is None:
        text = diagnose(got, known)        # the mutants
    if text is None:
        try:
            text = relation(got, want, what.split()[0].rstrip(","))
        except Exception:
            text = None
    report.fail(f"{line} (must be < {tol:.0e})", text or hint)
    return False


def relation(got, want, name: str = "the result") -> str | None:
    """What ``got`` (the result ``name``) is to ``want`` when no usual mistake explains it, seen in the
    numbers alone: a constant factor, the sign, a transpose, the right numbers in other places, or the
    rows where they differ."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape or got.size < 2 or not np.isfinite(got).all() or not want.any():
        return None
    close = lambda a, b: max_rel_error(a, b) < 1e-6
    c = float((got * want).sum() / (want * want).sum())
    if c != 0 and abs(c - 1) > 1e-6 and close(got, c * want):
        if abs(c + 1) < 1e-6:
            return f"{name}: every entry has the right size and the wrong sign: a minus sign is lost or added on the way"
        return f"{name}: every entry is {_factor(c, got.shape)}"
    if got.ndim >= 2 and got.shape[-1] == got.shape[-2] and close(got, np.swapaxes(want, -1, -2)):
        return "the right numbers, transposed: the operands of a product in the other order, or a .T too many or missing"
    if close(np.sort(got, axis=None), np.sort(want, axis=None)):
        return ("the right numbers in the wrong places: a reshape where a transpose (or swapaxes) belongs, or the "
                "axes in another order")
    # the rows (the last axis's vectors, in order) that hold a gradient in either: right in some, wrong in others?
    rows_got, rows_want = got.reshape(-1, got.shape[-1]), want.reshape(-1, want.shape[-1])
    active = np.flatnonzero((rows_want != 0).any(axis=1) | (rows_got != 0).any(axis=1))
    wrong = active[np.abs(rows_got - rows_want)[active].max(axis=1) > 1e-6 * np.abs(rows_want).max()]
    scaled = _row_factors(rows_got, rows_want, wrong, len(active), name)
    if scaled is not None:
        return scaled
    if 0 < len(wrong) <= len(active) // 2:
        shown = ", ".join(str(i) for i in wrong[:6]) + (", ..." if len(wrong) > 6 else "")
        return (f"right in {len(active) - len(wrong)} of the {len(active)} rows that are not zero (the last axis's "
                f"vectors, in order) and wrong in row{'s' if len(wrong) > 1 else ''} {shown}: ask what those rows "
                "have in common (a repeated id, a padding position, a masked or ignored label)")
    return None


def _row_factors(rows_got, rows_want, wrong, n_active: int, name: str) -> str | None:
    """The rows ``wrong`` each the right row times a factor of its own, in words; else None."""
    factors = []
    for i in wrong:
        g, w = rows_got[i], rows_want[i]
        c = float(g @ w / (w @ w)) if w.any() else 0.0
        if c == 0 or max_rel_error(g, c * w) > 1e-6:
            return None
        factors.append(c)
    if not factors or len(factors) > 8:
        return None
    right = f"{name}: right in {n_active - len(wrong)} of the {n_active} rows that are not zero (the last axis's vectors)"
    ks = [1 / c for c in factors]
    if all(k > 1.5 and abs(k - round(k)) < 1e-6 for k in ks):
        by = ", ".join(f"row {i} by {round(k)}" for i, k in zip(wrong, ks))
        return (f"{right}; each of the others is the right one divided by a whole number ({by}): a sum averaged, "
                "each row divided by how many terms it adds (how often its id occurs, say) where they add up")
    times = ", ".join(f"row {i} {c:.3g} times" for i, c in zip(wrong, factors))
    return f"{right}; each of the others is the right one times a factor of its own ({times})"


def _factor(c: float, shape) -> str:
    """A constant factor c in words: a whole number k or 1/k is a count divided by or left out (of the
    sizes of the result's axes, the one it equals named)."""
    for k in range(2, 65):
        for inverse in (True, False):
            if abs((c * k if inverse else c / k) - 1) < 1e-6:
                axes = [i for i, n in enumerate(shape) if n == k]
                size = f"{k} (the size of axis {axes[0]})" if axes else f"{k}"
                if inverse:
                    return (f"{'half' if k == 2 else f'1/{k} of'} the right one: divided by {size} where nothing "
                            f"divides, or a factor {k} missing")
                return (f"{'twice' if k == 2 else f'{k} times'} the right one: a division by {size} missing, or a "
                        f"factor {k} too many")
    return f"{c:.4g} times the right one: a constant factor is wrong or missing (a 1/2, a 2, a count to divide by)"


def diagnose(got, known) -> str | None:
    """The hint of the first known mistake whose result ``got`` reproduces, up to ``LATER`` (where
    ``Table.known`` puts the mutants after the hand-written cases): ``known`` read on from there
    (an iterator) goes on with the mutants, those that a comparison the student passed sees as right
    first (a slip of another result than this one's shows there), the others when none is."""
    fallback = None             # a group of mutants that matches though a passed probe sees each as wrong
    for item in known:
        if item is LATER:
            return None
        wrong, text = item
        try:
            wrong = np.asarray(wrong, dtype=np.float64)
            if not (wrong.shape == np.shape(got) and np.isfinite(wrong).all() and max_rel_error(got, wrong) < 1e-6):
                continue
        except Exception:
            continue
        if callable(text):      # mutants: those a passed probe sees as wrong come last
            text, every = text()
            fallback = fallback or every
        if text is not None:
            return text
    return fallback


def touch(known) -> None:
    """While the student copy's table is recorded: what every case and mutant gives for ``known``'s
    computation, though the check passed (a student's answer may fail there).  Otherwise nothing."""
    if recording_now():
        for _ in known:
            pass


def named(got, known) -> str | None:
    """``diagnose`` over the hand-written cases, then over the mutants (for a check without ``compare``)."""
    known = iter(known)
    return diagnose(got, known) or diagnose(got, known)


def grad_check(report: Report, what: str, forward_out, x: np.ndarray, dout, analytic,
               hint: str | None = None, known=(), zero_rows=None, explain=None) -> bool:
    """Compare an analytic gradient with central differences of the student's own forward.

    forward_out: function of no arguments returning the forward output (reads ``x``).
    zero_rows: rows of the numerical gradient that are 0 by design (the [PAD] embedding).
    """
    try:
        num = _numerical_gradient(forward_out, x, dout)
    except Exception as exc:
        report.fail(f"{what}: the forward pass failed during the gradient check "
                    f"({type(exc).__name__}: {exc})")
        raise Abort
    if zero_rows is not None:
        num[zero_rows] = 0.0
    return compare(report, f"{what} vs numerical gradient", analytic, num, TOL, hint, known, explain)


class Forward:
    """What a gradient check differentiates: ``func(*args, **kwargs)[0]`` on fresh copies of ``args``.

    The gradient check changes one entry of an array in ``args`` at a time;
    a forward pass that changed its inputs would otherwise spoil the
    numerical gradient too, and the backward pass would get the blame.
    seed: when given, a new ``np.random.default_rng(seed)`` is passed after
    ``args`` at every call, so that a random forward (dropout) draws the same
    mask each time and is a fixed function of its input.
    """

    def __init__(self, module, func: str, args, kwargs, seed=None):
        self.func = getattr(module, func)
        self.args, self.kwargs, self.seed = args, kwargs, seed

    def __call__(self):
        rng = () if self.seed is None else (np.random.default_rng(self.seed),)
        return self.func(*[fresh(a) for a in self.args], *rng, **self.kwargs)[0]


def fresh(a):
    """A copy of an array argument (the caller keeps its own); anything else as it is."""
    return a.copy() if isinstance(a, np.ndarray) else a


def _numerical_gradient(forward, x: np.ndarray, df, h: float = 1e-5) -> np.ndarray:
    """minibert's central differences, with the 2 x.size calls sent to a worker in one message.

    The same arithmetic as ``minibert.gradcheck.numerical_gradient``, entry by
    entry, so a result is the same to the last bit in a worker and in-process.
    """
    batch = getattr(getattr(forward, "func", None), "map_outputs", None)
    index = next((i for i, a in enumerate(getattr(forward, "args", ())) if a is x), None)
    if batch is None or index is None:
        return numerical_gradient(forward, x, df, h)
    cells = list(np.ndindex(*x.shape))
    variants = np.repeat(x[None], 2 * len(cells), axis=0)
    for k, ix in enumerate(cells):
        old = x[ix]
        variants[2 * k][ix] = old + h
        variants[2 * k + 1][ix] = old - h
    outs = batch(forward.args, forward.kwargs, index, variants, forward.seed)
    grad = np.zeros_like(x)
    for k, ix in enumerate(cells):
        pos = np.asarray(outs[2 * k], dtype=np.float64)
        neg = np.asarray(outs[2 * k + 1], dtype=np.float64)
        diff = (pos - neg) if df is None else (pos - neg) * df
        grad[ix] = np.sum(diff) / (2 * h)
    return grad
