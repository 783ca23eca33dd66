"""Softmax cross-entropy's usual mistakes: loss = -mean over the labelled rows of log softmax(logits)[row, label];
dlogits = dloss * (softmax - onehot) / n_valid on the labelled rows, 0 on the ignored ones."""
from __future__ import annotations

import numpy as np

from .table import Table


def _log_softmax(logits):
    z = logits - logits.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def _forward(log_softmax=_log_softmax, divide_by="n_valid", ignored=lambda ignore_index: ignore_index,
             keep_logits=False):
    """softmax_cross_entropy_forward, or one of its usual mistakes.

    divide_by: "n_valid" (right), "N" (every row) or "1" (the sum); ignored:
    the label value taken to mean "ignored" given the ignore_index argument.
    """
    def softmax_cross_entropy_forward(logits, labels, ignore_index=-100):
        N = logits.shape[0]
        valid = labels != ignored(ignore_index)
        n_valid = max(int(valid.sum()), 1)
        safe = np.where(valid, labels, 0)
        logp = log_softmax(logits)
        total = -(logp[np.arange(N), safe] * valid).sum()
        loss = total / {"n_valid": n_valid, "N": N, "1": 1}[divide_by]
        return loss, ((logits if keep_logits else logp), safe, valid, n_valid)
    return softmax_cross_entropy_forward


def _backward(probs=np.exp, mask_rows=True, times_dloss=True, divide=lambda n_valid, N: n_valid):
    """softmax_cross_entropy_backward, or one of its usual mistakes; ``probs(cached)``: the softmax
    from what the forward pass cached; ``divide(n_valid, N)``: what the gradient is divided by."""
    def softmax_cross_entropy_backward(dloss, cache):
        cached, safe, valid, n_valid = cache
        N = len(safe)
        d = probs(cached)
        d[np.arange(N), safe] -= 1.0
        scale = (dloss if times_dloss else 1.0) / divide(n_valid, N)
        return d * ((valid if mask_rows else np.ones(N)) * scale)[:, None]
    return softmax_cross_entropy_backward


def _softmax_of_logits(logits):
    e = np.exp(logits)
    return e / e.sum(axis=1, keepdims=True)


TABLE = Table("cross_entropy", softmax_cross_entropy_forward=_forward(), softmax_cross_entropy_backward=_backward())
case = TABLE.case

# ---- the loss
case("mean over all rows", "average over the labelled rows only: divide by the number of labels that are not "
                           "ignore_index, not by N", softmax_cross_entropy_forward=_forward(divide_by="N"))
case("sum over the rows", "the loss is the mean over the labelled rows, not the sum",
     softmax_cross_entropy_forward=_forward(divide_by="1"))
UNSTABLE = case("log of softmax", "compute log-softmax as z - log(sum(exp(z))) with z = logits - row max; "
                                  "log(softmax) underflows to log(0)",
                softmax_cross_entropy_forward=_forward(lambda a: np.log(np.exp(a) / np.exp(a).sum(1, keepdims=True))))
CONSTANT_IGNORE = case("the constant -100 instead of ignore_index",
                       "compare the labels with the ignore_index argument (here {ignore}), not with the constant "
                       "-100; then replace the ignored labels by 0 before indexing",
                       softmax_cross_entropy_forward=_forward(ignored=lambda ignore_index: -100))

# ---- the gradient
IGNORED_ROWS = case("gradient on ignored rows", "ignored rows must get zero gradient: multiply each row of the "
                                                "gradient by its 0/1 'valid' mask",
                    softmax_cross_entropy_backward=_backward(mask_rows=False))
case("dloss left out", "multiply the gradient by dloss", softmax_cross_entropy_backward=_backward(times_dloss=False))
case("backward divided by N", "the gradient divides by n_valid, the number of labelled rows, not by N: it is the "
                              "gradient of the mean over the labelled rows",
     softmax_cross_entropy_backward=_backward(divide=lambda n_valid, N: N))
case("backward without 1/n_valid", "the 1/n_valid of the mean is missing: dlogits = dloss * (softmax - onehot) / "
                                   "n_valid on the labelled rows",
     softmax_cross_entropy_backward=_backward(divide=lambda n_valid, N: 1))
case("backward divided by n_valid twice", "divide by n_valid once: the gradient of the mean carries 1/n_valid a "
                                          "single time",
     softmax_cross_entropy_backward=_backward(divide=lambda n_valid, N: n_valid ** 2))
UNSTABLE_BACKWARD = case("backward recomputes exp(logits)",
                         "the backward pass must be stable too: take softmax = exp(log p) from the log-softmax of the "
                         "forward pass, or subtract the row maximum again; exp(logits) overflows",
                         softmax_cross_entropy_forward=_forward(keep_logits=True),
                         softmax_cross_entropy_backward=_backward(probs=_softmax_of_logits))
