# slip: the forward pass leaves out the bias: y = x W^T, without + b
# names it: bias & missing | bias & left out | bias & forg | without the bias | add b
"""Exercise: the fully connected (linear) layer.

Every projection in BERT is one of these: the query, key and value
projections, the attention output, the two feed-forward layers, the pooler
and the heads.

    y = x W^T + b

W is stored in PyTorch's layout, [out_features, in_features], so a row of W
holds the weights of one output unit.

Two rules for every function here: work in float64 (the checker passes float64
arrays and wants float64 results back), and change no argument in place (x, W,
b, dy, the cache): compute new arrays and return them.  The caller still uses
its arrays after the call: a residual connection sends the same x, and the
same gradient, into two branches.

Check your work with:   python -m exercises check linear
"""
import numpy as np


def linear_forward(x, W, b):
    """Forward pass.

    Args:
        x: (..., in)  any number of leading axes, e.g. (N, in) or (B, T, in)
        W: (out, in)
        b: (out,)

    Returns:
        y: (..., out)
        cache: whatever the backward pass needs (your choice, e.g. a tuple)
    """
    y = x @ W.T                         # (..., out)
    cache = (x, W)
    return y, cache


def linear_backward(dy, cache):
    """Backward pass.

    Args:
        dy: (..., out)  the gradient of the loss with respect to y
        cache: from linear_forward

    Returns:
        dx: (..., in), dW: (out, in), db: (out,)

    Derivation: flatten x to X (N, in) and dy to G (N, out); then
        y_nj = sum_i X_ni W_ji + b_j
    and each gradient is one matrix product (or a sum).  Stuck?
    python -m exercises hint linear   (then 2, then 3)
    """
    x, W = cache
    X = x.reshape(-1, x.shape[-1])      # (N, in)
    G = dy.reshape(-1, dy.shape[-1])    # (N, out)
    dx = (G @ W).reshape(x.shape)      # (..., in)
    dW = G.T @ X                        # (out, in)
    db = G.sum(axis=0)                  # (out,)
    return dx, dW, db
