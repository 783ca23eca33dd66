"""BERT's post-LN residual connection on NumPy arrays: ``ops.residual``'s three steps with this set's
dropout and LayerNorm kernels (each already one pass over its rows on the pool)."""
from __future__ import annotations

from ...ops.common import check_bias
from ...ops.residual import ResidualCache
from .elementwise import dropout_backward, dropout_forward
from .layernorm import layernorm_backward, layernorm_forward


def dropout_add_layernorm_forward(a, x, gamma, beta, eps, p, rng, train, bias=None):
    check_bias(a, bias, "dropout_add_layernorm_forward")
    if bias is not None:
        a = a + bias
    d, mask = dropout_forward(a, p, rng, train)
    y, norm = layernorm_forward(d + x, gamma, beta, eps)
    return y, ResidualCache(mask, norm)


def dropout_add_layernorm_backward(dy, cache, dy_skip=None):
    if dy_skip is not None:
        dy = dy + dy_skip
    ds, dgamma, dbeta = layernorm_backward(dy, cache.norm)
    return dropout_backward(ds, cache.mask), ds, dgamma, dbeta
