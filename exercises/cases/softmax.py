"""The softmax's usual mistakes: p = exp(x - max) / sum exp(x - max) over the last axis,
dx_j = p_j (dp_j - sum_i dp_i p_i)."""
from __future__ import annotations

import numpy as np

from .table import Table


def _forward(shift=lambda x: x.max(axis=-1, keepdims=True), total=lambda e: e.sum(axis=-1, keepdims=True)):
    """softmax_forward with ``shift(x)`` subtracted before exp and ``total(e)`` as the normaliser."""
    def softmax_forward(x):
        e = np.exp(x - shift(x))
        p = e / total(e)
        return p, p
    return softmax_forward


def _backward(dx):
    def softmax_backward(dp, cache):
        return dx(cache, dp)
    return softmax_backward


TABLE = Table("softmax", softmax_forward=_forward(),
              softmax_backward=_backward(lambda p, dp: p * (dp - (dp * p).sum(-1, keepdims=True))))
case = TABLE.case

# ---- the forward pass
case("normalised over axis 0", "normalise over the last axis (axis=-1), not axis 0",
     softmax_forward=_forward(lambda x: x.max(axis=0, keepdims=True), lambda e: e.sum(axis=0, keepdims=True)))
case("normalised over the whole array", "normalise each row separately: sum over axis=-1 with keepdims=True",
     softmax_forward=_forward(lambda x: x.max(), lambda e: e.sum()))
UNSTABLE = case("no max subtraction", "exp(1000) is inf: subtract the row maximum before exp (it cancels out)",
                softmax_forward=_forward(lambda x: 0.0))
case("maximum of the whole array", "subtract each row's own maximum, x.max(axis=-1, keepdims=True), not that of "
                                   "the whole array: a row far below it underflows to 0 / 0",
     softmax_forward=_forward(lambda x: x.max()))

# ---- the backward pass
case("diagonal-only backward", "that is only the diagonal of the Jacobian: every p_i depends on every x_j, "
                               "dx_j = p_j (dp_j - sum_i dp_i p_i)",
     softmax_backward=_backward(lambda p, dp: p * (1 - p) * dp))
case("backward not multiplied by p", "multiply by p: dx_j = p_j (dp_j - sum_i dp_i p_i)",
     softmax_backward=_backward(lambda p, dp: dp - (dp * p).sum(-1, keepdims=True)))
case("p * dp", "p * dp is missing the term that subtracts sum_i dp_i p_i: dx_j = p_j (dp_j - sum_i dp_i p_i), "
               "because p_j depends on every x", softmax_backward=_backward(lambda p, dp: p * dp))
case("backward sum over axis 0", "the sum runs over the last axis",
     softmax_backward=_backward(lambda p, dp: p * (dp - (dp * p).sum(0, keepdims=True))))
case("backward sum without p", "the sum inside is sum_i dp_i p_i, each dp_i weighted by p_i (the chain rule through "
                               "every p_i), not sum_i dp_i: dx_j = p_j (dp_j - sum_i dp_i p_i)",
     softmax_backward=_backward(lambda p, dp: p * (dp - dp.sum(-1, keepdims=True))))
