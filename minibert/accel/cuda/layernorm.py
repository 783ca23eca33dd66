"""LayerNorm on the GPU, alone and as BERT's post-LN residual connection: one warp per row.

``layernorm_*``              ``ops.layernorm``: the row's mean, variance and normalised values in
                             the forward, its two means in the backward (gamma's and beta's
                             gradients by ``column_sums``)
``dropout_add_layernorm_*``  ``ops.residual``, LayerNorm(dropout(a) + x), by the same kernels: the
                             forward first makes the sum (dropout's mask as ``dropout_forward``
                             makes it, from the step's key or the uniforms given), the backward
                             also writes the gradient through dropout's mask.  One launch each way,
                             where the three ops are three launches forward and two backward
"""
from __future__ import annotations

import numpy as np

from ... import ops as ref
from ...ops.common import check_bias
from ...ops.layernorm import LayerNormCache, check_layernorm
from ...ops.residual import ResidualCache
from . import kernels, source
from .kernels import applies, warp_rows
from .linear import column_sums
from .ops import dropout_forward


def _forward(x, gamma, beta, eps, res=None):
    """The forward kernel: y, ``LayerNormCache``; ``res``: None, or (a, bias, u, key, how, p, scale, mask)
    (a float16 a, mixed precision's product, is read as it is; bias None: none)."""
    import cupy
    H = x.shape[-1]
    rows = x.size // H
    y, xhat = cupy.empty_like(x), cupy.empty_like(x)
    rstd = cupy.empty(x.shape[:-1] + (1,), dtype=x.dtype)
    t, dummy = x.dtype.type, kernels.dummy(x.dtype)
    a, bias, u, key, how, p, scale, mask = res if res is not None else (dummy, None, dummy, kernels.no_key(), 0,
                                                                         0.0, 1.0, dummy)
    if rows:                              # a grid of no blocks is a CUDA launch error
        kernels.kernel("layernorm_fwd", source.LAYERNORM_FWD, x.dtype)(
            *warp_rows(rows), (x, gamma, beta, y, xhat, rstd, np.int32(H), np.int64(rows), t(eps),
                               np.int32(res is not None), *kernels.float_or_half(a, x.dtype),
                               dummy if bias is None else bias, np.int32(bias is not None),
                               u, *key, np.int32(how), t(p), t(scale), mask))
    return y, LayerNormCache(xhat, rstd, gamma)


def _backward(dy, cache, mask=None, dy_skip=None):
    """The backward kernel: dx, dgamma, dbeta, and dx * mask (None without a mask), of dy + dy_skip
    (dy may be float16, mixed precision's product: the kernel widens it)."""
    import cupy
    xhat, rstd, gamma = cache
    H = dy.shape[-1]
    rows = dy.size // H
    dx = cupy.empty_like(xhat)
    dummy = kernels.dummy(xhat.dtype)
    dmasked = cupy.empty_like(xhat) if mask is not None else dummy
    dy_half = dy.dtype == np.float16
    # what gamma and beta's sums read: dy itself, or dy + dy_skip (or dy widened) written by the kernel
    total = cupy.empty_like(xhat) if dy_skip is not None or dy_half else dy
    if rows:                              # none, e.g. a batch without a labelled MLM position
        kernels.kernel("layernorm_bwd", source.LAYERNORM_BWD, xhat.dtype)(
            *warp_rows(rows), (*kernels.float_or_half(dy, xhat.dtype), xhat, rstd, gamma, dx, np.int32(H), np.int64(rows),
                               np.int32(mask is not None), mask if mask is not None else dummy, dmasked,
                               np.int32(dy_skip is not None), dy_skip if dy_skip is not None else dummy, total))
    dgamma, dbeta = column_sums(total.reshape(rows, H), xhat.reshape(rows, H))
    return dx, dgamma, dbeta, dmasked if mask is not None else None


def layernorm_forward(x, gamma, beta, eps):
    check_layernorm(x, gamma, beta)
    if not applies(x, gamma, beta):
        return ref.layernorm_forward(x, gamma, beta, eps)
    return _forward(x, gamma, beta, eps)


def _takes(dy, like):
    """Whether a kernel reads dy (the backward's gradient, the residual connection's a): ``like``'s
    dtype, or float16 (mixed precision's product), on the device, C-contiguous, of ``like``'s shape."""
    return (kernels.on_device(dy) and dy.flags.c_contiguous and dy.shape == like.shape
            and dy.dtype in (like.dtype, np.float16))


def layernorm_backward(dy, cache):
    if not (applies(*cache) and _takes(dy, cache.xhat)):
        return ref.layernorm_backward(dy, cache)
    return _backward(dy, cache)[:3]


def dropout_add_layernorm_forward(a, x, gamma, beta, eps, p, rng, train, bias=None):
    """``ops.dropout_add_layernorm_forward`` in one launch, the bias added and a float16 a widened as the
    kernel reads a (arrays the kernel does not take: this set's dropout and LayerNorm one after the
    other, the same numbers)."""
    check_layernorm(x, gamma, beta)
    check_bias(a, bias, "dropout_add_layernorm_forward")
    takes_bias = bias is None or applies(x, bias) and bias.shape == gamma.shape
    if not (applies(x, gamma, beta) and _takes(a, x) and takes_bias):
        d, mask = dropout_forward(a if bias is None else a + bias, p, rng, train)
        y, norm = layernorm_forward(d + x, gamma, beta, eps)
        return y, ResidualCache(mask, norm)
    import cupy
    t, dummy = x.dtype.type, kernels.dummy(x.dtype)
    key, how, u, mask = kernels.no_key(), 0, dummy, None
    if train and p > 0.0:
        mask = cupy.empty_like(x)
        u, key, how = kernels.dropout_draws(rng, a.shape, x.dtype)
    y, norm = _forward(x, gamma, beta, eps, (a, bias, u, key, how, p, t(1.0 / (1.0 - p)) if how else 1.0,
                                             mask if mask is not None else dummy))
    return y, ResidualCache(mask, norm)


def dropout_add_layernorm_backward(dy, cache, dy_skip=None):
    """``ops.dropout_add_layernorm_backward`` in one launch besides the column sums: da, dx, dgamma, dbeta
    (dy + dy_skip made by the same kernel)."""
    mask, norm = cache
    if (not (applies(*norm) and _takes(dy, norm.xhat)) or (mask is not None and not applies(norm.xhat, mask))
            or (dy_skip is not None and (not applies(norm.xhat, dy_skip) or dy_skip.shape != dy.shape))):
        ds, dgamma, dbeta = layernorm_backward(dy if dy_skip is None else dy + dy_skip, norm)
        return ref.dropout_backward(ds, mask), ds, dgamma, dbeta
    ds, dgamma, dbeta, da = _backward(dy, norm, mask, dy_skip)
    return (ds if mask is None else da), ds, dgamma, dbeta
