"""AdamW's update rule on flat buffers: the reference the fused kernels of ``accel`` repeat.

``minibert.optim.AdamW`` holds the state and the settings and calls this
(or the fused kernel of the model's set of ops) once per step.
"""
from __future__ import annotations

from .common import get_array_module


def adamw_update(p, g, m, v, b1, b2, step_size, root_c2, eps, decay, n_decay, go=None):
    """One AdamW update of the flat buffers, in place: parameters p, gradients g, moments m and v.

    step_size = lr / (1 - b1^t) and root_c2 = sqrt(1 - b2^t) carry the bias
    correction (lr and 1 without it); decay = 1 - lr * weight_decay applies
    to the first ``n_decay`` entries (the weights; biases and LayerNorm are not
    decayed).  With m_hat = m / (1 - b1^t) and v_hat = v / (1 - b2^t):
        p <- p * decay - lr * m_hat / (sqrt(v_hat) + eps)
    The fast sets of ops run a fused version of these same lines
    (``accel/cpu/adamw.py``, ``accel/cuda/``).
    ``go``: None, or a flag that is 0 for a step the loss scaler skips: then nothing changes.
    """
    if go is not None and not go:
        return
    xp = get_array_module(p)
    p[:n_decay] *= decay                         # decoupled weight decay, weights only
    m[...] = b1 * m + (1.0 - b1) * g             # first moment: running mean of g
    v[...] = b2 * v + (1.0 - b2) * (g * g)       # second moment: running mean of g^2
    # lr * m_hat / (sqrt(v_hat) + eps) = step_size * m / (sqrt(v) / root_c2 + eps)
    p -= step_size * (m / (xp.sqrt(v) / root_c2 + eps))


def unscale(g, loss_scale, accum=1):
    """Divide the gradients g by ``accum * loss_scale`` in place: the sum of ``accum`` backward
    passes of a loss multiplied by ``loss_scale`` becomes the gradient of the mean loss.

    g: a flat buffer; loss_scale: a 0-d float64 array where g is (mixed precision's scale, on a GPU
    not read on the host); accum: a positive int.  The factor 1 / (accum * loss_scale) is made in
    float64 and rounded to g's dtype once, so every entry is multiplied by the same number.
    """
    g *= (1.0 / (accum * loss_scale)).astype(g.dtype)


def clip_by_norm(g, norm, max_norm):
    """Scale the gradients g in place so that their global L2 norm, ``norm``, is at most ``max_norm``.

    g: a flat buffer; norm: ||g||, a 0-d array where g is (on a GPU it is not read on the host);
    max_norm: a positive number.  The factor max_norm / (norm + 1e-6), capped at 1, is PyTorch's
    ``clip_grad_norm_``'s; a NaN or infinite norm makes the gradients NaN or 0, which the step's
    finiteness check then reports (or the loss scaler skips).
    """
    xp = get_array_module(g)
    coef = xp.minimum(max_norm / (norm + 1e-6), 1.0)
    g *= coef.astype(g.dtype)
