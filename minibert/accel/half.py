"""The linear layer in mixed precision, for the fast sets of ops, given their own float16 product.

``ops.linear`` defines it with the reference's ``half_matmul``; the CPU kernels
run the same steps with a blocked float32 product, the GPU's with cuBLAS's
float16 one.  Only the product differs, so the steps are written once here.
"""
from __future__ import annotations

from ..ops.linear import check_linear, to_half


def half_linear_forward(x, W, b, half_matmul):
    """``ops.linear_forward`` for a float16 ``W``: x rounded to float16 (and kept for the backward),
    the product by ``half_matmul``, y back in b's dtype with the bias added."""
    check_linear(x, W, b)
    x16 = to_half(x)
    y = half_matmul(x16.reshape(-1, x.shape[-1]), W.T) + b
    return y.reshape(x.shape[:-1] + (W.shape[0],)), (x16, W)


def half_linear_backward(dy, cache, half_matmul, sum_and_half=None, widen_dW=True):
    """``ops.linear_backward`` for a float16 ``W``: both products take dy rounded to float16.
    ``sum_and_half(dy2)``: the bias gradient, dy's rows (N, out) summed, and dy2 rounded to float16
    (a kernel may make both in one pass; by default two).  ``widen_dW=False``: dW is returned as the
    float16 product it is, for an add into the float32 gradient that widens it on the way (the same
    numbers)."""
    x, W = cache
    dy2 = dy.reshape(-1, dy.shape[-1])
    db, dy16 = sum_and_half(dy2) if sum_and_half is not None else (dy2.sum(axis=0), to_half(dy2))
    dx = half_matmul(dy16, W).astype(dy.dtype).reshape(x.shape)
    dW = half_matmul(dy16.T, x.reshape(-1, x.shape[-1]))
    return dx, dW.astype(dy.dtype) if widen_dW else dW, db
