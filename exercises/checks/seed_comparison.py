"""An ablation against the default over seeds: each setting's mean and spread, and the paired differences.

The right values are NumPy's: the mean and the sample standard deviation (ddof=1) of the
numbers that are there (None left out), to 1e-12; (nan, nan) with no number at all.  The seeds
of the checks have Nones in different places in the two settings, so that pairing by seed and
pairing by position give different differences.
"""
from __future__ import annotations

import math

import numpy as np

from ..calls import call
from ..cases import seed_comparison as cases
from ..harness import as_array, compare
from ..report import Report
from .common import unpack

T = cases.TABLE
TOL = 1e-12
DEFAULT = [5.66, 6.34, 5.76]                  # the default's held-out MLM loss over three seeds (notebook 12)
FLAG = [5.54, 5.70, 5.60]
FLAG_5 = [0.571, None, 0.532, 0.604, 0.559]   # five seeds, each setting missing a different one
DEFAULT_5 = [0.552, 0.498, 0.541, None, 0.583]


def _check_spreads(r: Report) -> None:
    _check_spread(r, DEFAULT, "3 seeds")
    _check_spread(r, FLAG_5, "5 seeds, one None")
    _check_spread(r, [None, None, None], "no number at all")
    _check_spread(r, [0.25, 0.0, None, 0.5], "4 seeds, one None, one result of 0.0")


def _check_pairs(r: Report) -> None:
    _check_paired(r, FLAG, DEFAULT, "3 seeds")
    _check_paired(r, FLAG_5, DEFAULT_5, "5 seeds with Nones")
    _check_paired(r, [None, 0.61], [0.55, None], "no seed paired")
    _check_paired(r, [5.54, 5.70, 5.60], [5.66, 5.70, 5.76], "3 seeds, one where both runs agree")


def _right(values):
    x = np.array([v for v in values if v is not None], dtype=float)
    return np.array([x.mean(), x.std(ddof=1)]) if len(x) else np.array([math.nan, math.nan])


def _check_spread(r: Report, values, where) -> None:
    def compute(m):
        return np.asarray(m.mean_and_spread(list(values)), dtype=np.float64)
    res = unpack(r, "mean_and_spread", call(r, "mean_and_spread", list(values), hint=_or(T.raised(compute), where)),
                 2, "mean, spread")
    got = as_array(r, f"(mean, spread), {where}", [_scalar(r, "mean", res[0]), _scalar(r, "spread", res[1])], (2,),
                   finite=False)
    _judge(r, f"mean and spread, {where}", got, _right(values), compute)


def _check_paired(r: Report, flag, default, where) -> None:
    def run(m):
        return m.paired_differences(list(flag), list(default))
    pairs = [(a, b) for a, b in zip(flag, default) if a is not None and b is not None]
    want = np.array([a - b for a, b in pairs], dtype=float)
    diffs, mean, sd = unpack(r, "paired_differences", call(r, "paired_differences", list(flag), list(default),
                                                           hint=_or(T.raised(run), where)), 3,
                             "differences, mean, spread")
    shape_hint = None
    try:
        shape_hint = T.matching(lambda m: run(m)[0], np.asarray(diffs, dtype=np.float64))
    except (TypeError, ValueError):
        pass
    diffs = as_array(r, f"differences, {where}", diffs, want.shape, shape_hint or
                     "one difference per seed where both runs have a number, in the order of the seeds",
                     finite=False)
    if len(want):
        _judge(r, f"differences, {where}", diffs, want, lambda m: run(m)[0])
    got = as_array(r, f"(mean, spread) of the differences, {where}",
                   [_scalar(r, "mean", mean), _scalar(r, "spread", sd)], (2,), finite=False)
    _judge(r, f"their mean and spread, {where}", got, _right(want), lambda m: np.array(run(m)[1:], dtype=float))


def _judge(r: Report, what, got, want, compute) -> None:
    """``got`` against ``want`` to 1e-12, NaN where ``want`` has it: a usual mistake's hint when it is one."""
    if np.isnan(want).all():
        r.expect(bool(np.isnan(got).all()), f"{what}: (nan, nan)", T.matching(compute, got) or cases.EMPTY)
        return
    if not np.isfinite(got).all():
        r.fail(f"{what} contains inf or NaN", T.matching(compute, got))
        return
    compare(r, what, got, want, TOL, known=T.known(compute),
            hint="the mean and the sample standard deviation (ddof=1) of the numbers, None left out")


def _scalar(r: Report, what, value) -> float:
    return float(as_array(r, what, value, (), "return one number (a float) for each", finite=False))


def _or(raised, where):
    """A hint for an exception: its case's, or with no number at all the rule for that."""
    def hint(exc):
        return raised(exc) or (cases.EMPTY if where == "no number at all" else None)
    return hint


# what each part checks: a notebook checks one function at a time (checks/__init__.py)
PARTS = ((("mean_and_spread",), _check_spreads), (("paired_differences",), _check_pairs))
