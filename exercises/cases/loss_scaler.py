"""Dynamic loss scaling's usual mistakes (``minibert.optim.LossScaler``, PyTorch's ``GradScaler``).

After a backward pass of ``scale * loss`` every gradient is ``scale`` times too large: divide it
by ``scale`` in float32 and look for inf or NaN.  Then the rule: not finite -> scale *=
backoff_factor, good_steps = 0, the step is skipped; finite -> good_steps += 1, and when it
reaches growth_interval, scale *= growth_factor and good_steps = 0; the step is taken.
"""
from __future__ import annotations

import numpy as np

from .table import Table


def _unscale(multiply=False, inf_only=False, last_only=False, inverted=False, half=False):
    """unscale_and_check, or one of its usual mistakes."""
    def unscale_and_check(grads, scale):
        if half:                  # float16 holds neither 2^16 nor the small unscaled gradients
            out = [(g.astype(np.float16) / np.float16(scale)).astype(np.float32) for g in grads]
        else:
            out = [g * scale if multiply else g * (1.0 / scale) for g in grads]
        bad = [bool(np.isinf(g).any()) if inf_only else not bool(np.isfinite(g).all()) for g in out]
        found_inf = bad[-1] if last_only else any(bad)
        return out, (not found_inf) if inverted else found_inf
    return unscale_and_check


def _update(swapped=False, reset_on_overflow=True, reset_on_growth=True, every_step=False, late=False,
            take_on_overflow=False, fixed_factors=False):
    """update_scale, or one of its usual mistakes."""
    def update_scale(scale, found_inf, good_steps, *, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        if fixed_factors:
            growth_factor, backoff_factor = 2.0, 0.5
        if swapped:
            growth_factor, backoff_factor = backoff_factor, growth_factor
        if found_inf:
            return scale * backoff_factor, 0 if reset_on_overflow else good_steps, take_on_overflow
        good_steps += 1
        if every_step or (good_steps > growth_interval if late else good_steps >= growth_interval):
            scale *= growth_factor
            if reset_on_growth:
                good_steps = 0
        return scale, good_steps, True
    return update_scale


TABLE = Table("loss_scaler", unscale_and_check=_unscale(), update_scale=_update())
case = TABLE.case

HYPER = ("use the growth_factor, backoff_factor and growth_interval arguments, not the default values written "
         "into the code")

# ---- unscaling and the overflow check
case("multiplied by the scale", "the gradients are scale times too large: divide them by scale (g / scale, or "
                                "g * (1.0 / scale)), do not multiply", unscale_and_check=_unscale(multiply=True))
case("unscaled in float16", "unscale in float32, the gradients' own dtype: float16 cannot even hold 2^16 (it becomes "
                            "inf), and the small unscaled gradients would underflow to zero again",
     unscale_and_check=_unscale(half=True))
case("found_inf inverted", "found_inf is True when something is NOT finite: return not all-finite "
                           "(LossScaler.update takes the opposite, finite)", unscale_and_check=_unscale(inverted=True))
case("found_inf from the last tensor only", "found_inf must be True if ANY tensor holds inf or NaN: a later finite "
                                            "tensor must not set it back to False (combine with `or`, or any())",
     unscale_and_check=_unscale(last_only=True))
case("inf found, NaN missed", "look for NaN too, not only inf (np.isinf misses NaN: use np.isfinite): inf - inf or "
                              "0 * inf in the backward pass gives NaN, and one NaN spoils AdamW's moments for good",
     unscale_and_check=_unscale(inf_only=True))

# ---- the update rule
case("grows on overflow", "on overflow the scale shrinks (scale * backoff_factor); after growth_interval finite "
                          "steps it grows (scale * growth_factor): the two factors are swapped",
     update_scale=_update(swapped=True))
case("step taken on overflow", "an overflowing step is skipped: return take_step=False, so that AdamW neither moves "
                               "the weights nor feeds the inf into its moments m and v",
     update_scale=_update(take_on_overflow=True))
case("counter kept on overflow", "an overflow breaks the run of good steps: set good_steps back to 0, or the scale "
                                 "grows again too soon after it", update_scale=_update(reset_on_overflow=False))
case("grows at every finite step", "grow only when good_steps reaches growth_interval: the scale must stay "
                                   "while the run of finite steps is shorter", update_scale=_update(every_step=True))
case("counter not reset on growth", "when the scale grows, set good_steps back to 0: the next growth needs another "
                                    "growth_interval finite steps", update_scale=_update(reset_on_growth=False))
case("grows one step late", "grow at the growth_interval-th finite step in a row (good_steps >= growth_interval "
                            "after counting this step), not one step later", update_scale=_update(late=True))
FIXED = case("factors written into the code", HYPER, update_scale=_update(fixed_factors=True))

TABLE.variant("divided in place, found by max and isnan", unscale_and_check=lambda grads, scale: _in_place(grads, scale))


def _in_place(grads, scale):
    """Right, written otherwise: the arrays divided in place, overflow found by np.isnan of the largest |g|."""
    found = False
    for g in grads:
        g /= scale
        top = np.abs(g).max() if g.size else 0.0
        found = found or bool(np.isnan(top) or np.isinf(top))
    return grads, found

RULE = ("not finite: scale * backoff_factor, good_steps = 0, take_step False; finite: good_steps + 1, and at "
        "growth_interval scale * growth_factor and good_steps = 0; take_step True")
