"""Solution: dynamic loss scaling, the unscaling and the update rule."""
import numpy as np


def unscale_and_check(grads, scale):
    unscaled = [g * (1.0 / scale) for g in grads]       # in float32: exact for a power-of-two scale
    found_inf = not all(bool(np.isfinite(g).all()) for g in unscaled)
    return unscaled, found_inf


def update_scale(scale, found_inf, good_steps, *, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
    if found_inf:
        return scale * backoff_factor, 0, False             # too large: shrink, skip the step
    good_steps += 1
    if good_steps >= growth_interval:
        return scale * growth_factor, 0, True               # a long run without overflow: try larger
    return scale, good_steps, True
