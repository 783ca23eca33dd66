"""The learning-rate schedule's and gradient clipping's usual mistakes.

The rate at optimiser step t (0 for the first update), peak eta, warm-up w, S steps in all:
eta * t / w while t < w, then eta * max(0, (S - t) / max(1, S - w)), so 0 at step 0 (with a
warm-up) and at step S and after.  Clipping: the global norm n = sqrt(sum of every entry's
square, over all the arrays); every array times max_norm / (n + 1e-6) when that factor is
below 1, else unchanged; the norm returned is n, measured before clipping.
"""
from __future__ import annotations

import math

import numpy as np

from .table import Table

CLIP_EPS = 1e-6      # minibert.optim.clip_grad_norm's: the factor is max_norm / (norm + 1e-6)


def _rate(warmup="right", decay="right", floor=0.0, clamp=True, times_peak=True, end_shift=0, room=True):
    """learning_rate, or one of its usual mistakes.

    warmup: "right" (t / w), "from_one" ((t + 1) / w), "floor_div" (t // w), "le" (t <= w tested, 0/0 at w=0);
    decay: "right" ((S - t) / (S - w)) or "whole_run" (1 - t / S, google-research/bert's);
    floor: the share of the peak the decay ends at; clamp=False: negative after S;
    end_shift=1: the rate reaches 0 at S - 1 instead of S; room=False: divided by S - w itself (0 when w = S).
    """
    def learning_rate(step, *, peak_lr, warmup_steps, total_steps):
        in_warmup = step <= warmup_steps if warmup == "le" else step < warmup_steps
        if in_warmup:
            if warmup == "from_one":
                frac = (step + 1) / warmup_steps
            elif warmup == "floor_div":
                frac = step // warmup_steps
            elif warmup == "le":
                frac = step / warmup_steps
            else:
                frac = step / max(1, warmup_steps)
        elif decay == "whole_run":
            frac = 1.0 - step / total_steps
        else:
            end = total_steps - end_shift
            frac = (end - step) / (max(1, end - warmup_steps) if room else end - warmup_steps)
        if not in_warmup and floor:
            frac = floor + (1.0 - floor) * frac
        if clamp and not in_warmup:
            frac = max(floor, frac)
        return peak_lr * frac if times_peak else frac
    return learning_rate


def _global_norm(grads):
    return math.sqrt(sum(float(np.sum(g * g)) for g in grads))


def _clip(norm_of=_global_norm, per_tensor=False, scale="right", returned="before", elementwise=False):
    """clip_by_global_norm, or one of its usual mistakes.

    norm_of(grads): the norm the function measures; per_tensor: each array clipped by its own norm;
    scale: "right" (factor max_norm / (norm + eps) when below 1), "always" (applied above 1 too),
    "no_eps" (max_norm / norm when norm > max_norm), "strictly_above" (max_norm / (norm + eps), but only
    when norm > max_norm); returned: "before" or "after" (the norm of the clipped arrays);
    elementwise: every entry clipped to [-max_norm, max_norm] (clipping by value).
    """
    def factor(norm, max_norm):
        if scale == "always":
            return max_norm / (norm + CLIP_EPS)
        if scale == "no_eps":
            return max_norm / norm if norm > max_norm else 1.0
        if scale == "strictly_above":
            return max_norm / (norm + CLIP_EPS) if norm > max_norm else 1.0
        return min(1.0, max_norm / (norm + CLIP_EPS))

    def clip_by_global_norm(grads, max_norm):
        norm = norm_of(grads)
        if elementwise:
            clipped = [np.clip(g, -max_norm, max_norm) for g in grads]
        elif per_tensor:
            clipped = [g * factor(_global_norm([g]), max_norm) for g in grads]
        else:
            coef = factor(norm, max_norm)
            clipped = [g * coef for g in grads]
        return clipped, (_global_norm(clipped) if returned == "after" else norm)
    return clip_by_global_norm


TABLE = Table("schedule", learning_rate=_rate(), clip_by_global_norm=_clip())
case = TABLE.case

# ---- the learning rate
case("warm-up counted from 1", "step 0 is the first update and its rate is 0: the warm-up is peak_lr * step / "
                               "warmup_steps, which reaches the peak at step warmup_steps, not one step earlier",
     learning_rate=_rate(warmup="from_one"))
case("integer division in the warm-up", "step // warmup_steps is 0 during the whole warm-up: divide with /",
     learning_rate=_rate(warmup="floor_div"))
case("decay over the whole run", "that is google-research/bert's decay over the whole run, 1 - step / "
                                 "total_steps; this schedule decays from the peak at step warmup_steps to 0 at "
                                 "total_steps: (total_steps - step) / (total_steps - warmup_steps)",
     learning_rate=_rate(decay="whole_run"))
case("decay to a floor", "the rate decays all the way to 0 at total_steps, not to a floor above 0",
     learning_rate=_rate(floor=0.1))
case("negative after total_steps", "after total_steps the rate stays 0: max(0, ...) keeps (total_steps - step) "
                                   "from making it negative", learning_rate=_rate(clamp=False))
case("0 at the last update", "the rate reaches 0 at step total_steps; the last update, step total_steps - 1, "
                             "still has peak_lr / (total_steps - warmup_steps)", learning_rate=_rate(end_shift=1))
case("the multiplier, not the rate", "return the rate itself: the schedule's factor times peak_lr",
     learning_rate=_rate(times_peak=False))
ZERO_WARMUP = case("0/0 without warm-up", "with warmup_steps=0 there is no warm-up: step 0 already has the peak rate. Test "
                            "step < warmup_steps (not <=), so that nothing is divided by warmup_steps = 0",
     learning_rate=_rate(warmup="le"))
NO_DECAY = case("0/0 when the warm-up is the whole run", "with warmup_steps == total_steps there is nothing left to "
                                                         "decay: divide by max(1, total_steps - warmup_steps), and "
                                                         "the rate is 0 from total_steps on",
                learning_rate=_rate(room=False))

# ---- clipping
# (first: they move a result by about 1e-7 of itself, which only a check's own matching tells apart)
case("scaled only when norm > max_norm", "apply the factor max_norm / (norm + 1e-6) whenever it is below 1: a "
                                         "norm equal to max_norm is scaled too (by a hair)",
     clip_by_global_norm=_clip(scale="strictly_above"))
case("no eps", "the factor is max_norm / (norm + 1e-6), as minibert's clip_grad_norm (and PyTorch's) computes it",
     clip_by_global_norm=_clip(scale="no_eps"))
case("each array clipped alone", "clip by the GLOBAL norm, all the arrays together: one factor for every array, "
                                 "so the direction of the whole gradient is kept",
     clip_by_global_norm=_clip(per_tensor=True))
case("squared norm", "the norm is the square root of the sum of squares: sqrt(sum over every array of "
                     "(g ** 2).sum())", clip_by_global_norm=_clip(norm_of=lambda gs: _global_norm(gs) ** 2))
case("sum of the arrays' norms", "the global norm is sqrt of the sum of ALL the squares, not the sum of each "
                                 "array's norm", clip_by_global_norm=_clip(norm_of=lambda gs: sum(
                                     _global_norm([g]) for g in gs)))
case("scaled below max_norm too", "a gradient whose norm is below max_norm is left as it is: the factor "
                                  "max_norm / (norm + 1e-6) is applied only when it is below 1",
     clip_by_global_norm=_clip(scale="always"))
case("norm after clipping", "return the norm measured BEFORE clipping (what a training log shows as the "
                            "gradient norm)", clip_by_global_norm=_clip(returned="after"))
case("clipping by value", "that clips each entry to [-max_norm, max_norm]; scale every array by one factor "
                          "instead, so that the global norm becomes max_norm",
     clip_by_global_norm=_clip(elementwise=True))


def _interp_rate(step, *, peak_lr, warmup_steps, total_steps):
    """The schedule as a piecewise-linear interpolation, written without a division by warmup_steps."""
    if step < warmup_steps:
        return peak_lr * step / warmup_steps
    if step >= total_steps:
        return 0.0
    return peak_lr * (total_steps - step) / (total_steps - warmup_steps)


def _flat_clip(grads, max_norm):
    """Clipping on one flat vector, the factor capped at 1 with min, and scaled in place."""
    norm = float(np.linalg.norm(np.concatenate([g.ravel() for g in grads])))
    coef = min(1.0, max_norm / (norm + CLIP_EPS))
    for g in grads:
        g *= coef
    return grads, norm


TABLE.variant("the rate with an early return after total_steps", learning_rate=_interp_rate)
TABLE.variant("one flat vector, scaled in place", clip_by_global_norm=_flat_clip)
