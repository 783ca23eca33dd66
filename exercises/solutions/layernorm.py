"""Solution: layer normalisation."""
import numpy as np


def layernorm_forward(x, gamma, beta, eps=1e-12):
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    var = (xc ** 2).mean(axis=-1, keepdims=True)          # biased: divide by H
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = xc * rstd
    y = gamma * xhat + beta
    cache = (xhat, rstd, gamma)
    return y, cache


def layernorm_backward(dy, cache):
    xhat, rstd, gamma = cache
    H = dy.shape[-1]
    dgamma = (dy * xhat).reshape(-1, H).sum(axis=0)
    dbeta = dy.reshape(-1, H).sum(axis=0)
    g = dy * gamma
    dx = rstd * (g - g.mean(axis=-1, keepdims=True)
                 - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    return dx, dgamma, dbeta
