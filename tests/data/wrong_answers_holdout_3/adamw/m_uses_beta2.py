# slip: the first moment m is averaged with beta2 instead of beta1: m <- beta2 m + (1 - beta2) grad
# names it: first moment & beta2 | beta2 instead of beta1 | not beta2 | with beta1 | beta1 for m
"""Exercise: one AdamW step on one parameter tensor.

Adam keeps two running averages per parameter, of the gradient (m) and of its
square (v), and divides one by the square root of the other.  AdamW adds
*decoupled* weight decay: the weights shrink by a factor (1 - lr * wd) on
their own, outside the gradient, instead of adding wd * param to the
gradient (that would be L2 regularisation, which Adam's division rescales
per parameter).  BERT does not decay biases or LayerNorm weights: the caller
says so with decay=False.

At step t (1, 2, 3, ...):

    if decay:  param <- param * (1 - lr * weight_decay)
    m <- beta1 m + (1 - beta1) grad
    v <- beta2 v + (1 - beta2) grad^2
    m_hat = m / (1 - beta1^t)          v_hat = v / (1 - beta2^t)      (bias correction)
    param <- param - lr * m_hat / (sqrt(v_hat) + eps)

This is torch.optim.AdamW's update, and minibert.optim.AdamW's.

Check your work with:   python -m exercises check adamw
"""
import numpy as np


def adamw_step(param, grad, m, v, t, *, lr, beta1=0.9, beta2=0.999, eps=1e-6,
               weight_decay=0.01, decay=True):
    """One step.

    Args:
        param, grad, m, v: arrays of the same shape (m and v start as zeros)
        t: the number of this step, starting at 1
        lr, beta1, beta2, eps, weight_decay: the hyper-parameters (BERT: eps 1e-6, wd 0.01)
        decay: False for parameters that must not be decayed (biases, LayerNorm)

    Returns:
        (param, m, v) after the step (new arrays, or the inputs updated in place)

    Hints: eps goes outside the square root; the weight decay uses the
    parameter as it was before this step's Adam update, and is multiplied by lr.
    """
    if decay:
        param = param * (1 - lr * weight_decay)
    m = beta2 * m + (1 - beta2) * grad
    v = beta2 * v + (1 - beta2) * grad ** 2
    m_hat = m / (1 - beta1 ** t)
    v_hat = v / (1 - beta2 ** t)
    param = param - lr * m_hat / (np.sqrt(v_hat) + eps)
    return param, m, v
