"""Solution: scaled dot-product attention with a padding mask."""
import math

import numpy as np


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention_forward(q, k, v, attention_mask):
    D = q.shape[-1]
    scale = 1.0 / math.sqrt(D)
    scores = (q @ k.swapaxes(-1, -2)) * scale                 # (B, A, T, T)
    bias = np.where(attention_mask == 1, 0.0, np.finfo(q.dtype).min)
    scores = scores + bias[:, None, None, :]                  # mask the keys, before the softmax
    probs = _softmax(scores)
    out = probs @ v
    cache = (q, k, v, probs, scale)
    return out, cache


def attention_backward(dout, cache):
    q, k, v, probs, scale = cache
    dv = probs.swapaxes(-1, -2) @ dout
    dprobs = dout @ v.swapaxes(-1, -2)
    dscores = probs * (dprobs - (dprobs * probs).sum(axis=-1, keepdims=True))
    dscores *= scale
    dq = dscores @ k
    dk = dscores.swapaxes(-1, -2) @ q
    return dq, dk, dv
