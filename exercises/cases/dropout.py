"""Dropout's usual mistakes, alone and on the attention weights.

Inverted dropout: in training each entry is kept with probability 1 - p and
scaled by 1/(1 - p), so that E[out] = x; at evaluation it is the identity.
A student's random output cannot be matched value for value, so the checker
recognises most of these by what it measures (the scale of the kept entries,
the share dropped) and gives the hint of the case it names.
"""
from __future__ import annotations

import math

import numpy as np

from .attention import bias_of, softmax
from .table import Table


def _dropout(scale="inverted", eval_scale=False, fresh_backward=False, keep_prob_p=False, eval_drops=False,
             fixed_seed=False, fixed_p=None, per_feature=False, backward="mask", keep_below=False,
             boolean_cache=False, binomial=False):
    """(dropout_forward, dropout_backward) with one usual mistake, or written another right way.

    scale: the factor of a kept entry in training: "inverted" (1/(1-p)), "none",
    "times_keep" ((1-p)), "over_p" (1/p); eval_scale: (1-p) at evaluation;
    backward: "mask" (right), "dout" (the mask left out), "keep" (0/1, without its scale).
    """
    def dropout_forward(x, p, rng, *, train):
        if (not train and not eval_drops) or p == 0.0:
            return (x * (1.0 - p) if eval_scale else x), None
        p = p if fixed_p is None else fixed_p
        rng = np.random.default_rng(0) if fixed_seed else rng
        shape = x.shape[-1:] if per_feature else x.shape
        if binomial:
            keep = rng.binomial(1, 1.0 - p, size=shape).astype(bool)
        else:
            u = rng.random(shape)
            keep = u < 1.0 - p if keep_below else u >= p
        keep = ~keep if keep_prob_p else keep
        factor = {"inverted": 1.0 / (1.0 - p), "none": 1.0, "times_keep": 1.0 - p, "over_p": 1.0 / p}[scale]
        if boolean_cache:
            return x * keep * factor, (keep, factor)
        mask = np.broadcast_to(keep * factor, x.shape)
        if fresh_backward:
            return x * mask, (rng, p, x.shape, factor)
        return x * mask, mask

    def dropout_backward(dout, cache):
        if cache is None:
            return dout
        if boolean_cache:
            keep, factor = cache
            return dout * keep * factor
        if fresh_backward:      # a new draw: another mask than the forward's
            rng, p, shape, factor = cache
            return dout * (rng.random(shape) >= p) * factor
        return {"mask": dout * cache, "dout": dout, "keep": dout * (cache > 0)}[backward]
    return dropout_forward, dropout_backward


def _attention(dropout, on_output=False, dv_undropped=False, no_mask_backward=False, softmax_on_dropped=False,
               unscaled_backward=False, inline=False):
    """(attention_dropout_forward, attention_dropout_backward) on the pair ``dropout``, with one usual mistake,
    or (inline) with the mask written out in place, as 0/1 times its scale."""
    dropout_forward, dropout_backward = dropout

    def attention_dropout_forward(q, k, v, attention_mask, p, rng, *, train):
        scale = 1.0 / math.sqrt(q.shape[-1])
        probs = softmax((q @ k.swapaxes(-1, -2)) * scale + bias_of(attention_mask)[:, None, None, :])
        if on_output:
            out, mask = dropout_forward(probs @ v, p, rng, train=train)
            return out, (q, k, v, probs, probs, mask, scale)
        if inline:
            keep = rng.random(probs.shape) >= p if train and p > 0 else np.ones(probs.shape, dtype=bool)
            mask = keep * (1.0 / (1.0 - p) if train else 1.0)
            return (probs * mask) @ v, (q, k, v, probs, probs * mask, mask, scale)
        dropped, mask = dropout_forward(probs, p, rng, train=train)
        return dropped @ v, (q, k, v, probs, dropped, mask, scale)

    def attention_dropout_backward(dout, cache):
        q, k, v, probs, dropped, mask, scale = cache
        if on_output:
            dout = dropout_backward(dout, mask)
        dv = (probs if dv_undropped else dropped).swapaxes(-1, -2) @ dout
        dprobs = dout @ v.swapaxes(-1, -2)
        if unscaled_backward and mask is not None:
            dprobs = dprobs * (mask > 0)
        elif not (no_mask_backward or on_output):
            dprobs = dropout_backward(dprobs, mask)
        w = dropped if softmax_on_dropped else probs
        dscores = w * (dprobs - (dprobs * w).sum(axis=-1, keepdims=True)) * scale
        return dscores @ k, dscores.swapaxes(-1, -2) @ q, dv
    return attention_dropout_forward, attention_dropout_backward


def _functions(attention=None, **dropout_flags):
    """The four functions of the exercise: a dropout pair and the attention built on it."""
    pair = _dropout(**dropout_flags)
    forward, backward = _attention(pair, **(attention or {}))
    return dict(dropout_forward=pair[0], dropout_backward=pair[1],
                attention_dropout_forward=forward, attention_dropout_backward=backward)


TABLE = Table("dropout", **_functions())


def case(name, hint, attention=None, **dropout_flags):
    """A case of dropout alone (its two functions), or of the attention functions alone (on the right dropout):
    a check of the attention weights then recognises only the mistakes made there."""
    functions = _functions(attention, **dropout_flags)
    mine = ("attention_dropout_forward", "attention_dropout_backward") if attention else ("dropout_forward",
                                                                                          "dropout_backward")
    return TABLE.case(name, hint, **{f: functions[f] for f in mine})


# ---- dropout alone (the hints say "entries"; for the attention weights, "weights")
NOT_SCALED = case("scaled at evaluation instead of training",
                  "the kept {what} are not scaled: inverted dropout multiplies them by 1/(1 - p) at TRAINING time, so "
                  "that E[out] = x and evaluation is the identity (no scaling at eval)", scale="none", eval_scale=True)
TIMES_KEEP = case("scaled by (1 - p)", "the kept {what} are scaled by (1 - p); the scale is 1/(1 - p), so that "
                                       "E[out] = (1 - p) * x / (1 - p) = x", scale="times_keep")
OVER_P = case("scaled by 1/p", "the kept {what} are scaled by 1/p: p is the probability of DROPPING, so keep with "
                               "probability 1 - p and scale by 1/(1 - p)", scale="over_p")
PER_FEATURE = case("one draw per feature", "draw one number per ENTRY of x, rng.random(x.shape), not one per row or "
                                           "per feature: a mask broadcast over a whole axis drops whole rows or "
                                           "columns at once", per_feature=True)
KEEPS_P = case("drops with probability 1 - p", "p is the probability of DROPPING (BERT's 0.1 drops 10%): {share:.2f} "
                                               "of the {what} were dropped with p = {p}; keep an entry where "
                                               "rng.random() >= p", keep_prob_p=True)
FIXED_P = case("p fixed at 0.1", "use the p argument, not a fixed 0.1", fixed_p=0.1)
FIXED_SEED = case("a generator with a fixed seed", "draw every random number from the rng argument (not np.random.*, "
                                                   "not a generator of your own with a fixed seed)", fixed_seed=True)
EVAL_SCALED = case("scaled by (1 - p) at evaluation", "at evaluation (train=False) dropout is the identity: inverted "
                                                      "dropout did its scaling at training time, so do not multiply "
                                                      "by (1 - p) here", eval_scale=True)
EVAL_DROPS = case("drops at evaluation too", "train=False: nothing is dropped at evaluation, out = x", eval_drops=True)
FRESH_MASK = case("a new mask in the backward pass", "dx drops other entries than the forward pass did: the backward "
                                                     "pass must use the forward's mask (keep it in the cache), not "
                                                     "draw a new one", fresh_backward=True)
case("backward returns dout", "dropout's backward multiplies dout by the forward's mask: dx = dout * mask",
     backward="dout")
case("backward mask without its scale", "the mask carries the scale: dx = dout * mask with mask 0 or 1/(1 - p), as in "
                                        "the forward pass", backward="keep")

# ---- on the attention weights
ON_OUTPUT = case("dropout on the attention output", "dropout goes on the attention weights P (B, A, T, T), between the "
                                                    "softmax and the product with v: out = dropout(P) v. Dropping "
                                                    "entries of the output P v (or of v) is not the same",
                 attention=dict(on_output=True))
case("attention backward without the mask", "multiply dPd = dout v^T by the forward's dropout mask (kept in the cache) "
                                            "before the softmax backward: out = dropout(P) v, so the gradient reaches "
                                            "P only through the kept weights", attention=dict(no_mask_backward=True))
case("attention backward mask without its scale", "the mask in the backward pass is the forward's, with its scale: "
                                                  "dP = dPd * mask, mask = keep / (1 - p)",
     attention=dict(unscaled_backward=True))
case("softmax backward through the dropped weights", "the softmax backward uses P, the softmax's own output before "
                                                     "dropout: dS = P * (dP - sum_keys(dP * P))",
     attention=dict(softmax_on_dropped=True))
case("attention dv from the weights before dropout", "dv = dropout(P)^T dout: v was multiplied by the dropped "
                                                     "weights, so dv uses them, not P",
     attention=dict(dv_undropped=True))

# ---- right answers written otherwise
for name, flags in (("keep where u < 1 - p", dict(keep_below=True)),
                    ("0/1 keep and the scale in the cache", dict(boolean_cache=True)),
                    ("the mask from rng.binomial", dict(binomial=True)),
                    ("attention with the dropout written inline", dict(attention=dict(inline=True)))):
    TABLE.variant(name, **_functions(**flags))
