"""Softmax cross-entropy on float32 NumPy arrays: row blocks, no (N, C) temporaries.

Same cache as ``minibert.ops.loss`` (``CrossEntropyCache``).
"""
from __future__ import annotations

import numpy as np

from ...constants import IGNORE_INDEX
from ...ops.loss import CrossEntropyCache, check_cross_entropy
from .. import pool
from ..pool import for_rows

# A row of the MLM logits is a whole vocabulary (30,522 numbers, more than BLOCK):
# blocks of one row each would pay NumPy's per-call costs 608 times per pass.  Eight
# times BLOCK (about 8 such rows, 1 MB) halves the time of both passes.
_CE_BLOCK = 8


def softmax_cross_entropy_forward(logits, labels, ignore_index=IGNORE_INDEX):
    """The fused ``softmax_cross_entropy_forward``: row blocks, no (N, C) temporaries.

    Per row: m = max z, s = log sum exp(z - m); the picked log-probability is
    (z_label - m) - s, as in the reference.  The cache keeps m and s per row
    instead of the (N, C) log-probabilities (the backward recomputes them in
    cache), which saves two passes and one (N, C) array.
    """
    check_cross_entropy(logits, labels)
    logits = np.ascontiguousarray(logits)
    N, C = logits.shape
    valid = labels != ignore_index
    n_valid = int(valid.sum())
    safe = np.where(valid, labels, 0)
    row_max = np.empty((N, 1), dtype=logits.dtype)
    log_sum = np.empty((N, 1), dtype=logits.dtype)

    def block(r0, r1):
        zb = logits[r0:r1]
        m = zb.max(axis=-1, keepdims=True)
        e = zb - m
        np.exp(e, out=e)
        row_max[r0:r1] = m
        np.log(e.sum(axis=-1, keepdims=True), out=log_sum[r0:r1])
    for_rows(block, N, C, _CE_BLOCK * pool.BLOCK)
    rows = np.arange(N)
    picked = (logits[rows, safe][:, None] - row_max) - log_sum
    denom = max(n_valid, 1)
    loss = -(picked[:, 0] * valid).sum() / denom
    return loss, CrossEntropyCache(logits, row_max, log_sum, safe, valid, denom)


def softmax_cross_entropy_backward(dloss, cache):
    """dlogits = (softmax - onehot) * dloss / n_valid, zero on ignored rows; the reference's values."""
    logits, N = cache.logits, cache.logits.shape[0]
    dlogits = np.empty_like(logits)
    coef = (cache.valid * (dloss / cache.denom))[:, None].astype(logits.dtype)

    def block(r0, r1):
        d = np.subtract(logits[r0:r1], cache.row_max[r0:r1], out=dlogits[r0:r1])
        d -= cache.log_sum[r0:r1]
        np.exp(d, out=d)
        rows = np.arange(r1 - r0)
        d[rows, cache.safe[r0:r1]] -= 1.0
        d *= coef[r0:r1]
    for_rows(block, N, logits.shape[1], _CE_BLOCK * pool.BLOCK)
    return dlogits
