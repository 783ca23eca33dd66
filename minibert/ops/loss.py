"""Softmax cross-entropy, the loss of both pre-training heads."""
from __future__ import annotations

from typing import NamedTuple

from ..constants import IGNORE_INDEX
from .common import get_array_module, require


class CrossEntropyCache(NamedTuple):
    """The logits and two numbers per row, from which log p is recomputed in the backward."""
    logits: object     # (N, C)
    row_max: object    # (N, 1) max of each row
    log_sum: object    # (N, 1) log sum exp(logits - row_max)
    safe: object       # (N,) the labels, 0 on ignored rows
    valid: object      # (N,) bool, False on ignored rows
    denom: object      # number of valid rows (at least 1): an int, or a 0-d array on the GPU


def check_cross_entropy(logits, labels) -> None:
    require(logits.ndim == 2 and tuple(labels.shape) == (logits.shape[0],),
            f"softmax_cross_entropy_forward: logits must be (N, C) and labels (N,), got "
            f"{tuple(logits.shape)} and {tuple(labels.shape)}")


def softmax_cross_entropy_forward(logits, labels, ignore_index=IGNORE_INDEX):
    """Mean negative log-likelihood over the rows whose label is not ``ignore_index``.

    logits: (N, C); labels: (N,) int  ->  loss (a 0-d array), ``CrossEntropyCache``.
    The log-softmax is computed stably: log p = (z - max) - log(sum(exp(z - max))).
    With no labelled row the loss is 0 (and so is its gradient).
    """
    check_cross_entropy(logits, labels)
    valid = labels != ignore_index
    n_valid = int(valid.sum())
    return mean_nll(logits, labels, valid, max(n_valid, 1))


def mean_nll(logits, labels, valid, denom):
    """The sum of -log p(label) over the ``valid`` rows divided by ``denom``, and the cache."""
    xp = get_array_module(logits)
    safe = xp.where(valid, labels, 0)
    row_max = logits.max(axis=-1, keepdims=True)
    z = logits - row_max
    log_sum = xp.log(xp.exp(z).sum(axis=-1, keepdims=True))
    picked = (xp.take_along_axis(z, safe[:, None], axis=-1) - log_sum)[:, 0]   # log p of each label
    loss = -(picked * valid).sum() / denom
    return loss, CrossEntropyCache(logits, row_max, log_sum, safe, valid, denom)


def softmax_cross_entropy_backward(dloss, cache):
    """dlogits = (softmax(logits) - onehot(label)) / n_valid, zero on ignored rows."""
    logits, row_max, log_sum, safe, valid, denom = cache
    xp = get_array_module(logits)
    dlogits = xp.exp((logits - row_max) - log_sum)      # the softmax, from its log
    dlogits[xp.arange(len(safe)), safe] -= 1.0
    dlogits *= (valid * (dloss / denom))[:, None].astype(logits.dtype)
    return dlogits


def mse_forward(pred, target):
    """Mean squared error, the loss of a regression head (STS-B's similarity score).

    pred: (N,); target: (N,)  ->  loss = mean((pred - target)^2) (a 0-d array), cache (the difference).
    """
    require(pred.ndim == 1 and tuple(target.shape) == tuple(pred.shape),
            f"mse_forward: pred and target must both be (N,), got {tuple(pred.shape)} and {tuple(target.shape)}")
    diff = pred - target.astype(pred.dtype)
    return (diff * diff).mean(), diff


def mse_backward(dloss, cache):
    """dpred = 2 (pred - target) / N."""
    diff = cache
    return diff * (2.0 * dloss / diff.shape[0])
