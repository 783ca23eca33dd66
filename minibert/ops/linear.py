"""The linear (fully connected) layer, and the float16 product of mixed precision.

Shapes: N rows, ``in`` input features, ``out`` output features.
"""
from __future__ import annotations

import numpy as np

from .common import require


def check_linear(x, W, b) -> None:
    """The shapes ``linear_forward`` accepts, with a message that says which one is wrong."""
    require(W.ndim == 2 and (b is None or b.shape == (W.shape[0],)) and x.ndim >= 1
            and x.shape[-1] == W.shape[1],
            f"linear_forward: x {tuple(x.shape)}, W {tuple(W.shape)}, b {None if b is None else tuple(b.shape)}; "
            f"W is (out, in), so x must end in in = W.shape[1] and b be (out,) or None")


def to_half(a):
    """``a`` rounded to float16; beyond 65504 it becomes inf (the loss scaler looks for that)."""
    with np.errstate(over="ignore"):
        return a.astype(np.float16)


def linear_forward(x, W, b):
    """y = x W^T + b, with W in PyTorch's [out, in] layout.

    x: (..., in); W: (out, in); b: (out,)  ->  y: (..., out); cache (x, W)

    The leading axes are flattened first: one (N, in) x (in, out) product is
    one BLAS call, where a (B, T, in) @ (in, out) product would be B calls.

    A float16 ``W`` (mixed precision, see ``half_matmul``) makes the product
    a half-precision one: x is rounded to float16 (unless it comes so) and
    kept so for the backward, and y comes back in b's dtype (float32).

    ``b=None``: the product alone (float16 in mixed precision), for an op
    that adds the bias itself as it reads the product (the ``bias`` of
    ``split_qkv``, ``gelu_forward``, ``tanh_forward`` and
    ``dropout_add_layernorm_forward``); the backward is the same, its db
    that bias's gradient.
    """
    check_linear(x, W, b)
    out_shape = x.shape[:-1] + (W.shape[0],)
    if W.dtype == np.float16:
        x16 = x if x.dtype == np.float16 else to_half(x)
        y = half_matmul(x16.reshape(-1, x.shape[-1]), W.T)
        if b is not None:
            y = y + b    # float16 + float32 promotes to float32: the widening and the bias add are one pass
        return y.reshape(out_shape), (x16, W)
    y = x.reshape(-1, x.shape[-1]) @ W.T
    if b is not None:
        y += b
    return y.reshape(out_shape), (x, W)


def linear_backward(dy, cache, half_dx=False):
    """dy: (..., out)  ->  dx (..., in), dW (out, in), db (out,).

    With x flattened to (N, in):  dx = dy W,  dW = dy^T x,  db = sum_n dy.
    In mixed precision (a float16 W) both products take dy rounded to
    float16 (dy may come so), dW and db are float32, and dx is widened to
    float32, or, with ``half_dx``, left the float16 product it is, for an
    op that takes it so (attention's products) or widens it as it reads it
    (the backward of LayerNorm, GELU, tanh).  db is summed from dy itself,
    in float32.  A float32 W ignores ``half_dx``.
    """
    x, W = cache
    dy2 = dy.reshape(-1, dy.shape[-1])
    x2 = x.reshape(-1, x.shape[-1])
    if W.dtype == np.float16:
        dy16 = dy2 if dy2.dtype == np.float16 else to_half(dy2)
        dx = half_matmul(dy16, W)
        dx = (dx if half_dx else dx.astype(np.float32)).reshape(x.shape)
        dW = half_matmul(dy16.T, x2).astype(np.float32)
        return dx, dW, dy2.astype(np.float32, copy=False).sum(axis=0)
    dx = (dy2 @ W).reshape(x.shape)
    dW = dy2.T @ x2
    db = dy2.sum(axis=0)
    return dx, dW, db


def half_matmul(a, b):
    """a @ b for float16 matrices: products summed in float32, the result rounded to float16.

    a: (N, K) float16; b: (K, M) float16  ->  (N, M) float16

    That is what a GPU's float16 product does (tensor cores, float32
    accumulation), and why mixed precision is fast there.  Here the operands
    are widened to float32 (exactly: every float16 is a float32), multiplied,
    and the result rounded back: the same numbers up to the order of the
    float32 sums.  (The GPU's kernels in ``accel/cuda`` use its own float16
    product instead.)
    """
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    # an overflow gives inf (and inf * 0 NaN): loss scaling looks for them
    with np.errstate(over="ignore", invalid="ignore"):
        return (a32 @ b32).astype(np.float16)
