# slip: the maximum subtracted before exp is taken over axis 0 (down the columns), not each row's own maximum over the last axis, so it no longer cancels
# names it: axis=0 & max | row's own max | each row's own | max & last axis | max & axis=-1
"""Exercise: a numerically stable softmax and its backward pass.

    p_i = exp(x_i) / sum_j exp(x_j)          (over the last axis)

Attention turns scores into weights with it, and the MLM and NSP losses turn
logits into probabilities with it.

Two rules for every function here: work in float64 (the checker passes float64
arrays and wants float64 results back), and change no argument in place (x,
dp, the cache): compute new arrays and return them.  The caller still uses its
arrays after the call: a residual connection sends the same x, and the same
gradient, into two branches.

Check your work with:   python -m exercises check softmax
"""
import numpy as np


def softmax_forward(x):
    """Forward pass over the last axis.

    Args:
        x: (..., C)

    Returns:
        p: (..., C), every row sums to 1
        cache: what the backward pass needs (p itself is enough)

    Hint: exp(1000) overflows to inf.  Subtracting the row's maximum first
    changes nothing mathematically (the factor exp(-max) cancels between
    numerator and denominator) and keeps every exponent <= 0.
    """
    m = x.max(axis=0, keepdims=True)    # maximum, for stability
    e = np.exp(x - m)
    p = e / e.sum(axis=-1, keepdims=True)
    cache = p
    return p, cache


def softmax_backward(dp, cache):
    """Backward pass.

    Args:
        dp: (..., C) the gradient of the loss with respect to p

    Returns:
        dx: (..., C)

    Derivation: start from dp_i/dx_j = p_i (delta_ij - p_j) and apply it to
    dp without building the C x C matrix.  Every p_i depends on every x_j.
    Stuck?  python -m exercises hint softmax   (then 2, then 3)
    """
    p = cache
    s = (dp * p).sum(axis=-1, keepdims=True)   # one number per row
    dx = p * (dp - s)
    return dx
