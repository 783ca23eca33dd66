"""AdamW as BERT uses it, the warmup-then-linear-decay schedule, and gradient clipping.

The optimiser works on a model's ``ParamStore``: all parameters live in one
flat buffer with the weight-decayed ones first, so a step is a handful of
in-place whole-buffer operations and the "no decay on biases and LayerNorm"
rule is a slice.

Two flavours of Adam's update, chosen with ``bias_correction``:

* ``True`` (default, as ``torch.optim.AdamW`` and transformers):
      m_hat = m / (1 - beta1^t),  v_hat = v / (1 - beta2^t)
      p <- p * (1 - lr * wd) - lr * m_hat / (sqrt(v_hat) + eps)
* ``False`` (google-research/bert's ``AdamWeightDecayOptimizer``): the same
  without the two corrections.  Early in training m and v are biased
  towards their zero initial values; BERT relied on the learning-rate warmup
  to hide that.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import accel
from .accel.cuda import grads, loss_scaling
from .backend import on_host
from .checks import check_flag
from .ops.common import get_array_module


def _is_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _check_lr(lr):
    """A learning rate must be a finite number >= 0 (NaN or inf would ruin every weight at once)."""
    if not (_is_number(lr) and 0 <= lr < math.inf):
        raise ValueError(f"lr must be a finite number >= 0, got {lr!r}")
    return lr


class AdamW:
    """AdamW over a ``ParamStore``.

    Args:
        store: the model's ``params`` (a ``ParamStore``).
        lr: peak learning rate (a schedule may pass another one to ``step``).
        betas, eps: Adam's constants; BERT uses (0.9, 0.999) and 1e-6.
        weight_decay: decoupled decay, applied only to ``store.data[:store.decay_size]``.
        bias_correction: see the module docstring.
    """

    def __init__(self, store, lr=1e-4, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01,
                 bias_correction=True):
        _check_store(store, "AdamW")
        _check_lr(lr)
        try:
            betas = tuple(float(b) if _is_number(b) else b for b in betas)
        except TypeError:
            pass                    # not a sequence: refused below
        if not (isinstance(betas, tuple) and len(betas) == 2
                and all(_is_number(b) and 0 <= b < 1 for b in betas)):
            raise ValueError(f"betas must be two numbers in [0, 1), e.g. (0.9, 0.999), got {betas!r}")
        if not (_is_number(eps) and 0 < eps < math.inf):
            raise ValueError(f"eps must be a number > 0, got {eps!r}")
        if not (_is_number(weight_decay) and 0 <= weight_decay < math.inf):
            raise ValueError(f"weight_decay must be a number >= 0, got {weight_decay!r}")
        check_flag("bias_correction", bias_correction)
        self.store = store
        self.lr, self.betas, self.eps = lr, tuple(betas), eps
        self.weight_decay, self.bias_correction = weight_decay, bias_correction
        xp = store.xp
        self.m = xp.zeros_like(store.data)     # first moment
        self.v = xp.zeros_like(store.data)     # second moment
        self._t = 0                            # steps taken: an int, or a 0-d array on the GPU

    def step(self, lr=None, take=None):
        """One update from ``store.grad``; ``lr`` overrides the constant rate (for schedules).

        ``take``: None, or the loss scaler's decision (``LossScaler.update``): False for a step
        not to take, in which nothing changes, the step count included.  On a GPU the decision is
        a 0-d bool array and stays there: the step count moves to the device, and with it the
        bias correction, so that the host never waits to read it (``t`` reads it back).
        """
        lr = self.rate(lr)
        b1, b2 = self.betas
        if take is not None:
            take = _flag(take, "AdamW.step's take")
        if take is not None and on_host(take):          # the host reads its own flag for free
            if not take:
                return
            take = None
        go = take                                       # None, or the device's flag for the kernel
        self._t = self._t + (1 if go is None else go)   # with a flag: a 0-d int array on the device
        t = self._t
        if not isinstance(t, int):      # a device count: still 0 while every step so far was skipped,
            t = self.store.xp.maximum(t, 1)     # and then the numbers below go unused
        if self.bias_correction:
            # the same two numbers from a host int or a device count
            sqrt = math.sqrt if isinstance(t, int) else self.store.xp.sqrt
            step_size = lr / (1.0 - b1 ** t)
            root_c2 = sqrt(1.0 - b2 ** t)
        else:
            step_size, root_c2 = lr, 1.0
        self.update(lr, step_size, root_c2, go)

    def update(self, lr, step_size, root_c2, go=None, decay=None):
        """The update itself, given the bias correction: step_size = lr / (1 - b1^t) and
        root_c2 = sqrt(1 - b2^t) (lr and 1 without it), and ``go`` (None, or the device's flag,
        0 for a step not taken); ``step`` makes them, or on a GPU ``accel/cuda/loss_scaling.py``,
        which also makes ``decay`` (1 - lr wd) where the rate is on the device."""
        # decoupled weight decay p <- p (1 - lr wd), on the first n_decay entries only
        if decay is None:
            decay = 1.0 - lr * self.weight_decay
        n_decay = self.store.decay_size if self.weight_decay else 0
        # the update rule of ops/adamw.py, or the fused kernel of the model's set of ops
        self.store.ops.adamw_update(self.store.data, self.store.grad, self.m, self.v,
                                    *self.betas, step_size, root_c2, self.eps, decay, n_decay, go)

    def rate(self, lr=None) -> float:
        """The learning rate of a step: ``lr`` checked, or the constant one."""
        return self.lr if lr is None else _check_lr(lr)

    @property
    def t(self) -> int:
        """Steps taken (read back from the device where skipped steps were decided there)."""
        return self._t if isinstance(self._t, int) else int(self._t)

    @t.setter
    def t(self, value) -> None:
        self._t = int(value)

    def state_dict(self) -> dict:
        return {"m": self.m, "v": self.v, "t": self.t}

    def load_state_dict(self, state) -> None:
        """Restore ``m``, ``v`` (each as large as the model) and the step count ``t``.

        Everything is checked before anything is replaced: a state that is
        refused leaves the optimiser as it was.
        """
        if not hasattr(state, "keys") or not hasattr(state, "__getitem__"):
            raise TypeError(f"AdamW state must be a dict with m, v and t, got {type(state).__name__}")
        missing = [k for k in ("m", "v", "t") if k not in state]
        if missing:
            raise ValueError(f"AdamW state needs m, v and t; missing {missing}")
        xp = self.store.xp
        moments = {}
        for k in ("m", "v"):
            shape = tuple(state[k].shape) if hasattr(state[k], "shape") else None
            if shape != tuple(self.m.shape):
                raise ValueError(f"AdamW state {k!r} has shape {shape}; this model's "
                                 f"parameters need {tuple(self.m.shape)}: is it another model's?")
            a = xp.asarray(state[k])
            if a.dtype.kind not in "fiu":
                raise ValueError(f"AdamW state {k!r} must hold real numbers, got dtype {a.dtype}")
            if not bool(xp.isfinite(a).all()):
                raise ValueError(f"AdamW state {k!r} holds inf or NaN: the run it comes from had "
                                 f"already diverged")
            moments[k] = a
        if bool((moments["v"] < 0).any()):
            raise ValueError("AdamW state 'v' holds negative values: a mean of squared gradients cannot")
        t = state["t"]
        if isinstance(t, (bool, np.bool_)) or not isinstance(t, numbers.Real) or not math.isfinite(t) \
                or not float(t).is_integer() or t < 0:
            raise ValueError(f"AdamW state 't' must be a step count >= 0, got {t!r}")
        self.m[...] = moments["m"]
        self.v[...] = moments["v"]
        self.t = int(t)


class LossScaler:
    """Dynamic loss scaling for mixed precision.

    In float16 a gradient below about 6e-8 rounds to zero, and many of
    BERT's do.  The backward therefore differentiates ``scale * loss``: every
    gradient is ``scale`` times larger while it passes through float16, and
    is divided by ``scale`` again in float32 before the optimiser step.  Too
    large a scale overflows instead (inf or NaN somewhere in the gradients).
    The scale finds its own level:

    * gradients not finite: skip this optimiser step, halve the scale;
    * ``growth_interval`` finite steps in a row: double the scale.

    Usage, one optimiser step::

        model.backward(loss_scale=scaler.scale)
        store.grad *= 1.0 / scaler.scale
        if scaler.update(all_gradients_finite):
            opt.step()

    The defaults (2^16, x2, x0.5, 2000) are those of PyTorch's ``GradScaler``.
    """

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        _require_real("init_scale", init_scale, lambda x: 0 < x < math.inf, "a positive finite number")
        _require_real("growth_factor", growth_factor, lambda x: 1 < x < math.inf, "a finite number > 1")
        _require_real("backoff_factor", backoff_factor, lambda x: 0 < x < 1, "a number in (0, 1)")
        if isinstance(growth_interval, (bool, np.bool_)) or not isinstance(growth_interval, numbers.Integral) \
                or growth_interval < 1:
            raise ValueError(f"growth_interval must be a positive integer, got {growth_interval!r}")
        self.scale = float(init_scale)
        self.growth_factor, self.backoff_factor = float(growth_factor), float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self.good_steps = 0   # finite steps since the scale last changed

    def update(self, finite) -> bool:
        """Record whether this step's gradients were finite; True when the step may be taken.

        ``finite`` may be a 0-d bool array on the GPU: then the same rule runs there, the scale and
        the count stay there, and the answer is that array (for ``AdamW.step(take=answer)``), so
        that a step never waits to read it.  ``state_dict`` reads them back.
        """
        finite = _flag(finite, "LossScaler.update")
        if not on_host(finite):
            xp = get_array_module(finite)
            good = xp.where(finite, self.good_steps + 1, 0)
            grow = good >= self.growth_interval
            factor = xp.where(finite, xp.where(grow, self.growth_factor, 1.0), self.backoff_factor)
            self.scale = self.scale * factor
            self.good_steps = xp.where(grow, 0, good)
            return finite
        self.scale, self.good_steps = float(self.scale), int(self.good_steps)
        if not finite:
            self.scale *= self.backoff_factor
            self.good_steps = 0
            return False
        self.good_steps += 1
        if self.good_steps >= self.growth_interval:
            self.scale *= self.growth_factor
            self.good_steps = 0
        return True

    def state_dict(self) -> dict:
        return {"scale": float(self.scale), "good_steps": int(self.good_steps)}

    def load_state_dict(self, state) -> None:
        if not hasattr(state, "keys") or any(k not in state for k in ("scale", "good_steps")):
            raise ValueError(f"LossScaler state must be a dict with 'scale' and 'good_steps', got {state!r}")
        scale, good = state["scale"], state["good_steps"]
        _require_real("LossScaler state 'scale'", scale, lambda x: 0 < x < math.inf, "a positive finite number")
        if isinstance(good, (bool, np.bool_)) or not isinstance(good, numbers.Integral) \
                or not 0 <= good < self.growth_interval:
            raise ValueError(f"LossScaler state 'good_steps' must be an integer in [0, {self.growth_interval}) "
                             f"(growth_interval), got {good!r}")
        self.scale, self.good_steps = float(scale), int(good)


def scaled_step(opt, scaler, finite, lr=None) -> None:
    """AdamW's step after the loss scaler's verdict on this step's gradients: ``opt.step(lr,
    take=scaler.update(finite))``; without a scaler (None), ``opt.step(lr)``.  On a GPU with
    minibert's kernels the verdict, the step count and the bias correction are one launch
    (``accel/cuda/loss_scaling.py``) where they are about fifteen."""
    if opt.store.ops is accel.cuda and loss_scaling.applies(scaler, opt, finite, lr):
        loss_scaling.scale_and_count(scaler, opt, finite, lr)     # (a rate on the device: only here)
    elif scaler is None:
        opt.step(lr)
    else:
        opt.step(lr, take=scaler.update(finite))


def _flag(value, what):
    """A step's verdict: True or False, or (on a GPU) a 0-d bool array; anything else refused, since a number
    (the gradients' norm, say) would count as True whatever its value, NaN included."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if getattr(value, "dtype", None) == np.bool_ and getattr(value, "shape", None) == ():
        return value if not on_host(value) else bool(value)
    raise TypeError(f"{what} takes whether the gradients are finite, True or False (e.g. bool(np.isfinite(norm))), "
                    f"not {type(value).__name__} {value!r}")


def _check_store(store, what):
    """The model's parameters (``model.params``), not the model: a one-line TypeError that says so."""
    if not all(hasattr(store, name) for name in ("data", "grad", "ops", "xp")):
        raise TypeError(f"{what} takes the model's parameters, model.params (a ParamStore), not {type(store).__name__}")


def _require_real(name, value, ok, what):
    """A real number (not a bool) for which ``ok`` holds, or a one-line ValueError."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not ok(value):
        raise ValueError(f"{name} must be {what}, got {value!r}")


def linear_warmup_decay(step, total_steps, warmup_steps):
    """Multiplier of the peak learning rate at (0-based) optimiser step ``step``.

    Rises linearly from 0 to 1 over ``warmup_steps``, then falls linearly to 0
    at ``total_steps`` (the same values as transformers'
    ``get_linear_schedule_with_warmup``).
    """
    for name, value in (("total_steps", total_steps), ("warmup_steps", warmup_steps)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    if warmup_steps > total_steps:
        raise ValueError(f"warmup_steps={warmup_steps} is more than total_steps={total_steps}: the peak "
                         f"learning rate would come after the end of training")
    _require_real("step", step, lambda x: 0 <= x < math.inf, "a finite number >= 0")
    if step < warmup_steps:
        return step / max(1, warmup_steps)
    return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))


def unscale_and_clip(store, max_norm=1.0, loss_scale=1.0, accum=1):
    """After ``accum`` backward passes at ``loss_scale``: the mean gradient (the sum divided by
    accum * loss_scale), clipped by ``clip_grad_norm(..., on_device=True)``, whose norm it returns.

    ``loss_scale`` may be a 0-d array on the GPU (``LossScaler.scale``): the division happens there.
    """
    _check_store(store, "unscale_and_clip")
    if not on_host(loss_scale):
        store.ops.unscale(store.grad, loss_scale, accum)
    elif accum * loss_scale != 1.0:
        store.grad *= 1.0 / (accum * loss_scale)
    return clip_grad_norm(store, max_norm, on_device=True)


def clip_grad_norm(store, max_norm=1.0, on_device=False):
    """Scale all gradients so that their global L2 norm is at most ``max_norm``.

    Returns the norm before clipping (inf or NaN if a gradient is).  The
    scale max_norm / (norm + 1e-6), capped at 1, is the one PyTorch's
    ``clip_grad_norm_`` uses.  ``max_norm=None`` only measures the norm.

    ``on_device=True``: gradients on a GPU are scaled there by the capped
    factor (1 or less) without reading the norm, which is returned as a 0-d
    array on the device: a step need not wait for it.  (On the CPU, as without.)
    """
    _check_store(store, "clip_grad_norm")
    if max_norm is not None:
        _require_real("max_norm", max_norm, lambda x: 0 < x < math.inf,
                      "a positive finite number (or None: no clipping)")
    xp = store.xp
    if store.ops is accel.cuda and accel.cuda.kernels.applies(store.grad):
        norm = xp.sqrt(grads.sum_of_squares(store.grad))     # one launch, and no cuBLAS: a graph takes it
    else:
        norm = xp.sqrt(xp.dot(store.grad, store.grad))
    if on_device and not on_host(norm):
        if max_norm is not None:
            store.ops.clip_by_norm(store.grad, norm, max_norm)
        return norm
    norm = float(norm)
    if max_norm is None:
        return norm
    coef = max_norm / (norm + 1e-6)
    if coef < 1.0:
        store.grad *= coef
    return norm
