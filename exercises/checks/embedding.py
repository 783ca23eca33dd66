"""The embedding lookup out[b, t] = W[ids[b, t]] and its backward pass: repeated ids add up, [PAD] gets none."""
from __future__ import annotations

import numpy as np

from minibert import ops as L

from ..cases import embedding as cases
from ..harness import as_array, compare, grad_check
from ..report import Report
from .common import bwd, forward_output, fwd

T = cases.TABLE


def check(r: Report) -> None:
    rng = np.random.default_rng(1)
    V, H = 11, 6
    ids = np.array([[1, 4, 4, 0, 0], [10, 1, 0, 3, 4]])   # repeated ids, and [PAD] = 0
    W = rng.standard_normal((V, H))
    out, cache = fwd(r, "embedding_forward", ids, W)
    out = as_array(r, "out", out, (2, 5, H), "out[b, t] = W[ids[b, t]] has shape (B, T, H)")
    compare(r, "forward vs minibert", out, L.embedding_forward(ids, W)[0],
            hint="out[b, t] is the row W[ids[b, t]]: index the table with the ids (W[ids])",
            known=T.known(lambda m: m.embedding_forward(ids, W)[0]))
    dout = rng.standard_normal(out.shape)
    for padding_idx in (None, 0):
        dW = bwd(r, "embedding_backward", dout, cache, padding_idx=padding_idx)
        dW = as_array(r, f"dW (padding_idx={padding_idx})", dW, W.shape, "dW has W's shape (V, H)")
        known = T.known(lambda m: m.embedding_backward(dout, m.embedding_forward(ids, W)[1], padding_idx=padding_idx),
                        padding_idx=padding_idx)
        grad_check(r, f"dW (padding_idx={padding_idx})", forward_output(r, "embedding_forward", ids, W),
                   W, dout, dW, known=known, zero_rows=padding_idx)
