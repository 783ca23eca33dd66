"""GELU's usual mistakes: GELU(x) = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2, phi(x) = exp(-x^2 / 2) / sqrt(2 pi)."""
from __future__ import annotations

import math

import numpy as np
from scipy.special import erf

from .table import Table


def _forward(value):
    """A gelu_forward computing ``value(x)``, with the right cache (x, Phi(x))."""
    def gelu_forward(x):
        return value(x), (x, 0.5 * (1.0 + erf(x / math.sqrt(2.0))))
    return gelu_forward


def _backward(local, times_dy=True):
    """A gelu_backward with ``local(x, Phi)`` as the derivative of GELU."""
    def gelu_backward(dy, cache):
        x, cdf = cache
        return dy * local(x, cdf) if times_dy else local(x, cdf)
    return gelu_backward


def _tanh_form(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _tanh_derivative(x, cdf):
    """d/dx of 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3): the approximation's derivative."""
    c = math.sqrt(2 / math.pi)
    t = np.tanh(c * (x + 0.044715 * x ** 3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x)


def _pdf(x):
    return np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


TABLE = Table("gelu", gelu_forward=_forward(lambda x: x * 0.5 * (1.0 + erf(x / math.sqrt(2.0)))),
              gelu_backward=_backward(lambda x, cdf: cdf + x * _pdf(x)))
case = TABLE.case

# ---- the forward pass
case("tanh approximation", "that is the tanh approximation; write the exact x * Phi(x) with "
                           "Phi(x) = (1 + erf(x / sqrt(2))) / 2", gelu_forward=_forward(_tanh_form))
case("ReLU", "that is ReLU; BERT uses GELU(x) = x * Phi(x)", gelu_forward=_forward(lambda x: np.maximum(x, 0)))
case("sigmoid approximation", "that is the sigmoid approximation x * sigmoid(1.702 x); write the exact x * Phi(x)",
     gelu_forward=_forward(lambda x: x / (1 + np.exp(-1.702 * x))))
case("erf(x)", "erf's argument is x / sqrt(2), not x", gelu_forward=_forward(lambda x: x * 0.5 * (1 + erf(x))))
case("erf(x / 2)", "erf's argument is x / sqrt(2), not x / 2: Phi(x) = (1 + erf(x / sqrt(2))) / 2",
     gelu_forward=_forward(lambda x: x * 0.5 * (1 + erf(x / 2))))

# ---- the backward pass
case("derivative without x phi(x)",
     "the product rule: d/dx [x Phi(x)] = Phi(x) + x phi(x); the x phi(x) term is missing",
     gelu_backward=_backward(lambda x, cdf: cdf))
case("density without 1/sqrt(2 pi)", "phi(x) = exp(-x^2 / 2) / sqrt(2 pi): the 1 / sqrt(2 pi) is missing",
     gelu_backward=_backward(lambda x, cdf: cdf + x * np.exp(-x * x / 2)))
case("dy left out", "multiply the local derivative by dy (the chain rule)",
     gelu_backward=_backward(lambda x, cdf: cdf + x * _pdf(x), times_dy=False))
case("density exp(-x^2)", "the density's exponent is -x^2 / 2, not -x^2: phi(x) = exp(-x^2 / 2) / sqrt(2 pi)",
     gelu_backward=_backward(lambda x, cdf: cdf + x * np.exp(-x * x) / math.sqrt(2 * math.pi)))
case("derivative of the tanh approximation",
     "that is the derivative of the tanh approximation; the exact GELU's derivative is Phi(x) + x phi(x), "
     "with phi(x) = exp(-x^2 / 2) / sqrt(2 pi)", gelu_backward=_backward(_tanh_derivative))
