"""The embedding's backward on NumPy arrays: a sort and one vectorised sum per run of equal ids."""
from __future__ import annotations

import numpy as np


def embedding_backward(dout, cache, padding_idx=None):
    """``ops.embedding_backward``: dW[v] = the sum of dout over the positions whose id is v.

    ``np.add.at`` adds element by element in an unbuffered loop, slow on a
    BERT batch.  Here the ids are sorted so that equal ids are adjacent, each
    run of equal ids is summed by one ``np.add.reduceat``, and the sums are
    written with plain fancy indexing (safe now that the ids are unique).
    """
    ids, shape = cache
    ids, rows = ids.reshape(-1), dout.reshape(-1, shape[1])
    dW = np.zeros(shape, dtype=dout.dtype)
    if ids.size == 0:
        return dW
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])   # where each run begins
    run_ids = sorted_ids[starts]
    dW[run_ids] = np.add.reduceat(rows[order], starts, axis=0)
    if padding_idx is not None:
        dW[padding_idx] = 0
    return dW
