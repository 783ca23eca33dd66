"""Elementwise activations (GELU, tanh) and the softmax."""
from __future__ import annotations

from typing import NamedTuple

from ..backend import erf_fn
from ..constants import GELU_TANH_C, INV_SQRT_2, INV_SQRT_2PI, SQRT_2_OVER_PI
from .common import check_bias, get_array_module
from .linear import to_half

GELU_FORMS = ("none", "tanh")


class GeluCache(NamedTuple):
    """The input (with the bias added, if one was), and Phi(x) (exact form) or tanh(u) (tanh form);
    the other is None."""
    x: object
    cdf: object
    t: object


def gelu_forward(x, approximate="none", bias=None, half_out=False):
    """GELU(x) = x * Phi(x), Phi the standard normal CDF.

    approximate="none": exact, Phi(x) = (1 + erf(x / sqrt 2)) / 2
        (HF ``hidden_act="gelu"``).
    approximate="tanh": Phi(x) ~ (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2,
        the form google-research/bert used (HF ``"gelu_new"``).
    x: any shape -> same shape; cache ``GeluCache``

    ``bias`` (the last axis's size, or None): GELU(x + bias), the bias of the linear layer
    before, which then makes its product alone (``linear_forward(x, W, None)``): a kernel
    adds it as it reads x.  Its gradient is the sum of dx over the rows, which that linear
    layer's backward makes.  In mixed precision x is the float16 product and the sum is
    float32.  ``half_out``: y rounded to float16, the operand of the next product (mixed
    precision).
    """
    xp = get_array_module(x)
    check_bias(x, bias, "gelu_forward")
    if bias is not None:
        x = x + bias
    if approximate == "none":
        cdf = 0.5 * (1.0 + erf_fn(xp)(x * INV_SQRT_2))
        y, cache = x * cdf, GeluCache(x, cdf, None)
    elif approximate == "tanh":
        t = xp.tanh(SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x))
        y, cache = 0.5 * x * (1.0 + t), GeluCache(x, None, t)
    else:
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return (to_half(y) if half_out else y), cache


def gelu_backward(dy, cache):
    """d/dx [x Phi(x)] = Phi(x) + x phi(x), phi the normal density.

    For the tanh form, with u = sqrt(2/pi) (x + c x^3) and t = tanh u:
        d/dx = (1 + t) / 2 + x (1 - t^2) sqrt(2/pi) (1 + 3 c x^2) / 2

    dy may come in float16 (mixed precision's product): it widens exactly in the product.
    """
    x, cdf, t = cache
    xp = get_array_module(x)
    if t is None:
        pdf = INV_SQRT_2PI * xp.exp(-0.5 * x * x)
        return dy * (cdf + x * pdf)
    dudx = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_C * x * x)
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dudx)


def tanh_forward(x, bias=None):
    """y = tanh(x); used by the pooler.  x: any shape; the cache is y itself.  ``bias``: tanh(x + bias),
    the bias of the linear layer before, as ``gelu_forward`` takes it."""
    xp = get_array_module(x)
    check_bias(x, bias, "tanh_forward")
    y = xp.tanh(x if bias is None else x + bias)
    return y, y


def tanh_backward(dy, cache):
    """dtanh/dx = 1 - tanh^2.  dy may come in float16 (mixed precision's product): it widens exactly
    in the product."""
    y = cache
    return dy * (1.0 - y * y)


def softmax_forward(x, axis=-1):
    """Numerically stable softmax along ``axis``: x any shape -> p same shape; cache (p, axis).

    Subtracting the row maximum leaves the result unchanged (it cancels
    between numerator and denominator) and keeps exp() from overflowing.
    """
    xp = get_array_module(x)
    z = x - x.max(axis=axis, keepdims=True)
    e = xp.exp(z)
    p = e / e.sum(axis=axis, keepdims=True)
    return p, (p, axis)


def softmax_backward(dp, cache):
    """dx_i = p_i (dp_i - sum_j dp_j p_j): the Jacobian diag(p) - p p^T applied to dp."""
    p, axis = cache
    return p * (dp - (dp * p).sum(axis=axis, keepdims=True))
