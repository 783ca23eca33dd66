"""Comparing an ablation with the default over seeds: the usual mistakes.

Over seeds, a setting's result is its mean and its spread, the sample standard deviation
(ddof=1), over the seeds that have a number (None: a run without one, such as the NSP accuracy
of a run without NSP); (nan, nan) when none has.  The paired comparison takes, seed by seed,
flag - default, over the seeds where both runs have a number, and the mean and spread of those
differences.
"""
from __future__ import annotations

import math

import numpy as np

from .table import Table


def _present(values, missing="leave out"):
    """The numbers of ``values``: None left out, or read as 0, or as NaN, or every falsy value left out."""
    if missing == "truthy":
        return np.array([v for v in values if v], dtype=float)
    if missing == "zero":
        return np.array([0.0 if v is None else v for v in values], dtype=float)
    if missing == "nan":
        return np.array(values, dtype=float)
    return np.array([v for v in values if v is not None], dtype=float)


def _spread(ddof=1, of="sd", missing="leave out", empty="nan"):
    """mean_and_spread, or one of its usual mistakes.

    of: "sd", "se" (sd / sqrt(n)) or "var"; missing: how None is read; empty: "nan" (right),
    "zeros" ((0, 0)), "divide" (sum / len, which divides by 0).
    """
    def mean_and_spread(values):
        x = _present(values, missing)
        if len(x) == 0 and empty != "divide":
            return (math.nan, math.nan) if empty == "nan" else (0.0, 0.0)
        mean = sum(x) / len(x) if empty == "divide" else x.mean()
        sd = x.std(ddof=ddof)
        return mean, {"sd": sd, "se": sd / math.sqrt(len(x)), "var": sd ** 2}[of]
    return mean_and_spread


def _paired(pairing="by seed", sign=1, spread="differences", ddof=1, truthy=False):
    """paired_differences, or one of its usual mistakes.

    pairing: "by seed" (right), "filtered apart" (None left out of each list on its own, then
    zipped), "no filter" (None read as NaN), "default mean" (each flag run minus the default's
    mean); sign=-1: default - flag; spread: "differences" (right), "settings" (sqrt of the sum
    of the two settings' variances), "flag" (the flag's own spread); truthy: the mean and spread
    leave out a difference of 0.0 ('if d').
    """
    def paired_differences(flag, default):
        if pairing == "filtered apart":
            f, d = _present(flag), _present(default)
            n = min(len(f), len(d))
            diffs = f[:n] - d[:n]
        elif pairing == "no filter":
            diffs = _present(flag, "nan") - _present(default, "nan")
        elif pairing == "default mean":
            diffs = _present(flag) - _present(default).mean()
        else:
            pairs = [(a, b) for a, b in zip(flag, default) if a is not None and b is not None]
            diffs = np.array([a - b for a, b in pairs], dtype=float)
        diffs = sign * diffs
        kept = diffs[diffs != 0] if truthy else diffs
        if len(kept) == 0:
            return diffs, math.nan, math.nan
        sd = kept.std(ddof=ddof)
        if spread == "settings":
            sd = math.hypot(_present(flag).std(ddof=1), _present(default).std(ddof=1))
        elif spread == "flag":
            sd = _present(flag).std(ddof=1)
        return diffs, kept.mean(), sd
    return paired_differences


TABLE = Table("seed_comparison", mean_and_spread=_spread(), paired_differences=_paired())
case = TABLE.case

SAMPLE = ("the spread over seeds is the sample standard deviation, ddof=1 (divide by n - 1): the seeds run are a "
          "sample of all the seeds one could run; np.std's default, ddof=0, gives sqrt((n - 1) / n) of it")
EMPTY = ("with no numbers at all (a run without NSP has no NSP accuracy) return (nan, nan): the table prints a dash "
         "there, and 0 would read as a result")

# ---- one setting over its seeds
case("population standard deviation", SAMPLE, mean_and_spread=_spread(ddof=0))
case("standard error", "that is the standard error of the mean (sd / sqrt(n)); the spread is the standard "
                       "deviation of the runs themselves", mean_and_spread=_spread(of="se"))
case("variance", "the spread is the standard deviation, the square root of the variance",
     mean_and_spread=_spread(of="var"))
case("sum / len with no numbers", EMPTY, mean_and_spread=_spread(empty="divide"))
case("zeros with no numbers", EMPTY, mean_and_spread=_spread(empty="zeros"))
case("None read as 0", "leave out the seeds without a number (None): a missing NSP accuracy is not an accuracy of 0",
     mean_and_spread=_spread(missing="zero"))
TRUTHY = ("leave out the Nones with 'is not None': 'if v' drops a result of exactly 0.0 too (an accuracy of 0, or "
          "a paired difference of 0 where both runs agree)")
case("'if v' drops 0.0", TRUTHY, mean_and_spread=_spread(missing="truthy"))
case("None read as NaN", "leave out the seeds without a number (None): np.array turns None into nan, and one nan "
                         "makes the mean nan", mean_and_spread=_spread(missing="nan"))

# ---- the paired comparison
case("default - flag", "each difference is flag - default, seed by seed: negative when the flag's loss is lower",
     paired_differences=_paired(sign=-1))
case("spread of the two settings", "the spread of a paired comparison is that of the differences themselves (their "
                                   "sample standard deviation), not one made of the two settings' spreads: pairing "
                                   "removes what the seed does to both", paired_differences=_paired(spread="settings"))
case("spread of the flag's runs", "the spread is that of the differences, not of the flag's own runs",
     paired_differences=_paired(spread="flag"))
case("population spread of the differences", SAMPLE, paired_differences=_paired(ddof=0))
case("against the default's mean", "pair the runs seed by seed, flag[i] - default[i]: the same seed gives both the "
                                   "same held-out documents and starting weights. Subtracting the default's mean "
                                   "throws that pairing away", paired_differences=_paired(pairing="default mean"))
case("'if d' drops a difference of 0.0", TRUTHY, paired_differences=_paired(truthy=True))
case("None left out of each list apart", "leave out a seed when either of its two runs lacks a number, then pair "
                                         "the rest by seed: removing the Nones from each list on its own shifts "
                                         "the seeds against each other",
     paired_differences=_paired(pairing="filtered apart"))
case("None not left out", "leave out the seeds where either run has no number (None): a difference with a missing "
                          "run is no difference", paired_differences=_paired(pairing="no filter"))


def _nan_spread(values):
    """With NaN for None, NumPy's nan-functions leave them out."""
    x = np.array(values, dtype=float)
    if np.isnan(x).all():
        return math.nan, math.nan
    return float(np.nanmean(x)), float(np.nanstd(x, ddof=1))


def _statistics_paired(flag, default):
    """The standard library's statistics, on a list of differences."""
    import statistics
    diffs = [a - b for a, b in zip(flag, default) if a is not None and b is not None]
    if not diffs:
        return np.zeros(0), math.nan, math.nan
    return np.array(diffs), statistics.mean(diffs), statistics.stdev(diffs)


TABLE.variant("NumPy's nanmean and nanstd", mean_and_spread=_nan_spread)
TABLE.variant("the statistics module", paired_differences=_statistics_paired)
