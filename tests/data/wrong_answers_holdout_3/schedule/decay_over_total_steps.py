# slip: the decay divides by total_steps instead of total_steps - warmup_steps, so the rate drops below the peak right at the end of the warm-up (it still reaches 0 at total_steps)
# names it: total_steps - warmup_steps | total - warmup | decay & denominator | decay & divide & warm-up | decay & length
"""Exercise: BERT's learning-rate schedule, and gradient clipping by the global norm.

Two pieces of the training loop around the optimiser (notebook 6a).

The learning rate.  BERT warms the rate up linearly from 0 to its peak over
the first warmup_steps updates, then lets it fall linearly to 0 at
total_steps, and keeps it at 0 after that.  Steps are counted from 0: step 0
is the first update, so with a warm-up its rate is 0 (it only fills Adam's
averages), and the rate is back at the peak exactly at step warmup_steps.
warmup_steps=0 means no warm-up at all: step 0 already has the peak rate.
This is minibert.optim.linear_warmup_decay (times the peak) and Hugging
Face's get_linear_schedule_with_warmup.

Clipping.  The gradient of a whole model is many arrays; its norm is that
of all their entries together, as if they were one long vector (the global
norm).  When it is larger than max_norm, every array is multiplied by the
same factor, so that the gradient keeps its direction and its norm becomes
(about) max_norm.  As minibert.optim.clip_grad_norm and PyTorch's
clip_grad_norm_ do, the factor is max_norm / (norm + 1e-6), applied whenever
it is below 1 (the 1e-6 keeps the division safe for a zero gradient).

Work in float64 and return plain numbers for the rate and the norm.

Check your work with:   python -m exercises check schedule
Stuck?  python -m exercises hint schedule  (then hint schedule 2, hint schedule 3)
"""
import numpy as np


def learning_rate(step, *, peak_lr, warmup_steps, total_steps):
    """The learning rate of optimiser step ``step``.

    Args:
        step: the update's number, 0 for the first (an int >= 0; it may be past total_steps)
        peak_lr: the rate at the end of the warm-up
        warmup_steps: the length of the warm-up (0: none), at most total_steps
        total_steps: the step at which the rate reaches 0

    Returns:
        the rate, a float: 0 at step 0 when there is a warm-up, peak_lr at step warmup_steps,
        0 at step total_steps and after
    """
    # TODO
    if step < warmup_steps:
        return float(peak_lr * step / warmup_steps)
    decay = (total_steps - step) / max(1, total_steps)
    return float(peak_lr * max(0.0, decay))


def clip_by_global_norm(grads, max_norm):
    """Clip a list of gradient arrays by their global norm.

    Args:
        grads: a list of float64 arrays of any shapes (one per parameter)
        max_norm: the largest norm allowed, a positive float

    Returns:
        (clipped, norm): clipped, a list of arrays of the same shapes, in the same order
        (new arrays, or the inputs scaled in place); norm, a float, the global norm of
        grads BEFORE clipping (what a training log shows)
    """
    # TODO
    norm = float(np.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in grads)))
    coef = max_norm / (norm + 1e-6)
    if coef < 1:
        clipped = [g * coef for g in grads]
    else:
        clipped = [g.copy() for g in grads]
    return clipped, norm
