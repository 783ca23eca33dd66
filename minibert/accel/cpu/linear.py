"""Linear layers on NumPy arrays: the products cut into fixed runs of rows over the pool (``gemm``).

float32: the product and the bias add, rows over all cores.  Mixed
precision (a float16 weight): the reference's steps, with the widened
float32 product made by ``gemm`` as well.  Same caches as ``ops.linear``.
"""
from __future__ import annotations

import numpy as np

from ...ops.linear import check_linear
from ..blas import gemm
from ..half import half_linear_backward, half_linear_forward


def half_matmul(a, b):
    """``ops.half_matmul`` on the CPU: float16 operands widened to float32, multiplied by ``gemm``."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):   # an overflow is inf, for the loss scaler
        return gemm(a32, b32).astype(np.float16)


def linear_forward(x, W, b):
    """``ops.linear_forward``: y = x W^T + b, the bias added per run of rows while they are in cache."""
    if W.dtype == np.float16:
        return half_linear_forward(x, W, b, half_matmul)
    check_linear(x, W, b)
    y = gemm(x.reshape(-1, x.shape[-1]), W.T, b)
    return y.reshape(x.shape[:-1] + (W.shape[0],)), (x, W)


def linear_backward(dy, cache, half_dx=False):
    """``ops.linear_backward``: dx = dy W and dW = dy^T x by ``gemm``; db summed as there."""
    x, W = cache
    if W.dtype == np.float16:
        return half_linear_backward(dy, cache, half_matmul, half_dx=half_dx)
    dy2 = dy.reshape(-1, dy.shape[-1])
    x2 = x.reshape(-1, x.shape[-1])
    dx = gemm(dy2, W).reshape(x.shape)
    dW = gemm(dy2.T, x2)
    db = dy2.sum(axis=0)
    return dx, dW, db
