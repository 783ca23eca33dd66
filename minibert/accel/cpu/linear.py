"""Linear layers on NumPy arrays: the products cut into fixed runs of rows over the pool (``gemm``).

float32: the product and the bias add, rows over all cores.  Mixed
precision (a float16 weight): the reference's steps, with the widened
float32 product made by ``gemm`` as well.  Same caches as ``ops.linear``.
"""
from __future__ import annotations

import numpy as np

from ...ops.linear import check_linear, to_half
from ..blas import gemm


def half_matmul(a, b):
    """``ops.half_matmul`` on the CPU: float16 operands widened to float32, multiplied by ``gemm``."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):   # an overflow is inf, for the loss scaler
        return gemm(a32, b32).astype(np.float16)


def linear_forward(x, W, b):
    """``ops.linear_forward``: y = x W^T + b, the bias added per run of rows while they are in cache."""
    check_linear(x, W, b)
    out_shape = x.shape[:-1] + (W.shape[0],)
    if W.dtype == np.float16:
        x16 = to_half(x)
        y = half_matmul(x16.reshape(-1, x.shape[-1]), W.T) + b
        return y.reshape(out_shape), (x16, W)
    y = gemm(x.reshape(-1, x.shape[-1]), W.T, b)
    return y.reshape(out_shape), (x, W)


def linear_backward(dy, cache):
    """``ops.linear_backward``: dx = dy W and dW = dy^T x by ``gemm``; db summed as there."""
    x, W = cache
    dy2 = dy.reshape(-1, dy.shape[-1])
    x2 = x.reshape(-1, x.shape[-1])
    if W.dtype == np.float16:
        dy16 = to_half(dy2)
        dx = half_matmul(dy16, W).astype(dy.dtype).reshape(x.shape)
        return dx, half_matmul(dy16.T, x2).astype(dy.dtype), dy2.sum(axis=0)
    dx = gemm(dy2, W).reshape(x.shape)
    dW = gemm(dy2.T, x2)
    db = dy2.sum(axis=0)
    return dx, dW, db
