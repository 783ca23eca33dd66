"""The fine-tuning classifier head's usual mistakes.

Forward, for a batch of B pooled [CLS] vectors:  z = pooled W^T + b (B, C),
p = softmax(z), loss = -(1/B) sum_j log p[j, y_j].
Backward, with dz = dloss * (p - onehot(y)) / B, the gradient of the mean
through the softmax: dpooled = dz W, dW = dz^T pooled, db = dz summed over the batch.
"""
from __future__ import annotations

import numpy as np

from .table import Table


def _log_softmax(z):
    """log softmax(z) over the classes, stably: (z - max) - log(sum(exp(z - max)))."""
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def _log_of_softmax(z):
    """The unstable way: exp(z) overflows to inf for logits of a few hundred."""
    e = np.exp(z)
    return np.log(e / e.sum(axis=1, keepdims=True))


def _forward(log_softmax=_log_softmax, bias=True, mean=True, give="probs", transpose=True):
    """classifier_head_forward, or one of its usual mistakes.

    give: "probs" (right) or "logits", what comes back beside the loss;
    transpose=False: pooled @ W, W's (C, H) layout read as (H, C).
    """
    def classifier_head_forward(pooled, W, b, labels):
        z = pooled @ (W.T if transpose else W)
        if bias:
            z = z + b
        logp = log_softmax(z)
        B = len(labels)
        total = -logp[np.arange(B), labels].sum()
        return (total / B if mean else total), (np.exp(logp) if give == "probs" else z)
    return classifier_head_forward


def _backward(dz=None, per_batch=True, times_dloss=True, dpooled_wt=False, dw_t=False, db=None):
    """classifier_head_backward, or one of its usual mistakes.

    dz(probs, onehot): the gradient of the summed loss with respect to the logits (right: probs - onehot);
    per_batch=False: not divided by B; db(dz): the bias gradient (right: dz.sum(axis=0)).
    """
    def classifier_head_backward(dloss, pooled, W, probs, labels):
        B = len(labels)
        onehot = np.zeros_like(probs)
        onehot[np.arange(B), labels] = 1.0
        g = probs - onehot if dz is None else dz(probs, onehot)
        g = g * ((dloss if times_dloss else 1.0) / (B if per_batch else 1))
        dpooled = g @ (W.T if dpooled_wt else W)
        dW = pooled.T @ g if dw_t else g.T @ pooled
        return dpooled, dW, (g.sum(axis=0) if db is None else db(g))
    return classifier_head_backward


TABLE = Table("classifier_head", classifier_head_forward=_forward(), classifier_head_backward=_backward())
case = TABLE.case

# ---- the forward pass
case("W not transposed", "W has PyTorch's (C, H) layout, one row per class: the logits are pooled @ W.T + b",
     classifier_head_forward=_forward(transpose=False))
case("bias left out", "add the bias b to every row of the logits: z = pooled @ W.T + b",
     classifier_head_forward=_forward(bias=False))
case("loss summed over the batch", "the loss is the MEAN over the batch of -log p[j, y_j]: divide the sum by B",
     classifier_head_forward=_forward(mean=False))
case("logits returned for the probabilities",
     "return the probabilities softmax(z) beside the loss (the backward pass needs them), not the logits z",
     classifier_head_forward=_forward(give="logits"))
UNSTABLE = case("log of softmax", "compute log-softmax as z - log(sum(exp(z))) with z = logits - row max; "
                                  "exp of a large logit overflows, and log(softmax) gives inf or NaN",
                classifier_head_forward=_forward(log_softmax=_log_of_softmax))

# ---- the backward pass
case("not divided by the batch", "the loss is a mean over the B examples, so its gradient carries 1/B: "
                                 "dz = dloss * (p - onehot(y)) / B",
     classifier_head_backward=_backward(per_batch=False))
case("one-hot not subtracted", "the gradient of -log softmax(z)[y] with respect to z is p - onehot(y): "
                               "subtract 1 at each row's label",
     classifier_head_backward=_backward(dz=lambda p, onehot: p.copy()))
case("gradient with respect to the probabilities",
     "that is the gradient with respect to the probabilities p (-1/p at the label); go on through the softmax "
     "to the logits: dz = dloss * (p - onehot(y)) / B",
     classifier_head_backward=_backward(dz=lambda p, onehot: -onehot / p))
case("dloss left out", "multiply the gradient by dloss (the chain rule from whatever comes after the loss)",
     classifier_head_backward=_backward(times_dloss=False))
case("dW transposed", "dW has W's shape (C, H): dW = dz.T @ pooled, not pooled.T @ dz",
     classifier_head_backward=_backward(dw_t=True))
case("dpooled through W transposed", "z = pooled @ W.T, so dpooled = dz @ W (B, C) @ (C, H), without a transpose",
     classifier_head_backward=_backward(dpooled_wt=True))
case("db summed over the classes", "db has b's shape (C,): sum dz over the batch, axis=0, not over the classes",
     classifier_head_backward=_backward(db=lambda g: g.sum(axis=1)))
case("db averaged over the batch", "sum dz over the batch for db: the 1/B of the mean is already in dz",
     classifier_head_backward=_backward(db=lambda g: g.mean(axis=0)))


def _logsumexp_forward(pooled, W, b, labels):
    """The loss as logsumexp(z) - z[label], averaged: the same number without a log-softmax array."""
    z = np.einsum("bh,ch->bc", pooled, W) + b
    m = z.max(axis=1)
    lse = m + np.log(np.exp(z - m[:, None]).sum(axis=1))
    loss = np.mean(lse - z[np.arange(len(labels)), labels])
    return loss, np.exp(z - lse[:, None])


def _add_at_backward(dloss, pooled, W, probs, labels):
    """The one-hot subtracted with np.add.at, the products with einsum."""
    dz = probs.copy()
    np.add.at(dz, (np.arange(len(labels)), labels), -1.0)
    dz *= dloss / len(labels)
    return np.einsum("bc,ch->bh", dz, W), np.einsum("bc,bh->ch", dz, pooled), dz.sum(axis=0)


TABLE.variant("logsumexp and einsum", classifier_head_forward=_logsumexp_forward,
              classifier_head_backward=_add_at_backward)
