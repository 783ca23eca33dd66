"""``Health``: has the run diverged? On a GPU, answered there and read at the next log, evaluation or save."""
from __future__ import annotations

import math

from ..backend import on_host, to_numpy
from ..ops.common import get_array_module
from .errors import TrainingError

# Dropout at rate p keeps a share 1 - p of the activations and multiplies them by 1/(1 - p). From 0.9 on
# it keeps one in ten or fewer: the few kept are large, and a token whose features are all dropped reaches
# LayerNorm as a constant row, whose backward divides by sqrt(eps), eps 1e-12. Near 1 the gradients
# overflow at the first step, whatever the learning rate, so a divergence there blames the dropout.
EXTREME_DROPOUT = 0.9


class Health:
    """Whether the run has diverged, decided where the numbers are, read where the host looks anyway.

    On the CPU a step that goes wrong stops the run at once.  On a GPU reading the loss would make
    every step wait for the GPU to finish, so the first bad step is recorded there (its number,
    loss, gradient norm and loss scale) and ``check`` reads it at the next log, evaluation or
    checkpoint: the run stops then, naming the step where it went wrong, and saves nothing after it.

    Bad: a NaN or infinite loss; without loss scaling a non-finite gradient; with it, gradients
    that overflow float16 even at a loss scale of 1 or less (not an accident of the scale).
    """

    def __init__(self, comm, last_checkpoint, dropout: float = 0.0):
        self.comm, self.last_checkpoint = comm, last_checkpoint
        self.dropout = dropout   # the model's highest dropout rate, named by the error when extreme
        self.first = None        # on a GPU: [step, loss, grad_norm, scale] of the first bad step, 0 for none

    def watch(self, step, loss, grad_norm, finite, loss_scale=None) -> None:
        """After step ``step``'s backward: its loss, gradient norm, whether that is finite, and the loss
        scale it ran at (None without loss scaling)."""
        if on_host(grad_norm) and on_host(loss):
            if not math.isfinite(loss) or (not finite and (loss_scale is None or loss_scale <= 1.0)):
                raise self._error(step, loss, grad_norm, loss_scale)
            return
        xp = get_array_module(grad_norm)

        def there(x):       # a number on the device, made there (a copy from the host could wait)
            return xp.full((), float(x)) if on_host(x) else x.astype(xp.float64)
        scale = there(0.0 if loss_scale is None else loss_scale)     # 0: no loss scaling
        now = xp.stack([there(step), there(loss), there(grad_norm), scale])
        bad = ~xp.isfinite(now[1]) | (~finite & (scale <= 1.0))
        if self.first is None:
            self.first = xp.zeros(4)
        # the first bad step is kept: later ones, all bad too, would hide where it started
        self.first = xp.where((self.first[0] == 0) & bad, now, self.first)

    def device_first(self, xp):
        """``first`` on the device, for ``bookkeeping.step_book`` to write (zeros: no bad step yet)."""
        if self.first is None:
            self.first = xp.zeros(4)
        return self.first

    def check(self) -> None:
        """Raise (the same on every rank) if a step since the last check went wrong."""
        if self.first is None:
            return
        step, loss, grad_norm, scale = to_numpy(self.first).tolist()
        if step:
            raise self._error(int(step), loss, grad_norm, scale or None)

    def _error(self, step, loss, grad_norm, loss_scale):
        if loss_scale is not None and math.isfinite(loss):
            # the float16 gradients overflow even unscaled
            # (the gradients and the loss are the global ones: every rank of a data-parallel run stops here)
            what = f"the gradients overflow float16 even at loss scale {float(loss_scale):g}"
            advice = "Try a lower --lr, or train without --mixed-precision."
        else:
            what = f"the loss is {float(loss)} (gradient norm {float(grad_norm)})"
            advice = "Try a lower --lr."
        if self.dropout >= EXTREME_DROPOUT:
            kept_one_in = 1 / (1 - self.dropout)
            advice = (f"The likely cause is the dropout rate {self.dropout:g}: it keeps one activation in "
                      f"{kept_one_in:,.0f} and multiplies it by {kept_one_in:,.0f}; try a lower --dropout "
                      f"(BERT's is 0.1).")
        return self.comm.agreed(TrainingError(
            f"step {step}: {what}; stopped without saving. Last good checkpoint: "
            f"{self.last_checkpoint() or 'none'}. {advice}"))
