"""Solution: one AdamW step on one tensor."""
import numpy as np


def adamw_step(param, grad, m, v, t, *, lr, beta1=0.9, beta2=0.999, eps=1e-6,
               weight_decay=0.01, decay=True):
    if decay:
        param = param * (1.0 - lr * weight_decay)            # decoupled weight decay
    m = beta1 * m + (1.0 - beta1) * grad
    v = beta2 * v + (1.0 - beta2) * grad * grad
    m_hat = m / (1.0 - beta1 ** t)
    v_hat = v / (1.0 - beta2 ** t)
    param = param - lr * m_hat / (np.sqrt(v_hat) + eps)
    return param, m, v
