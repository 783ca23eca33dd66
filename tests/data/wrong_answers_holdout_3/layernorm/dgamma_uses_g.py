# slip: dgamma sums g * xhat with g = dy * gamma, so gamma is multiplied in once too often; dgamma = sum(dy * xhat)
# names it: dgamma & multiplied by gamma | dgamma & times gamma | dgamma & gamma twice | dgamma & g instead of dy | dgamma & uses g
"""Exercise: layer normalisation.

Each vector x (one token's hidden state, length H) is normalised over its own
H entries, then scaled and shifted:

    mu = mean(x)             var = mean((x - mu)^2)      (biased: divide by H)
    xhat = (x - mu) / sqrt(var + eps)
    y = gamma * xhat + beta

Two rules for every function here: work in float64 (the checker passes float64
arrays and wants float64 results back), and change no argument in place (x,
gamma, beta, dy, the cache): compute new arrays and return them.  The caller
still uses its arrays after the call: a residual connection sends the same x,
and the same gradient, into two branches.

Check your work with:   python -m exercises check layernorm
"""
import numpy as np


def layernorm_forward(x, gamma, beta, eps=1e-12):
    """Forward pass.

    Args:
        x: (..., H), e.g. (B, T, H); normalise over the last axis only
        gamma, beta: (H,)
        eps: added to the variance inside the square root (BERT uses 1e-12)

    Returns:
        y: (..., H)
        cache: what the backward pass needs (xhat, 1/sqrt(var + eps) and gamma suffice)
    """
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = (x - mu) * rstd
    y = gamma * xhat + beta
    cache = (xhat, rstd, gamma)
    return y, cache


def layernorm_backward(dy, cache):
    """Backward pass.

    Args:
        dy: (..., H)
        cache: from layernorm_forward

    Returns:
        dx: (..., H), dgamma: (H,), dbeta: (H,)

    Derive dx yourself: every x_j of a row moves mu and var, and through them
    every xhat_i of the row.  Check a small case by hand, or against the
    gradient check.  Stuck?  python -m exercises hint layernorm   (then 2, then 3)
    """
    xhat, rstd, gamma = cache
    g = dy * gamma                      # gradient with respect to xhat
    dx = rstd * (g - g.mean(axis=-1, keepdims=True)
                 - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    axes = tuple(range(dy.ndim - 1))    # every axis but the last
    dgamma = (g * xhat).sum(axis=axes)
    dbeta = dy.sum(axis=axes)
    return dx, dgamma, dbeta
