"""A numerically stable softmax over the last axis and its backward pass."""
from __future__ import annotations

import numpy as np

from minibert import ops as L

from ..cases import softmax as cases
from ..harness import as_array, compare, grad_check
from ..report import Report
from .common import bwd, forward_output, fwd

T = cases.TABLE


def check(r: Report) -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 4, 6)) * 5
    want, _ = L.softmax_forward(x)
    p, cache = fwd(r, "softmax_forward", x)
    p = as_array(r, "p", p, x.shape)
    compare(r, "forward vs minibert", p, want, known=T.known(lambda m: m.softmax_forward(x)[0]), explain=normalised_over)
    # the last row lies 2000 below the first: only its OWN maximum keeps its exp away from 0
    big = np.array([[1000.0, 1000.0, -1000.0], [-1000.0, 0.0, 1000.0], [-1000.0, -1001.0, -1002.0]])
    pb, _ = fwd(r, "softmax_forward", big)
    pb = np.asarray(pb, dtype=np.float64)
    stable = pb.shape == big.shape and np.isfinite(pb).all()
    r.require(stable, "finite for scores like +-1000 (no overflow, no 0/0)",
              None if stable else T.matching(lambda m: m.softmax_forward(big)[0], pb) or cases.UNSTABLE.hint)
    compare(r, "forward for scores like 1000", pb, L.softmax_forward(big)[0])

    dp = rng.standard_normal(x.shape)
    dx = as_array(r, "dx", bwd(r, "softmax_backward", dp, cache), x.shape)
    grad_check(r, "dx", forward_output(r, "softmax_forward", x), x, dp, dx,
               known=T.known(lambda m: m.softmax_backward(dp, m.softmax_forward(x)[1])))


def normalised_over(p) -> str | None:
    """Locate a wrong normalisation from the sums of the student's p: each row over the last axis must sum to 1.

    p is positive and proportional to exp(x) within its rows when only the
    denominator is wrong; which axes its sums come to 1 over says which sum
    the denominator took.
    """
    p = np.asarray(p, dtype=np.float64)
    rows = p.sum(-1)
    if np.allclose(rows, 1.0):
        return None
    axes = {"the whole array": tuple(range(p.ndim)), "the first axis": (0,),
            "every axis but the first": tuple(range(1, p.ndim))}
    for name, ax in axes.items():
        if np.allclose(p.sum(axis=ax), 1.0):
            return (f"each row of p must sum to 1 over the last axis; yours sums to 1 over {name} (its rows sum "
                    f"to {rows.min():.3g} to {rows.max():.3g}): the denominator is a sum over axis=-1 with "
                    "keepdims=True")
    return f"each row of p must sum to 1 over the last axis; yours sum to {rows.min():.3g} to {rows.max():.3g}"
