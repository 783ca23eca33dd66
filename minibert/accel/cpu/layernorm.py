"""LayerNorm on float32 NumPy arrays: row blocks over the pool, the reference's float32 operations."""
from __future__ import annotations

import numpy as np

from ...ops.layernorm import LayerNormCache, check_layernorm
from ..pool import for_rows


def layernorm_forward(x, gamma, beta, eps):
    """``ops.layernorm_forward`` for float32: row blocks, the reference's float32 operations."""
    check_layernorm(x, gamma, beta)
    x = np.ascontiguousarray(x)
    H = x.shape[-1]
    xr = x.reshape(-1, H)
    y, xhat = np.empty_like(x), np.empty_like(x)
    yr, hr = y.reshape(-1, H), xhat.reshape(-1, H)
    rstd = np.empty(x.shape[:-1] + (1,), dtype=x.dtype)
    sr = rstd.reshape(-1, 1)

    def block(r0, r1):
        xb = xr[r0:r1]
        xc = xb - xb.mean(axis=-1, keepdims=True)
        var = (xc * xc).mean(axis=-1, keepdims=True)
        var += eps
        var **= 0.5
        np.divide(1.0, var, out=sr[r0:r1])
        np.multiply(xc, sr[r0:r1], out=hr[r0:r1])
        yb = np.multiply(hr[r0:r1], gamma, out=yr[r0:r1])
        yb += beta
    for_rows(block, xr.shape[0], H)
    return y, LayerNormCache(xhat, rstd, gamma)


def layernorm_backward(dy, cache):
    """``ops.layernorm_backward`` for float32.

    dx repeats the reference's operations row by row (equal bit for bit);
    dgamma and dbeta are sums over rows, taken per block and then over the
    blocks in order, so their rounding differs from the reference's single
    pass (within float32 tolerance) but not between thread counts.
    """
    xhat, rstd, gamma = cache
    H = xhat.shape[-1]
    dy = np.ascontiguousarray(dy, dtype=xhat.dtype)
    dyr, hr, sr = dy.reshape(-1, H), xhat.reshape(-1, H), rstd.reshape(-1, 1)
    dx = np.empty_like(xhat)
    dxr = dx.reshape(-1, H)

    def block(r0, r1):
        dyb, hb = dyr[r0:r1], hr[r0:r1]
        gh = np.multiply(dyb, hb)
        dgamma = gh.sum(axis=0)
        dbeta = dyb.sum(axis=0)
        g = np.multiply(dyb, gamma)
        np.multiply(g, hb, out=gh)
        # rstd * (g - mean(g) - xhat * mean(g * xhat))
        m2 = gh.mean(axis=-1, keepdims=True)
        np.multiply(hb, m2, out=gh)
        g_mean = g.mean(axis=-1, keepdims=True)
        g -= g_mean
        g -= gh
        np.multiply(sr[r0:r1], g, out=dxr[r0:r1])
        return dgamma, dbeta
    parts = for_rows(block, dyr.shape[0], H)
    if not parts:            # no rows (e.g. no labelled MLM position): nothing to sum
        zeros = np.zeros(H, dtype=xhat.dtype)
        return dx, zeros, zeros.copy()
    dgamma = parts[0][0]
    dbeta = parts[0][1]
    for dg, db in parts[1:]:
        dgamma += dg
        dbeta += db
    return dx, dgamma, dbeta

