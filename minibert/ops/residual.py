"""The residual connection of BERT's post-LN layer: LayerNorm(dropout(sublayer output) + input)."""
from __future__ import annotations

from typing import NamedTuple

from .common import check_bias
from .dropout import dropout_backward, dropout_forward
from .layernorm import LayerNormCache, layernorm_backward, layernorm_forward


class ResidualCache(NamedTuple):
    """What the backward needs: dropout's mask (None where nothing was dropped) and LayerNorm's cache."""
    mask: object
    norm: LayerNormCache


def dropout_add_layernorm_forward(a, x, gamma, beta, eps, p, rng, train, bias=None):
    """y = LayerNorm(dropout(a) + x): a sublayer's output a, dropped out, added to the residual
    stream x that went into the sublayer, and the sum normalised.

    a, x: (..., H); gamma, beta: (H,); eps, and dropout's p, rng, train as in ``layernorm_forward``
    and ``dropout_forward``  ->  y: (..., H); cache ``ResidualCache``.  Three steps, and the fast
    sets of ops make them in one pass over the rows.

    ``bias`` (H,) or None: a is the product of the sublayer's last linear layer, made without its
    bias (``linear_forward(x, W, None)``), and the bias is added here first, as the kernels read
    a.  Its gradient is da summed over the rows, which that linear layer's backward makes.  In
    mixed precision a is the float16 product and the sum float32.
    """
    check_bias(a, bias, "dropout_add_layernorm_forward")
    if bias is not None:
        a = a + bias
    d, mask = dropout_forward(a, p, rng, train)
    y, norm = layernorm_forward(d + x, gamma, beta, eps)
    return y, ResidualCache(mask, norm)


def dropout_add_layernorm_backward(dy, cache, dy_skip=None):
    """dy: (..., H)  ->  da, dx: (..., H), dgamma, dbeta: (H,).

    The sum d + x passes its gradient ds to both of its terms unchanged: dx = ds, and da is ds
    through dropout's mask.  ``dy_skip``: None, or a second gradient of the output y, added to dy
    first: in an encoder y feeds the next sublayer and, around it, the next residual sum, and the
    gradient of y is the sum of the two.
    """
    if dy_skip is not None:
        dy = dy + dy_skip
    ds, dgamma, dbeta = layernorm_backward(dy, cache.norm)
    return dropout_backward(ds, cache.mask), ds, dgamma, dbeta
