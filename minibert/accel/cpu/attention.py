"""Attention on float32 NumPy arrays: the small products over the pool, one pass per row block.

Same cache as ``minibert.ops.attention`` (``AttentionCache``).
"""
from __future__ import annotations

import math

import numpy as np

from ... import ops as ref
from ...ops.attention import AttentionCache, check_attention, dead_sequences
from ..blas import matmul
from ..pool import for_rows


def attention_probs(scores, scale, mask_bias, dropout_p, rng, train):
    """Scale, mask, softmax and dropout of attention scores, in place, one pass per row block.

    scores: (B, A, T, T) float32, C-contiguous (overwritten with the
    probabilities); mask_bias: (B, 1, 1, T) or None.
    Returns (probs, probs after dropout, dropout mask or None): the values
    ``ops.attention_forward`` computes, bit for bit.
    """
    B, A, T, _ = scores.shape
    sr = scores.reshape(B, A * T, T)
    drop = train and dropout_p != 0.0
    if drop:
        u = rng(scores.shape)                  # one draw, as the reference: the same masks
        ur = np.ascontiguousarray(u).reshape(B, A * T, T)
        keep_scale = scores.dtype.type(1.0 / (1.0 - dropout_p))
        mask, probs_d = np.empty_like(scores), np.empty_like(scores)
        mr, pdr = mask.reshape(B, A * T, T), probs_d.reshape(B, A * T, T)
    bias = None if mask_bias is None else mask_bias.reshape(B, 1, T)
    rows_per_b = A * T

    def block(r0, r1):
        # rows r0..r1 of the (B * A * T, T) view; split at batch boundaries for the mask bias
        r = r0
        while r < r1:
            b, i0 = divmod(r, rows_per_b)
            i1 = min(rows_per_b, i0 + (r1 - r))
            s = sr[b, i0:i1]
            s *= scale
            if bias is not None:
                s += bias[b]
            s -= s.max(axis=-1, keepdims=True)
            np.exp(s, out=s)
            s /= s.sum(axis=-1, keepdims=True)
            if drop:
                np.multiply(ur[b, i0:i1] >= dropout_p, keep_scale, out=mr[b, i0:i1])
                np.multiply(s, mr[b, i0:i1], out=pdr[b, i0:i1])
            r += i1 - i0
    for_rows(block, B * A * T, T)
    if drop:
        return scores, probs_d, mask
    return scores, scores, None


def attention_dscores(dprobs, probs, mask, scale, dead):
    """From dL/d(probs after dropout) to dL/d(scores), in place on ``dprobs``, one pass per row block.

    dscores = P * (dP' - sum(dP' * P)) * scale, with dP' = dprobs * mask;
    rows of fully masked sequences (``dead``) get 0.  The reference's
    operations in its order: the same values bit for bit.
    """
    B, A, T, _ = dprobs.shape
    dr, pr = dprobs.reshape(-1, T), probs.reshape(-1, T)
    mr = None if mask is None else mask.reshape(-1, T)
    rows_per_b = A * T
    dead_np = None if dead is None else np.asarray(dead)

    def block(r0, r1):
        d, p = dr[r0:r1], pr[r0:r1]
        if mr is not None:
            d *= mr[r0:r1]
        dp = d * p
        d -= dp.sum(axis=-1, keepdims=True)
        np.multiply(p, d, out=d)
        d *= scale
        if dead_np is not None:
            for b in range(r0 // rows_per_b, (r1 - 1) // rows_per_b + 1):
                if dead_np[b]:
                    lo, hi = max(r0, b * rows_per_b), min(r1, (b + 1) * rows_per_b)
                    dr[lo:hi] = 0
    for_rows(block, dr.shape[0], T)
    return dprobs



def attention_forward(q, k, v, mask_bias, dropout_p=0.0, rng=None, train=False):
    """``ops.attention_forward`` for float32: the B*A small products spread over the cores (one
    BLAS thread each), then scale, mask, softmax and dropout in one pass over row blocks.
    Mixed precision's float16 q, k, v take the reference's steps (the products emulated)."""
    if q.dtype == np.float16:
        return ref.attention_forward(q, k, v, mask_bias, dropout_p, rng, train)
    check_attention(q, k, v)
    scale = 1.0 / math.sqrt(q.shape[-1])
    probs, probs_d, mask = attention_probs(matmul(q, k.swapaxes(-1, -2)), scale, mask_bias, dropout_p,
                                           rng, train)
    out = matmul(probs_d, v)
    return out, AttentionCache(q, k, v, probs, probs_d, mask, scale, dead_sequences(mask_bias))


def attention_backward(dout, cache):
    """``ops.attention_backward`` for float32: dropout and softmax backward in one pass per row block."""
    q, k, v = cache.q, cache.k, cache.v
    if q.dtype == np.float16:
        return ref.attention_backward(dout, cache)
    dv = matmul(cache.probs_d.swapaxes(-1, -2), dout)
    dscores = attention_dscores(matmul(dout, v.swapaxes(-1, -2)), cache.probs, cache.drop_mask,
                                cache.scale, cache.dead)
    return matmul(dscores, k), matmul(dscores.swapaxes(-1, -2), q), dv
