"""Mixed precision's decision and AdamW's bias correction on the GPU in one launch.

After a mixed-precision step three things are decided on the device, so that no step waits to
read them: the loss scaler's rule (``optim.LossScaler.update``: halve the scale after an
overflow, double it after ``growth_interval`` good steps in a row), AdamW's step count (a
skipped step is not counted) and the bias correction that count gives (``optim.AdamW.step``).
Written as array expressions they are about fifteen launches of one number each, and three
casts where the update kernel takes them.  ``scale_and_count`` does them in one launch of one
thread, with the same double-precision arithmetic, so the same bits:

    good'  = good + 1 if finite else 0;  grow = good' >= interval;  good' = 0 if grow
    scale' = scale * (growth if grow else 1) if finite else scale * backoff
    t'     = t + 1 if finite else t
    step_size = lr / (1 - b1^max(t', 1)),  root_c2 = sqrt(1 - b2^max(t', 1))   (lr and 1 without)
    go        = 1 if finite else 0        (each rounded once to the parameters' dtype)

``AdamW.update`` then makes the step with them (its kernel leaves everything as it was where
``go`` is 0).
"""
from __future__ import annotations

import numpy as np

from ...ops.common import get_array_module
from . import kernels

SCALE_AND_COUNT = r"""
extern "C" __global__ void scale_and_count(const bool* finite, const double* scale, const long long* good,
                                           const long long* count, const double growth, const double backoff,
                                           const long long interval, const double lr, const double b1,
                                           const double b2, const int bias_correction, double* new_scale,
                                           long long* new_good, long long* new_count, T* step_size, T* root_c2,
                                           T* go) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const bool ok = *finite;
    const long long g = ok ? *good + 1 : 0;
    const bool grow = g >= interval;
    *new_scale = *scale * (ok ? (grow ? growth : 1.0) : backoff);
    *new_good = grow ? 0 : g;
    const long long t = *count + (ok ? 1 : 0);
    *new_count = t;
    const double tt = (double)(t > 1 ? t : 1);      // while no step was taken the numbers go unused
    *step_size = (T)(bias_correction ? lr / (1.0 - pow(b1, tt)) : lr);
    *root_c2 = (T)(bias_correction ? sqrt(1.0 - pow(b2, tt)) : 1.0);
    *go = ok ? T(1) : T(0);
}
"""


def applies(scaler, opt, finite) -> bool:
    """Whether ``scale_and_count`` takes these: the verdict a 0-d bool on the device, parameters of a
    kernel's dtype there, and the scaler's and optimiser's counts numbers or 0-d arrays there."""
    def number_or_there(x, dtype):
        return isinstance(x, (int, float)) or (kernels.on_device(x) and x.shape == () and x.dtype == dtype)
    return (kernels.on_device(finite) and finite.shape == () and finite.dtype == np.bool_
            and kernels.on_device(opt.store.data) and opt.store.data.dtype in kernels.CTYPES
            and number_or_there(scaler.scale, np.float64) and number_or_there(scaler.good_steps, np.int64)
            and number_or_there(opt._t, np.int64))


def scale_and_count(scaler, opt, finite, lr) -> None:
    """``opt.step(lr, take=scaler.update(finite))`` with the decision and the bias correction in one
    launch (the module's docstring); ``applies`` must hold."""
    lr = opt.rate(lr)
    dtype = opt.store.data.dtype
    xp = get_array_module(finite)

    # (empty_like and full_like: arrays of the verdict's kind, which the CPU stand-in's device arrays need)
    def there(x, dtype):         # a host number put on the device once, at the first step
        return x if kernels.on_device(x) else xp.full_like(finite, x, dtype=dtype, shape=())
    new = tuple(xp.empty_like(finite, dtype=d, shape=()) for d in (np.float64, np.int64, np.int64))
    step_size, root_c2, go = (xp.empty_like(finite, dtype=dtype, shape=()) for _ in range(3))
    b1, b2 = opt.betas
    kernels.kernel("scale_and_count", SCALE_AND_COUNT, dtype)(
        (1,), (32,),
        (finite, there(scaler.scale, np.float64), there(scaler.good_steps, np.int64), there(opt._t, np.int64),
         np.float64(scaler.growth_factor), np.float64(scaler.backoff_factor), np.int64(scaler.growth_interval),
         np.float64(lr), np.float64(b1), np.float64(b2), np.int32(bool(opt.bias_correction)), *new,
         step_size, root_c2, go))
    scaler.scale, scaler.good_steps, opt._t = new
    opt.update(lr, step_size, root_c2, go)
