"""Solution: inverted dropout, on an activation and on the attention weights."""
import math

import numpy as np


def dropout_forward(x, p, rng, *, train):
    if not train or p == 0.0:
        return x, None                                   # the identity: nothing to undo later
    keep = rng.random(x.shape) >= p                      # each entry kept with probability 1 - p
    mask = keep / (1.0 - p)                              # 0 or 1/(1-p): E[x * mask] = x
    return x * mask, mask


def dropout_backward(dout, cache):
    mask = cache
    return dout if mask is None else dout * mask         # the same mask as the forward pass


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention_dropout_forward(q, k, v, attention_mask, p, rng, *, train):
    scale = 1.0 / math.sqrt(q.shape[-1])
    bias = np.where(attention_mask == 1, 0.0, np.finfo(q.dtype).min)[:, None, None, :]
    probs = _softmax((q @ k.swapaxes(-1, -2)) * scale + bias)
    dropped, mask = dropout_forward(probs, p, rng, train=train)
    out = dropped @ v
    cache = (q, k, v, probs, dropped, mask, scale)
    return out, cache


def attention_dropout_backward(dout, cache):
    q, k, v, probs, dropped, mask, scale = cache
    dv = dropped.swapaxes(-1, -2) @ dout
    dprobs = dropout_backward(dout @ v.swapaxes(-1, -2), mask)
    dscores = probs * (dprobs - (dprobs * probs).sum(axis=-1, keepdims=True)) * scale
    dq = dscores @ k
    dk = dscores.swapaxes(-1, -2) @ q
    return dq, dk, dv
