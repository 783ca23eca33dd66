"""GELU and dropout on float32 NumPy arrays: the reference's formulas in blocks over the pool.

Same caches as ``minibert.ops.activations`` and ``minibert.ops.dropout``.
"""
from __future__ import annotations

import numpy as np

from ...constants import GELU_TANH_C as _GELU_TANH_C, INV_SQRT_2 as _INV_SQRT_2
from ...constants import INV_SQRT_2PI as _INV_SQRT_2PI, SQRT_2_OVER_PI as _SQRT_2_OVER_PI
from ...ops.activations import GeluCache
from ...ops.common import check_bias
from ...ops.linear import to_half
from ..erf import erf64
from ..pool import ERF_BLOCK, for_rows, rows as _rows


def gelu_forward(x, approximate="none", bias=None, half_out=False):
    """``ops.gelu_forward`` for float32: same cache, same shapes.

    Exact form: Phi(x) = (1 + erf(x / sqrt 2)) / 2 and x Phi(x) are computed
    in float64 per block and rounded once (the reference rounds after each
    float32 step), so values agree with the reference to float32 rounding.
    The tanh form repeats the reference's float32 operations exactly.  A
    ``bias`` is added to each block as it is read (float32, as there).
    """
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    check_bias(x, bias, "gelu_forward")
    x, rows_of = _with_bias(np.ascontiguousarray(x), bias)
    xr = _rows(x)
    y = np.empty_like(x)
    yr = _rows(y)
    if approximate == "none":
        cdf = np.empty_like(x)
        cr = _rows(cdf)

        def block(r0, r1):
            x64 = rows_of(r0, r1).astype(np.float64)
            c = erf64(x64 * _INV_SQRT_2)
            c += 1.0
            c *= 0.5
            cr[r0:r1] = c
            c *= x64
            yr[r0:r1] = c
        for_rows(block, xr.shape[0], xr.shape[1], ERF_BLOCK)
        return (to_half(y) if half_out else y), GeluCache(x, cdf, None)
    t = np.empty_like(x)
    tr = _rows(t)

    def block(r0, r1):
        xb = rows_of(r0, r1)
        # u = sqrt(2/pi) (x + c x^3), in the reference's order of operations
        u = np.multiply(xb, _GELU_TANH_C)
        u *= xb
        u *= xb
        u += xb
        u *= _SQRT_2_OVER_PI
        np.tanh(u, out=tr[r0:r1])
        # y = 0.5 x (1 + t)
        np.add(tr[r0:r1], 1.0, out=u)
        yb = np.multiply(xb, 0.5, out=yr[r0:r1])
        yb *= u
    for_rows(block, xr.shape[0], xr.shape[1])
    return (to_half(y) if half_out else y), GeluCache(x, None, t)


def _with_bias(x, bias):
    """(the GELU's input, rows_of(r0, r1): its rows r0..r1): x itself, or x + bias made one block of
    rows at a time by ``rows_of`` (a float16 x, mixed precision's product, widens in the add)."""
    xr = _rows(x)
    if bias is None:
        return x, lambda r0, r1: xr[r0:r1]
    u = np.empty(x.shape, np.result_type(x.dtype, bias.dtype))
    ur = _rows(u)
    return u, lambda r0, r1: np.add(xr[r0:r1], bias, out=ur[r0:r1])


def gelu_backward(dy, cache):
    """``ops.gelu_backward`` for float32: the reference's float32 operations, blocked and threaded."""
    x, cdf, t = cache
    dy = np.ascontiguousarray(dy, dtype=x.dtype)
    xr, dyr = _rows(x), _rows(dy)
    dx = np.empty_like(x)
    dxr = _rows(dx)
    if t is None:
        cr = _rows(cdf)

        def block(r0, r1):
            xb = xr[r0:r1]
            # dy * (Phi(x) + x phi(x)),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
            g = np.multiply(xb, -0.5)
            g *= xb
            np.exp(g, out=g)
            g *= _INV_SQRT_2PI
            g *= xb
            g += cr[r0:r1]
            np.multiply(dyr[r0:r1], g, out=dxr[r0:r1])
        for_rows(block, xr.shape[0], xr.shape[1])
        return dx
    tr = _rows(t)

    def block(r0, r1):
        xb, tb = xr[r0:r1], tr[r0:r1]
        # dudx = sqrt(2/pi) (1 + 3 c x^2)
        dudx = np.multiply(xb, 3.0 * _GELU_TANH_C)
        dudx *= xb
        dudx += 1.0
        dudx *= _SQRT_2_OVER_PI
        # 0.5 x (1 - t^2) dudx + 0.5 (1 + t)
        s = np.multiply(tb, tb)
        np.subtract(1.0, s, out=s)
        h = np.multiply(xb, 0.5)
        h *= s
        h *= dudx
        np.add(tb, 1.0, out=s)
        s *= 0.5
        s += h
        np.multiply(dyr[r0:r1], s, out=dxr[r0:r1])
    for_rows(block, xr.shape[0], xr.shape[1])
    return dx


def dropout_forward(x, p, rng, train):
    """``ops.dropout_forward`` for float32: one draw as there, mask and product in blocks (same values)."""
    if not train or p == 0.0:
        return x, None
    u = rng(x.shape)
    x = np.ascontiguousarray(x)
    scale = x.dtype.type(1.0 / (1.0 - p))
    xr, ur = _rows(x), _rows(np.ascontiguousarray(u))
    mask, out = np.empty_like(x), np.empty_like(x)
    mr, orr = _rows(mask), _rows(out)

    def block(r0, r1):
        np.multiply(ur[r0:r1] >= p, scale, out=mr[r0:r1])
        np.multiply(xr[r0:r1], mr[r0:r1], out=orr[r0:r1])
    for_rows(block, xr.shape[0], xr.shape[1])
    return out, mask


def dropout_backward(dout, cache):
    """``ops.dropout_backward`` for float32: dout * mask, blocked and threaded."""
    if cache is None:
        return dout
    if dout.shape != cache.shape:      # a broadcast: NumPy's own product
        return dout * cache
    return multiply(dout, cache)


def multiply(a, b):
    """a * b for two float32 arrays of the same shape, blocked and threaded."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    out = np.empty_like(a)
    ar, br, orr = _rows(a), _rows(b), _rows(out)

    def block(r0, r1):
        np.multiply(ar[r0:r1], br[r0:r1], out=orr[r0:r1])
    for_rows(block, ar.shape[0], ar.shape[1])
    return out


