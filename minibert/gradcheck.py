"""Numerical gradients by central differences, and the relative error to compare them with.

Used by the tests, the notebooks and the exercises: a hand-written backward
pass is right when its gradient matches ``numerical_gradient`` to a relative
error far below 1e-7 in float64.
"""
from __future__ import annotations

import numpy as np


def _pair(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    return a, b


def rel_error(a, b) -> float:
    """max |a - b| / max(1e-8, |a| + |b|), entry by entry (the CS231n definition).

    Good for gradients whose entries are all of order 1.  An entry that is
    zero up to rounding (say 1e-9) makes it large however right the backward
    pass is, because finite differences carry an absolute error of about
    1e-11: use ``max_rel_error`` for such tensors.
    """
    a, b = _pair(a, b)
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a - b) / np.maximum(1e-8, np.abs(a) + np.abs(b))))


def max_rel_error(a, b) -> float:
    """max |a - b| / max(|a|, |b|): the worst entry's error relative to the largest entry.

    Every entry is held to the same absolute standard, set by the scale of the
    whole tensor, so near-zero entries cannot blow the measure up, while any
    entry wrong by a visible fraction of the gradient's size still shows.
    """
    a, b = _pair(a, b)
    scale = max(np.max(np.abs(a), initial=0.0), np.max(np.abs(b), initial=0.0))
    if scale == 0.0:
        return 0.0
    return float(np.max(np.abs(a - b)) / scale)


def numerical_gradient(f, x, df=None, h=1e-5, indices=None):
    """Central-difference gradient of ``sum(f() * df)`` with respect to the array ``x``.

    f: a function of no arguments that reads ``x`` (which is changed in place
       and restored) and returns an array (or a scalar).
    x: a float64 array.
    df: the upstream gradient, same shape as f's output (1 for a scalar).
    indices: optional iterable of index tuples; only those entries are
       computed (the rest of the result is 0).  Use it to sample large tensors.
    Returns an array shaped like x:  (f(x + h e_i) - f(x - h e_i)) / 2h, dotted with df.
    """
    if x.dtype != np.float64:
        raise TypeError(f"gradient checks need float64 arrays, got {x.dtype}")
    grad = np.zeros_like(x)
    if indices is None:
        indices = np.ndindex(*x.shape)
    for ix in indices:
        old = x[ix]
        x[ix] = old + h
        pos = np.asarray(f(), dtype=np.float64)
        x[ix] = old - h
        neg = np.asarray(f(), dtype=np.float64)
        x[ix] = old
        if df is not None and np.shape(df) != pos.shape:   # broadcast, df would check another gradient than dout's
            raise ValueError(f"df must have the shape of f's output, {pos.shape}, got {np.shape(df)}")
        diff = (pos - neg) if df is None else (pos - neg) * df
        grad[ix] = np.sum(diff) / (2 * h)
    return grad
