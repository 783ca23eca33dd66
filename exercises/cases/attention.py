"""Attention's usual mistakes: out = softmax(q k^T / sqrt(D) + mask bias) v, the bias very negative
at the padded KEYS (the last axis of the scores), 0 at the real ones."""
from __future__ import annotations

import math

import numpy as np

from .table import Table


def softmax(s, axis=-1):
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def bias_of(mask, dtype=np.float64):
    """The additive mask: 0 at a real key, the most negative float at a padded one."""
    return np.where(mask == 1, 0.0, np.finfo(dtype).min)


def _keys(scores, mask):
    return scores + bias_of(mask)[:, None, None, :]


def _forward(scale_of=lambda q: 1.0 / math.sqrt(q.shape[-1]), masked=_keys, probs_of=softmax, dtype=None):
    """attention_forward with one piece changed: ``masked(scores, attention_mask)`` gives the
    masked scores, ``probs_of(scores)`` the weights; ``dtype``: the type the scores are computed in."""
    def attention_forward(q, k, v, attention_mask):
        scale = scale_of(q)
        scores = masked((q @ k.swapaxes(-1, -2)) * scale, attention_mask)
        if dtype is not None:
            scores = scores.astype(dtype)
        probs = probs_of(scores)
        return probs @ v, (q, k, v, probs, scale)
    return attention_forward


def _backward(sum_axis=-1, keepdims=True, scaled=True, masked_probs=True, dk_transposed=True, dk_as_dq=False,
              dq_masked=False, dv_transposed=True):
    """attention_backward, or one of its usual mistakes (each flag one piece)."""
    def attention_backward(dout, cache):
        q, k, v, probs, scale = cache
        if not masked_probs:            # the weights recomputed without the mask
            probs = softmax(q @ k.swapaxes(-1, -2) * scale)
        dv = (probs.swapaxes(-1, -2) if dv_transposed else probs) @ dout
        dprobs = dout @ v.swapaxes(-1, -2)
        dscores = probs * (dprobs - (dprobs * probs).sum(axis=sum_axis, keepdims=keepdims))
        dscores = dscores * scale if scaled else dscores
        dq = dscores @ k
        dk = dq if dk_as_dq else (dscores.swapaxes(-1, -2) if dk_transposed else dscores) @ q
        if dq_masked:                   # zero where a query is padding
            dq = dq * (probs.sum(-2)[..., None] > 0)
        return dq, dk, dv
    return attention_backward


def _with_mask(bias):
    """Masked scores with ``bias(mask)``, shaped (B, 1, 1, T) as it should be: a wrong VALUE."""
    return lambda s, m: s + bias(m)[:, None, None, :]


def _probs_float32(q, k, v, attention_mask):
    out, (q, k, v, probs, scale) = _forward()(q, k, v, attention_mask)
    probs = probs.astype(np.float32)                 # "to save memory"
    return probs @ v, (q, k, v, probs, scale)


def _mask_after_softmax(q, k, v, attention_mask):
    scale = 1.0 / math.sqrt(q.shape[-1])
    probs = softmax(q @ k.swapaxes(-1, -2) * scale) * attention_mask[:, None, None, :]
    return probs @ v, (q, k, v, probs, scale)


TABLE = Table("attention", attention_forward=_forward(), attention_backward=_backward())
case = TABLE.case

TURNED = ("the mask is turned around: it pushes padded keys UP against the real ones. The very NEGATIVE number goes "
          "to the padded keys (attention_mask == 0) and 0 to the real ones: bias = (1 - mask) * np.finfo(q.dtype).min "
          "(or * -10000)")
QUERY_AXIS = ("the softmax runs over the keys, the last axis of S (axis=-1): each query's weights sum to 1. Over "
              "axis -2 each key's weights sum to 1 over the queries")
NO_SCALE = "the backward pass of S = q k^T / sqrt(D) also divides by sqrt(D)"
NO_MASK = ("the backward pass must use the masked P of the forward pass (keep it in the cache): without the mask, "
           "padded keys get weight and gradient")
TRANSPOSE_DS = "dk = dS^T q / sqrt(D): transpose dS (swapaxes(-1, -2)), since S = q k^T holds k transposed"
SUM_AXIS = ("the softmax backward sums dP * P over the keys, the axis the softmax normalised (axis=-1, "
            "keepdims=True), not over the queries")
FLOAT32 = ("every attention weight is a float32 number: the scores or the probabilities are computed in float32 "
           "somewhere (astype(np.float32), dtype=np.float32). float32 rounds by about 1e-7, as much as the check's "
           "tolerance, so the gradient check sees only noise: keep float64")

# ---- the forward pass
case("mask applied after the softmax", "the mask is applied after the softmax: the kept weights no longer sum to 1. "
                                       "Add a very negative number to the scores of padded keys BEFORE the softmax",
     attention_forward=_mask_after_softmax)
case("no 1/sqrt(D) scale", "divide the scores by sqrt(D), the head size", attention_forward=_forward(lambda q: 1.0))
case("scaled by 1/D", "divide the scores by sqrt(D), not by D", attention_forward=_forward(lambda q: 1.0 / q.shape[-1]))
case("scaled by sqrt(H)", "divide by sqrt(D), the size of ONE head (q.shape[-1] = {D}), not by sqrt(H) of the whole "
                          "hidden state (A * D = {AD})",
     attention_forward=_forward(lambda q: 1.0 / math.sqrt(q.shape[1] * q.shape[-1])))
case("mask not applied", "the padding mask is not applied", attention_forward=_forward(masked=lambda s, m: s))
case("mask on queries", "the mask hides KEYS (the last axis of the scores): reshape it to (B, 1, 1, T)",
     attention_forward=_forward(masked=lambda s, m: s + bias_of(m)[:, None, :, None]))
case("the most positive number at padded keys", TURNED, attention_forward=_forward(masked=_with_mask(lambda m: -bias_of(m))))
case("positive number added at padded keys", TURNED,
     attention_forward=_forward(masked=_with_mask(lambda m: (1.0 - m) * 10000.0)))
case("the most negative number at the real keys", TURNED,
     attention_forward=_forward(masked=_with_mask(lambda m: m * np.finfo(np.float64).min)))
case("very negative number at the real keys", TURNED,
     attention_forward=_forward(masked=_with_mask(lambda m: m * -10000.0)))
case("0/1 mask added to the scores", "the 0/1 attention_mask is added to the scores as it is: turn it into a bias "
                                     "first, 0 for a real key and a very negative number for a padded one "
                                     "((1 - mask) * np.finfo(q.dtype).min)",
     attention_forward=_forward(masked=_with_mask(lambda m: m * 1.0)))
case("softmax over the queries", QUERY_AXIS, attention_forward=_forward(probs_of=lambda s: softmax(s, -2)))
case("softmax over the queries, mask -10000", QUERY_AXIS,
     attention_forward=_forward(masked=_with_mask(lambda m: (1.0 - m) * -10000.0), probs_of=lambda s: softmax(s, -2)))
MASK_INF = case("mask value -inf",
                "a sequence whose every key is padding gives NaN: with -inf as the mask value each of its scores is "
                "-inf, the row maximum is -inf, and -inf - (-inf) = NaN (notebook 03). Mask with a large finite "
                "negative number instead: np.finfo(q.dtype).min (or -10000, as google-research/bert does)",
                attention_forward=_forward(masked=_with_mask(lambda m: np.where(m == 1, 0.0, -np.inf))))
UNSTABLE = case("softmax without the row maximum", "subtract each row's maximum score before exp, as in the softmax "
                                                   "exercise: exp(1000) is inf",
                attention_forward=_forward(probs_of=lambda s: np.exp(s) / np.exp(s).sum(-1, keepdims=True)))
PROBS_FLOAT32 = case("probabilities kept in float32", FLOAT32, attention_forward=_probs_float32)
SCORES_FLOAT32 = case("scores computed in float32",
                      FLOAT32 + " (in float32, np.finfo(np.float64).min becomes -inf, hence the NaN)",
                      attention_forward=_forward(dtype=np.float32))
# ---- the backward pass
case("backward without the scale", NO_SCALE, attention_backward=_backward(scaled=False))
case("backward without the mask", NO_MASK, attention_backward=_backward(masked_probs=False))
case("dq masked", "the mask hides keys only: a padded query still has an output, so its dq is not zero; "
                  "do not mask dq", attention_backward=_backward(dq_masked=True))
case("softmax backward summed over the queries", SUM_AXIS, attention_backward=_backward(sum_axis=-2))
case("dk not transposed", TRANSPOSE_DS, attention_backward=_backward(dk_transposed=False))
case("dk = dq", TRANSPOSE_DS, attention_backward=_backward(dk_as_dq=True))
case("dv not transposed", "dv = P^T dout: transpose P (swapaxes(-1, -2)); out = P v sums over the keys",
     attention_backward=_backward(dv_transposed=False))
case("softmax backward sum without keepdims", "the softmax backward's sum over the keys lost its axis: pass "
                                              "keepdims=True, so that (dP * P).sum(-1, keepdims=True) broadcasts "
                                              "against dP", attention_backward=_backward(keepdims=False))

# ---- right answers written otherwise
TABLE.variant("additive mask of -10000 (google-research/bert)",
              attention_forward=_forward(masked=_with_mask(lambda m: (1.0 - m) * -10000.0)))
TABLE.variant("scores replaced at padded keys (masked_fill)",
              attention_forward=_forward(masked=lambda s, m: np.where(m[:, None, None, :] == 1, s,
                                                                      np.finfo(s.dtype).min)))
TABLE.variant("additive mask of -1e9", attention_forward=_forward(masked=_with_mask(lambda m: -1e9 * (1.0 - m))))
