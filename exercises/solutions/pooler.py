"""Solution: BERT's pooler and its next-sentence-prediction head."""
import numpy as np


def pooler_forward(hidden, W, b):
    cls = hidden[:, 0]                                    # (B, H): the [CLS] position only
    pooled = np.tanh(cls @ W.T + b)
    return pooled, (hidden.shape, cls, W, pooled)


def pooler_backward(dpooled, cache):
    shape, cls, W, pooled = cache
    dz = dpooled * (1.0 - pooled ** 2)                    # tanh'(z) = 1 - tanh(z)^2
    dhidden = np.zeros(shape)
    dhidden[:, 0] = dz @ W                                # the other positions were not read
    return dhidden, dz.T @ cls, dz.sum(axis=0)


def nsp_head_forward(pooled, W, b):
    return pooled @ W.T + b, (pooled, W)                  # raw scores: the loss applies the softmax


def nsp_head_backward(dlogits, cache):
    pooled, W = cache
    return dlogits @ W, dlogits.T @ pooled, dlogits.sum(axis=0)
