"""Solution: the warm-up then linear decay learning rate, and clipping by the global norm."""
import numpy as np


def learning_rate(step, *, peak_lr, warmup_steps, total_steps):
    if step < warmup_steps:                   # never true without a warm-up: no division by 0
        return peak_lr * step / warmup_steps
    # from the peak at warmup_steps down to 0 at total_steps; max(1, ...) for warmup_steps == total_steps
    return peak_lr * max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))


def clip_by_global_norm(grads, max_norm):
    norm = float(np.sqrt(sum(np.sum(g * g) for g in grads)))   # all the entries as one vector
    coef = max_norm / (norm + 1e-6)
    if coef < 1.0:
        return [g * coef for g in grads], norm
    return [g.copy() for g in grads], norm
