"""LayerNorm's usual mistakes: y = gamma * (x - mu) / sqrt(var + eps) + beta over the last axis.

The backward pass with g = dy * gamma and r = 1 / sqrt(var + eps):
dx = r * (g - mean(g) - xhat * mean(g * xhat)), the '- mean(g)' from the path
through mu and the last term from the path through var.
"""
from __future__ import annotations

import numpy as np

from .table import Table

BERT_EPS = 1e-12     # BERT's layer_norm_eps, the stub's default (PyTorch's nn.LayerNorm has 1e-5)


def _rows(x):
    """Each token's own statistics: over its H features, the last axis."""
    mu = x.mean(-1, keepdims=True)
    return mu, ((x - mu) ** 2).mean(-1, keepdims=True)


def _forward(stats=_rows, default_eps=BERT_EPS, eps_inside=True, affine=True, fixed_eps=None, var_sum=False):
    """layernorm_forward, or one of its usual mistakes; ``stats(x) -> (mu, var)``."""
    def layernorm_forward(x, gamma, beta, eps=default_eps):
        mu, var = stats(x)
        if var_sum:                     # the sum of (x - mu)^2, not its mean
            var = var * x.shape[-1]
        eps = eps if fixed_eps is None else fixed_eps
        rstd = 1.0 / np.sqrt(var + eps) if eps_inside else 1.0 / (np.sqrt(var) + eps)
        xhat = (x - mu) * rstd
        return (gamma * xhat + beta if affine else xhat), (xhat, rstd, gamma)
    return layernorm_forward


def _mean(a):
    return a.mean(-1, keepdims=True)


def _backward(dx=None, dgamma=None, dbeta=None):
    """layernorm_backward, with each of dx, dgamma, dbeta computed by the function given (or rightly)."""
    def layernorm_backward(dy, cache):
        xhat, rstd, gamma = cache
        H = dy.shape[-1]
        g = dy * gamma
        right_dx = rstd * (g - _mean(g) - xhat * _mean(g * xhat))
        return (right_dx if dx is None else dx(dy, g, xhat, rstd),
                (dy * xhat).reshape(-1, H).sum(0) if dgamma is None else dgamma(dy, xhat),
                dy.reshape(-1, H).sum(0) if dbeta is None else dbeta(dy))
    return layernorm_backward


def _batch_axes(axes):
    """Statistics over batch axes, as BatchNorm takes them."""
    return lambda x: (x.mean(axes, keepdims=True), x.var(axes, keepdims=True))


TABLE = Table("layernorm", layernorm_forward=_forward(), layernorm_backward=_backward())
case = TABLE.case

BATCHNORM = ("normalise each token's own vector, over its H features (axis=-1): statistics over the batch axis mix "
             "different examples, which is batch normalisation, not layer normalisation")
DEFAULT_EPS = ("called without eps, your layernorm_forward uses eps = {eps}; BERT's default is "
               f"{BERT_EPS:g} (layer_norm_eps): make eps={BERT_EPS:g} the default")
LEADING = "x is (..., H): sum dgamma and dbeta over every axis but the last, however many there are"

# ---- the forward pass
case("unbiased variance", "use the biased variance (divide by H, np.var's default ddof=0), not ddof=1",
     layernorm_forward=_forward(lambda x: (x.mean(-1, keepdims=True), x.var(-1, ddof=1, keepdims=True))))
case("eps outside the square root", "eps goes inside the square root: sqrt(var + eps)",
     layernorm_forward=_forward(eps_inside=False))
case("gamma and beta left out", "scale by gamma and shift by beta after normalising",
     layernorm_forward=_forward(affine=False))
case("statistics of the whole array",
     "normalise each row over the last axis (axis=-1, keepdims=True), not the whole array",
     layernorm_forward=_forward(lambda x: (x.mean(), x.var())))
case("a fixed eps", "use the eps argument (here 1e-5), not a fixed value", layernorm_forward=_forward(fixed_eps=1e-12))
case("variance as a sum", "the variance is the MEAN of (x - mu)^2 over the H features (divide the sum by H), not the sum",
     layernorm_forward=_forward(var_sum=True))
case("statistics over the batch axis (BatchNorm)", BATCHNORM, layernorm_forward=_forward(_batch_axes(0)))
case("statistics over the batch and time axes", BATCHNORM, layernorm_forward=_forward(_batch_axes((0, 1))))
case("PyTorch's default eps=1e-5", DEFAULT_EPS.format(eps="1e-05 (PyTorch's nn.LayerNorm default)"),
     layernorm_forward=_forward(default_eps=1e-5))
case("Keras' default eps=1e-3", DEFAULT_EPS.format(eps="0.001 (Keras' LayerNormalization default)"),
     layernorm_forward=_forward(default_eps=1e-3))
case("no default eps", f"call layernorm_forward(x, gamma, beta) without eps must work: keep the stub's signature, "
                       f"eps={BERT_EPS:g}",
     layernorm_forward=lambda x, gamma, beta, eps: _forward()(x, gamma, beta, eps))
case("normalised over axis 2", "x is (..., H), here 2-D: normalise over axis=-1, the last axis whatever the number of "
                               "axes, not a fixed axis=2",
     layernorm_forward=_forward(lambda x: (x.mean(2, keepdims=True), x.var(2, keepdims=True))))

# ---- the backward pass
case("dx without the mean term", "dx is missing the mean term: dx = r * (g - mean(g) - xhat * mean(g * xhat)); "
                                 "the '- mean(g)' comes from the path through mu",
     layernorm_backward=_backward(dx=lambda dy, g, xhat, r: r * (g - xhat * _mean(g * xhat))))
case("dx without the variance term", "dx is missing the variance term '- xhat * mean(g * xhat)' (the path through var)",
     layernorm_backward=_backward(dx=lambda dy, g, xhat, r: r * (g - _mean(g))))
case("dx without either term", "dx needs both correction terms: r * (g - mean(g) - xhat * mean(g * xhat))",
     layernorm_backward=_backward(dx=lambda dy, g, xhat, r: r * g))
case("dx without gamma", "multiply dy by gamma first: g = dy * gamma is the gradient with respect to xhat",
     layernorm_backward=_backward(dx=lambda dy, g, xhat, r: r * (dy - _mean(dy) - xhat * _mean(dy * xhat))))
case("dgamma averaged", "sum over the rows, do not average",
     layernorm_backward=_backward(dgamma=lambda dy, xhat: (dy * xhat).reshape(-1, dy.shape[-1]).mean(0)))
case("dgamma without xhat", "dgamma is the sum of dy * xhat: y = gamma * xhat + beta, so gamma's gradient carries "
                            "xhat (dbeta is the one without it)",
     layernorm_backward=_backward(dgamma=lambda dy, xhat: dy.reshape(-1, dy.shape[-1]).sum(0)))
case("dbeta averaged", "dbeta is the sum of dy over the rows, not the mean",
     layernorm_backward=_backward(dbeta=lambda dy: dy.reshape(-1, dy.shape[-1]).mean(0)))
THREE_D_ONLY = case("dgamma summed over axes (0, 1)", LEADING,
                    layernorm_backward=_backward(dgamma=lambda dy, xhat: (dy * xhat).sum(axis=(0, 1)),
                                                 dbeta=lambda dy: dy.sum(axis=(0, 1))))
TABLE.variant("dx with sums instead of means, leading axes summed with a tuple",
              layernorm_backward=lambda dy, cache: _n_form(dy, *cache))


def _n_form(dy, xhat, rstd, gamma):
    """The same dx written with sums: (1/H) r (H g - sum g - xhat sum(g xhat))."""
    H = dy.shape[-1]
    g = dy * gamma
    dx = rstd / H * (H * g - g.sum(-1, keepdims=True) - xhat * (g * xhat).sum(-1, keepdims=True))
    lead = tuple(range(dy.ndim - 1))
    return dx, (dy * xhat).sum(axis=lead), dy.sum(axis=lead)
