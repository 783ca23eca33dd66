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
    go        = 1 if finite else 0,  decay = 1 - lr * weight_decay
                                          (each rounded once to the parameters' dtype)

``AdamW.update`` then makes the step with them (its kernel leaves everything as it was where
``go`` is 0).  The scale, the good steps and the step count are updated in place, once they are
on the device.  A step captured into a CUDA graph (``graph.py``) runs this kernel too, in float32
without a scaler (every step taken), with the learning rate read from device memory: a graph
replays the kernel with the arguments it was captured with, so every number that changes from
step to step is read from an array there.
"""
from __future__ import annotations

import numpy as np

from ...ops.common import get_array_module
from . import kernels

SCALE_AND_COUNT = r"""
extern "C" __global__ void scale_and_count(const bool* finite, const int has_scaler, double* scale, long long* good,
                                           long long* count, const double growth, const double backoff,
                                           const long long interval, const double lr_value, const double* lr_at,
                                           const int lr_there, const double b1, const double b2,
                                           const int bias_correction, const double weight_decay, T* step_size,
                                           T* root_c2, T* go, T* decay) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const bool ok = has_scaler ? *finite : true;       // without a scaler every step is taken
    if (has_scaler) {
        const long long g = ok ? *good + 1 : 0;
        const bool grow = g >= interval;
        *scale = *scale * (ok ? (grow ? growth : 1.0) : backoff);
        *good = grow ? 0 : g;
    }
    const long long t = *count + (ok ? 1 : 0);
    *count = t;
    const double lr = lr_there ? *lr_at : lr_value;
    const double tt = (double)(t > 1 ? t : 1);      // while no step was taken the numbers go unused
    *step_size = (T)(bias_correction ? lr / (1.0 - pow(b1, tt)) : lr);
    *root_c2 = (T)(bias_correction ? sqrt(1.0 - pow(b2, tt)) : 1.0);
    *go = ok ? T(1) : T(0);
    *decay = (T)(1.0 - mul_rn(lr, weight_decay));     // rounded twice, as the host's 1.0 - lr * wd
}
"""


def there(x, dtype) -> bool:
    """x is a 0-d array of ``dtype`` on the device."""
    return kernels.on_device(x) and x.shape == () and x.dtype == dtype


def applies(scaler, opt, finite, lr=None) -> bool:
    """Whether ``scale_and_count`` takes these: the verdict a 0-d bool on the device, parameters of a
    kernel's dtype there, and the scaler's and optimiser's counts numbers or 0-d arrays there.  Without
    a scaler (None: float32), only for a learning rate on the device (a step captured into a graph)."""
    def number_or_there(x, dtype):
        return isinstance(x, (int, float)) or there(x, dtype)
    return (there(finite, np.bool_) and kernels.on_device(opt.store.data) and opt.store.data.dtype in kernels.CTYPES
            and (there(lr, np.float64) if scaler is None else
                 number_or_there(scaler.scale, np.float64) and number_or_there(scaler.good_steps, np.int64))
            and number_or_there(opt._t, np.int64))


def scale_and_count(scaler, opt, finite, lr) -> None:
    """``opt.step(lr, take=scaler.update(finite))`` with the decision and the bias correction in one
    launch (the module's docstring), or without a scaler ``opt.step(lr)``; ``applies`` must hold.
    ``lr``: a number, or a 0-d float64 array on the device, read there."""
    dtype = opt.store.data.dtype
    xp = get_array_module(finite)

    # (empty_like and full_like: arrays of the verdict's kind, which the CPU stand-in's device arrays need)
    def on_device(owner, name, dtype):    # a host number put on the device once, then updated in place
        if not kernels.on_device(getattr(owner, name)):
            setattr(owner, name, xp.full_like(finite, getattr(owner, name), dtype=dtype, shape=()))
        return getattr(owner, name)
    step_size, root_c2, go, decay = (xp.empty_like(finite, dtype=dtype, shape=()) for _ in range(4))
    b1, b2 = opt.betas
    lr_there = there(lr, np.float64)
    if not lr_there:
        lr = opt.rate(lr)
    if scaler is None:       # (the kernel neither reads nor writes the scaler's numbers then)
        scale, good, rule = kernels.dummy(np.float64), kernels.dummy(np.int64), (1.0, 1.0, 1)
    else:
        scale, good = on_device(scaler, "scale", np.float64), on_device(scaler, "good_steps", np.int64)
        rule = (scaler.growth_factor, scaler.backoff_factor, scaler.growth_interval)
    kernels.kernel("scale_and_count", SCALE_AND_COUNT, dtype)(
        (1,), (32,),
        (finite, np.int32(scaler is not None), scale, good, on_device(opt, "_t", np.int64),
         np.float64(rule[0]), np.float64(rule[1]), np.int64(rule[2]),
         np.float64(0.0 if lr_there else lr), lr if lr_there else kernels.dummy(np.float64), np.int32(lr_there),
         np.float64(b1), np.float64(b2), np.int32(bool(opt.bias_correction)), np.float64(opt.weight_decay),
         step_size, root_c2, go, decay))
    opt.update(lr, step_size, root_c2, go, decay)
