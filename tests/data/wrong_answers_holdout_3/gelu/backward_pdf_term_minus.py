# slip: the product rule's second term has its sign turned: dx = dy * (Phi(x) - x * phi(x))
# names it: sign & x * phi | sign & product rule | - x * phi | minus & x * phi | sign & second term
"""Exercise: the GELU activation, exactly.

BERT's feed-forward layers use GELU, not ReLU:

    GELU(x) = x * Phi(x),     Phi(x) = (1 + erf(x / sqrt(2))) / 2

where Phi is the cumulative distribution function of the standard normal.
(google-research/bert's code computed this exact form, with erf, when the
pre-trained checkpoints were published in October 2018, and a tanh
approximation from February 2019 on; Hugging Face's hidden_act="gelu" is the
exact form, and that is the one asked for here.)

Two rules for every function here: work in float64 (the checker passes float64
arrays and wants float64 results back), and change no argument in place (x,
dy, the cache): compute new arrays and return them.  The caller still uses its
arrays after the call: a residual connection sends the same x, and the same
gradient, into two branches.

Check your work with:   python -m exercises check gelu
"""
import math

import numpy as np
from scipy.special import erf  # vectorised erf for arrays


def gelu_forward(x):
    """Forward pass.

    Args:
        x: an array of any shape

    Returns:
        y: same shape, GELU(x)
        cache: what the backward pass needs
    """
    Phi = 0.5 * (1.0 + erf(x / math.sqrt(2.0)))
    y = x * Phi
    cache = (x, Phi)
    return y, cache


def gelu_backward(dy, cache):
    """Backward pass.

    Args:
        dy: same shape as x

    Returns:
        dx: same shape as x

    Derivation: the product rule on x * Phi(x), with Phi' = phi, the standard
    normal density phi(x) = exp(-x^2 / 2) / sqrt(2 pi):

        d GELU / dx = Phi(x) + x * phi(x)
    """
    x, Phi = cache
    phi = np.exp(-x ** 2 / 2.0) / math.sqrt(2.0 * math.pi)
    dx = dy * (Phi - x * phi)           # product rule (phi' brings a minus)
    return dx
