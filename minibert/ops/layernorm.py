"""Layer normalisation over the last axis (H features per row)."""
from __future__ import annotations

from typing import NamedTuple

from .common import require


class LayerNormCache(NamedTuple):
    """What the backward needs: the normalised rows, 1/std per row, and the scale."""
    xhat: object     # (..., H)  (x - mean) / sqrt(var + eps)
    rstd: object     # (..., 1)  1 / sqrt(var + eps)
    gamma: object    # (H,)


def check_layernorm(x, gamma, beta) -> None:
    require(x.ndim >= 1 and gamma.shape == beta.shape == (x.shape[-1],),
            f"layernorm_forward: x {tuple(x.shape)} is normalised over its last axis, so gamma and "
            f"beta must be ({x.shape[-1] if x.ndim else '?'},); got {tuple(gamma.shape)} and {tuple(beta.shape)}")


def layernorm_forward(x, gamma, beta, eps):
    """Normalise each row over the last axis, then scale and shift.

    y = gamma * (x - mean) / sqrt(var + eps) + beta, with the biased variance.
    x: (..., H); gamma, beta: (H,)  ->  y: (..., H); cache ``LayerNormCache``
    """
    check_layernorm(x, gamma, beta)
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=-1, keepdims=True)
    rstd = 1.0 / (var + eps) ** 0.5
    xhat = xc * rstd
    y = xhat * gamma + beta
    return y, LayerNormCache(xhat, rstd, gamma)


def layernorm_backward(dy, cache):
    """dy: (..., H)  ->  dx (..., H), dgamma (H,), dbeta (H,).

    With g = dy * gamma, the mean and variance both depend on every x in the
    row, which gives the two correction terms:
        dx = rstd * (g - mean(g) - xhat * mean(g * xhat))

    dy may come in float16 (a linear layer's dx in mixed precision): it is widened first.
    """
    xhat, rstd, gamma = cache
    dy = dy.astype(xhat.dtype, copy=False)
    H = dy.shape[-1]
    dgamma = (dy * xhat).reshape(-1, H).sum(axis=0)
    dbeta = dy.reshape(-1, H).sum(axis=0)
    g = dy * gamma
    dx = rstd * (g - g.mean(axis=-1, keepdims=True)
                 - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    return dx, dgamma, dbeta
