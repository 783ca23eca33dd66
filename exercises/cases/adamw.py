"""AdamW's usual mistakes.  One step: param *= 1 - lr * wd (decoupled, only where decay=True), then
m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, param -= lr * m_hat / (sqrt(v_hat) + eps) with
m_hat = m / (1 - b1^t) and v_hat = v / (1 - b2^t)."""
from __future__ import annotations

import numpy as np

from .table import Table


def _step(decay_mode="decoupled", flag=True, correction="right", eps_inside=False, store_hats=False,
          fixed_betas=False, fixed_eps=False):
    """adamw_step, or one of its usual mistakes.

    decay_mode: "decoupled" (right), "l2" (wd * param added to the gradient),
    "no_lr" (param *= 1 - wd), "after" (decayed after the update), "never";
    flag=False: the decay flag is ignored (every tensor decayed);
    correction: "right", "none" or "swapped" (beta1 with v, beta2 with m).
    """
    def adamw_step(param, grad, m, v, t, *, lr, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.01, decay=True):
        if fixed_betas:
            beta1, beta2 = 0.9, 0.999
        if fixed_eps:
            eps = 1e-6
        decays = (decay or not flag) and decay_mode != "never"
        if decays and decay_mode == "l2":
            grad = grad + weight_decay * param
        if decays and decay_mode in ("decoupled", "no_lr"):
            param = param * (1.0 - (lr if decay_mode == "decoupled" else 1.0) * weight_decay)
        m = beta1 * m + (1.0 - beta1) * grad
        v = beta2 * v + (1.0 - beta2) * grad * grad
        c1, c2 = {"right": (1 - beta1 ** t, 1 - beta2 ** t), "none": (1.0, 1.0),
                  "swapped": (1 - beta2 ** t, 1 - beta1 ** t)}[correction]
        m_hat, v_hat = m / c1, v / c2
        denom = np.sqrt(v_hat + eps) if eps_inside else np.sqrt(v_hat) + eps
        param = param - lr * m_hat / denom
        if decays and decay_mode == "after":
            param = param * (1.0 - lr * weight_decay)
        return (param, m_hat, v_hat) if store_hats else (param, m, v)
    return adamw_step


TABLE = Table("adamw", adamw_step=_step())
case = TABLE.case

NO_DECAY = "decay=False (biases, LayerNorm) means no weight decay at all for this tensor"
HYPER = ("use the beta1, beta2, eps, lr and weight_decay arguments everywhere (in the moments, the bias corrections "
         "and the update), not BERT's values written into the code")

case("L2 in the gradient", "that is L2 regularisation (wd * param added to the gradient, which changes m and v too); "
                           "AdamW decays the weights directly: param *= 1 - lr * weight_decay, outside Adam's update, "
                           "and m, v see the gradient alone", adamw_step=_step("l2"))
case("never decays", "with decay=True the weights must be decayed", adamw_step=_step("never"))
case("decay without lr", "the decay factor is 1 - lr * weight_decay", adamw_step=_step("no_lr"))
case("decay after the update", "decay the parameter as it was before this step's Adam update (decay first)",
     adamw_step=_step("after"))
case("decays LayerNorm/bias (decay flag ignored)", NO_DECAY, adamw_step=_step(flag=False))
case("no bias correction", "bias correction is missing: m_hat = m / (1 - beta1**t), v_hat = v / (1 - beta2**t)",
     adamw_step=_step(correction="none"))
case("bias corrections swapped", "the bias corrections are swapped: m_hat = m / (1 - beta1**t) goes with beta1, "
                                 "v_hat = v / (1 - beta2**t) with beta2", adamw_step=_step(correction="swapped"))
case("eps inside the square root", "eps goes outside the square root: sqrt(v_hat) + eps",
     adamw_step=_step(eps_inside=True))
case("bias-corrected moments stored", "store m and v themselves, not the bias-corrected m_hat and v_hat",
     adamw_step=_step(store_hats=True))
FIXED_BETAS = case("betas written into the code", HYPER, adamw_step=_step(fixed_betas=True))
FIXED_EPS = case("eps written into the code", HYPER, adamw_step=_step(fixed_eps=True))
