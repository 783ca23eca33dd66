# slip: dW is computed as x^T dy, the transpose of the right product: (in, out) instead of W's (out, in)
# names it: transpose | (in, out) | dy^T x | G^T X | x^T
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
    y = x @ W.T + b
    cache = (x, W)
    return y, cache


def linear_backward(dy, cache):
    """Backward pass.

    Args:
        dy: (..., out)  the gradient of the loss with respect to y
        cache: from linear_forward

    Returns:
        dx: (..., in), dW: (out, in), db: (out,)

    Derivation, with x flattened to X (N, in) and dy to G (N, out):
        y_nj = sum_i X_ni W_ji + b_j
        dL/dX = G W          dL/dW = G^T X          dL/db_j = sum_n G_nj
    """
    x, W = cache
    dx = dy @ W
    dy2 = dy.reshape(-1, dy.shape[-1])
    x2 = x.reshape(-1, x.shape[-1])
    dW = x2.T @ dy2
    db = dy2.sum(axis=0)
    return dx, dW, db
