"""The linear layer in mixed precision, for the fast sets of ops, given their own float16 product.

``ops.linear`` defines it with the reference's ``half_matmul``; the CPU kernels
run the same steps with a blocked float32 product, the GPU's with cuBLAS's
float16 one.  Only the product differs, so the steps are written once here.
"""
from __future__ import annotations

import numpy as np

from ..ops.linear import check_linear, to_half


def half_linear_forward(x, W, b, half_matmul):
    """``ops.linear_forward`` for a float16 ``W``: x rounded to float16 unless it comes so (and kept
    for the backward), the product by ``half_matmul``, y back in b's dtype with the bias added (b
    None: the float16 product alone, for the op after it to add the bias)."""
    check_linear(x, W, b)
    x16 = x if x.dtype == np.float16 else to_half(x)
    p = half_matmul(x16.reshape(-1, x.shape[-1]), W.T)
    y = p if b is None else p + b
    return y.reshape(x.shape[:-1] + (W.shape[0],)), (x16, W)


def half_linear_backward(dy, cache, half_matmul, sum_and_half=None, widen_dW=True, half_dx=False):
    """``ops.linear_backward`` for a float16 ``W``: both products take dy rounded to float16 (unless it
    comes so).  ``sum_and_half(dy2)``: the bias gradient, dy's rows (N, out) summed in float32, and dy2
    in float16 (a kernel may make both in one pass; by default two).  ``widen_dW=False``: dW is
    returned as the float16 product it is, for an add into the float32 gradient that widens it on
    the way (the same numbers).  ``half_dx``: dx left in float16, as the reference's."""
    x, W = cache
    dy2 = dy.reshape(-1, dy.shape[-1])
    if sum_and_half is not None:
        db, dy16 = sum_and_half(dy2)
    else:
        db = dy2.astype(np.float32, copy=False).sum(axis=0)
        dy16 = dy2 if dy2.dtype == np.float16 else to_half(dy2)
    dx = half_matmul(dy16, W)
    dx = (dx if half_dx else dx.astype(np.float32)).reshape(x.shape)
    dW = half_matmul(dy16.T, x.reshape(-1, x.shape[-1]))
    return dx, dW.astype(np.float32) if widen_dW else dW, db
