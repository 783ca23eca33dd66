"""The embedding's usual mistakes: out[b, t] = W[ids[b, t]], and its scatter-add backward."""
from __future__ import annotations

import numpy as np

from .table import Table


def embedding_forward(ids, W):
    return W[ids], (ids, W.shape)


def _backward(overwrite=False, zero_pad=True, zero_row0=False):
    """embedding_backward, or one of its usual mistakes."""
    def embedding_backward(dout, cache, padding_idx=None):
        ids, (V, H) = cache
        dW = np.zeros((V, H), dtype=dout.dtype)
        if overwrite:                   # fancy-index assignment: a repeated id keeps one row of dout
            dW[ids] += dout
        else:                           # np.add.at adds every row of a repeated id
            np.add.at(dW, ids.reshape(-1), dout.reshape(-1, H))
        if zero_pad and padding_idx is not None:
            dW[padding_idx] = 0.0
        if zero_row0:
            dW[0] = 0.0
        return dW
    return embedding_backward


TABLE = Table("embedding", embedding_forward=embedding_forward, embedding_backward=_backward())
case = TABLE.case

case("dW[ids] += dout", "a repeated id must get the SUM of its rows of dout; dW[ids] += dout keeps only one of them "
                        "(use np.add.at)", embedding_backward=_backward(overwrite=True))
case("[PAD] row not zeroed", "the row padding_idx={padding_idx} ([PAD]) must get a zero gradient: set it to 0 at the end",
     embedding_backward=_backward(zero_pad=False))
case("row 0 always zeroed", "with padding_idx=None every row gets its gradient, row 0 included",
     embedding_backward=_backward(zero_row0=True))
