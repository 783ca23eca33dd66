# slip: dout is flattened with reshape(H, -1).T, which has the shape (B*T, H) but scrambles its rows, so they no longer line up with ids.reshape(-1)
# names it: dout & order | dout & line up | reshape(h, -1) | dout & scrambl | rows of dout & ids
"""Exercise: the embedding lookup and its backward pass.

BERT turns token ids into vectors by looking up rows of a table W (V, H):
out[b, t] = W[ids[b, t]].  The lookup has no arithmetic, but its backward
pass has one trap: a token that appears several times in the batch receives
the gradient of every occurrence.

Two rules for every function here: work in float64 (the checker passes float64
arrays and wants float64 results back), and change no argument in place (ids,
W, dout, the cache): compute new arrays and return them.  The caller still
uses its arrays after the call: a residual connection sends the same x, and
the same gradient, into two branches.

Check your work with:   python -m exercises check embedding
"""
import numpy as np


def embedding_forward(ids, W):
    """Forward pass.

    Args:
        ids: (B, T) integer token ids, each in [0, V)
        W: (V, H) the embedding table

    Returns:
        out: (B, T, H) with out[b, t] = W[ids[b, t]]
        cache: what the backward pass needs (the ids and W's shape are enough)
    """
    out = W[ids]
    cache = (ids, W.shape)
    return out, cache


def embedding_backward(dout, cache, padding_idx=None):
    """Backward pass: the gradient of the table.

    Args:
        dout: (B, T, H) the gradient of the loss with respect to out
        cache: from embedding_forward
        padding_idx: if not None, the id of [PAD]; its row must get a zero
            gradient (as PyTorch's nn.Embedding(padding_idx=...) does), so the
            [PAD] vector never changes in training.

    Returns:
        dW: (V, H) with dW[v] = the sum of dout[b, t] over every (b, t) where ids[b, t] == v

    Hints:
        * start from zeros; rows of ids that never occur get no gradient.
        * ``dW[ids] += dout`` looks right but is wrong when an id repeats:
          NumPy's fancy-index assignment writes each row once, so repeated
          ids do not add up.  Look at ``np.add.at``.
    """
    ids, W_shape = cache
    V, H = W_shape
    dW = np.zeros(W_shape)
    flat_ids = ids.reshape(-1)                  # (B*T,)
    flat_dout = dout.reshape(H, -1).T           # (B*T, H)
    np.add.at(dW, flat_ids, flat_dout)
    if padding_idx is not None:
        dW[padding_idx] = 0.0           # [PAD] gets no gradient
    return dW
