"""The embedding lookup: a row of a table per token id."""
from __future__ import annotations

from ..backend import on_host
from .common import get_array_module, require


def embedding_forward(ids, W):
    """Row lookup: out[b, t] = W[ids[b, t]].

    ids: (B, T) int; W: (V, H)  ->  out: (B, T, H); cache (ids, W.shape)
    """
    if on_host(ids) and ids.size:     # (on a GPU the check would wait for the device)
        require(ids.dtype.kind in "iu" and 0 <= ids.min() and ids.max() < W.shape[0],
                f"embedding_forward: ids must be ints in [0, {W.shape[0]}) (the rows of W), "
                f"got {ids.dtype} from {ids.min()} to {ids.max()}")
    return W[ids], (ids, W.shape)


def embedding_backward(dout, cache, padding_idx=None):
    """dW[v] = sum of dout over every position whose id is v.

    dout: (B, T, H)  ->  dW: (V, H).  The row ``padding_idx`` (BERT's
    ``[PAD]``) gets no gradient, as with PyTorch's ``nn.Embedding``.
    """
    ids, shape = cache
    xp = get_array_module(dout)
    dW = xp.zeros(shape, dtype=dout.dtype)
    # add.at sums repeated ids (dW[ids] += dout would keep only one of them)
    xp.add.at(dW, ids.reshape(-1), dout.reshape(-1, shape[1]))
    if padding_idx is not None:
        dW[padding_idx] = 0
    return dW
