"""Inverted dropout."""
from __future__ import annotations


def dropout_forward(x, p, rng, train):
    """Zero each entry with probability p, scale the rest by 1/(1-p).

    Scaling at training time keeps E[out] = x, so nothing changes at
    inference.  ``rng(shape)`` must return uniform samples in [0, 1) of x's
    dtype (the model passes its own seeded generator).  With ``train=False``
    or p == 0 this is the identity.

    x: any shape  ->  out: same shape; cache: the mask (0 or 1/(1-p) per
    entry, x's dtype), or None where nothing was dropped.
    """
    if not train or p == 0.0:
        return x, None
    keep = rng(x.shape) >= p
    scale = x.dtype.type(1.0 / (1.0 - p))
    mask = keep * scale  # entries are 0 or 1/(1-p), in x's dtype
    return x * mask, mask


def dropout_backward(dout, cache):
    """The same mask again: dropped entries pass no gradient, kept ones are scaled alike."""
    mask = cache
    return dout if mask is None else dout * mask


def uniform(gen, shape, dtype):
    """``shape`` uniform numbers in [0, 1) of ``dtype`` from a NumPy generator: dropout's draws."""
    return gen.random(shape, dtype=dtype)
