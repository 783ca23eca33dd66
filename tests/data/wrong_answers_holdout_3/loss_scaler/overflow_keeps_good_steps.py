# slip: after an overflow the scale backs off but good_steps is returned unchanged instead of being reset to 0, so the scale grows again too early
# names it: reset & good_steps | good_steps & back to 0 | good_steps & after an overflow | backoff & good_steps & 0 | good_steps & not reset
"""Exercise: dynamic loss scaling, as minibert.optim.LossScaler does it.

In float16 a gradient below about 6e-8 rounds to zero.  Mixed precision
therefore differentiates scale * loss: every gradient is `scale` times larger
while it passes through the float16 products.  Two things remain, once per
optimiser step, and you write both:

1. unscale_and_check: divide the gradients by the scale again, in float32
   (their own dtype), and say whether any of them holds inf or NaN: too
   large a scale overflows float16 somewhere, and one inf or NaN would ruin
   the weights and AdamW's moments for good.

2. update_scale: the scale finds its own level, as PyTorch's GradScaler's does:

       gradients not finite:  skip this step; scale <- scale * backoff_factor;
                              good_steps <- 0
       finite:                take the step; good_steps <- good_steps + 1, and
                              when good_steps reaches growth_interval:
                              scale <- scale * growth_factor; good_steps <- 0

   good_steps counts the finite steps since the scale last changed.  There is
   no smallest or largest scale.

Check your work with:   python -m exercises check loss_scaler
"""
import numpy as np


def unscale_and_check(grads, scale):
    """The gradients of scale * loss, back to those of the loss, and whether any overflowed.

    Args:
        grads: a list of float32 arrays (any shapes), the gradients of scale * loss
        scale: the loss scale of that backward pass (a positive float, usually a power of two)

    Returns:
        (unscaled, found_inf): the list of the gradients divided by scale (new arrays, or the
        given ones divided in place), and True if any entry of any of them is inf or NaN,
        else False

    Hint: a power-of-two scale only changes exponents, so dividing by it is exact.
    """
    # TODO
    unscaled = [g / np.float32(scale) for g in grads]
    found_inf = not all(bool(np.isfinite(g).all()) for g in unscaled)
    return unscaled, found_inf


def update_scale(scale, found_inf, good_steps, *, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
    """One step of the scale's update rule.

    Args:
        scale: the loss scale used for this step's backward pass
        found_inf: what unscale_and_check found (True: some gradient is inf or NaN)
        good_steps: the finite steps in a row since the scale last changed (0 at the start)
        growth_factor, backoff_factor, growth_interval: the rule's constants (PyTorch's defaults)

    Returns:
        (scale, good_steps, take_step): the scale and the counter for the next step, and
        whether the optimiser may take this step (False when the gradients overflowed)
    """
    # TODO
    if found_inf:
        return scale * backoff_factor, good_steps, False
    good_steps += 1
    if good_steps >= growth_interval:
        return scale * growth_factor, 0, True
    return scale, good_steps, True
