# slip: dx leaves out the path through the variance, the term - xhat * mean(g * xhat)
# names it: var | xhat * mean | mean(g * xhat) | mean(g*xhat)
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

    Derivation.  Write g = dy * gamma (the gradient with respect to xhat) and
    r = 1 / sqrt(var + eps).  Every x_j of a row moves mu and var, and through
    them every xhat_i of the row, which gives two correction terms:

        dx = r * (g - mean(g) - xhat * mean(g * xhat))      (means over the last axis)

    Hints:
        * dgamma and dbeta sum over every axis but the last.
        * the usual mistakes: leaving out "- mean(g)" (the path through mu) or
          "- xhat * mean(g * xhat)" (the path through var).
    """
    xhat, rstd, gamma = cache
    H = dy.shape[-1]
    dgamma = (dy * xhat).reshape(-1, H).sum(axis=0)
    dbeta = dy.reshape(-1, H).sum(axis=0)
    g = dy * gamma
    dx = rstd * (g - g.mean(axis=-1, keepdims=True))
    return dx, dgamma, dbeta
