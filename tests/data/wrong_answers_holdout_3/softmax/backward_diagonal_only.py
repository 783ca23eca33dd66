# slip: the backward pass keeps only the diagonal of the Jacobian, dx = p * dp, and drops the row term - p * sum(dp * p)
# names it: row term | off-diagonal | diagonal | only p * dp | correction term & missing
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
    m = x.max(axis=-1, keepdims=True)   # row maximum
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
    dx = p * dp                         # d exp(x) / dx = exp(x), so dp/dx = p
    return dx
