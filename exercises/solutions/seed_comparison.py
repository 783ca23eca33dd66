"""Solution: the mean and spread of one setting over seeds, and the paired differences."""
import numpy as np


def mean_and_spread(values):
    x = np.array([v for v in values if v is not None], dtype=float)
    if len(x) == 0:
        return float("nan"), float("nan")
    return float(x.mean()), float(x.std(ddof=1))       # ddof=1: the sample standard deviation


def paired_differences(flag, default):
    diffs = np.array([f - d for f, d in zip(flag, default) if f is not None and d is not None], dtype=float)
    mean, spread = mean_and_spread(diffs)
    return diffs, mean, spread
