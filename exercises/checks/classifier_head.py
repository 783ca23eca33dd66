"""The fine-tuning classifier head: logits and loss from the pooled [CLS] vectors, then the gradients.

The forward pass is compared with minibert's ``linear_forward`` and
``softmax_cross_entropy_forward``.  The backward pass is handed minibert's
probabilities, not the student's, and gradient-checked against central
differences of minibert's loss, in float64: so a backward pass is judged on
its own, and the notebook can check the forward and the backward in two cells.
"""
from __future__ import annotations

import numpy as np

from minibert import ops as L

from ..calls import call_watched
from ..cases import classifier_head as cases
from ..harness import as_array, compare, fresh, grad_check
from ..report import Report
from .common import fwd, unpack

T = cases.TABLE
B, C, H = 6, 4, 5            # all different, so that a transposed matrix has the wrong shape
FORWARD, BACKWARD = "classifier_head_forward", "classifier_head_backward"
GRADS = (("dpooled", (B, H)), ("dW", (C, H)), ("db", (C,)))


def reference(pooled, W, b, labels):
    """minibert's loss and probabilities for the head."""
    logits, _ = L.linear_forward(pooled, W, b)
    loss, _ = L.softmax_cross_entropy_forward(logits, labels)
    return float(loss), L.softmax_forward(logits)[0]


def _inputs():
    rng = np.random.default_rng(23)
    pooled = np.tanh(rng.standard_normal((B, H)))        # a pooled output is a tanh, in (-1, 1)
    W, b = rng.standard_normal((C, H)), rng.standard_normal(C)
    labels = rng.integers(0, C, B)
    return pooled, W, b, labels


def _check_forwards(r: Report) -> None:
    pooled, W, b, labels = _inputs()
    _check_forward(r, pooled, W, b, labels)
    _check_large_logits(r, pooled, W * 400, b, labels)


def _check_backwards(r: Report) -> None:
    _check_backward(r, *_inputs(), dloss=1.7)


def _check_forward(r: Report, pooled, W, b, labels) -> None:
    want_loss, want_probs = reference(pooled, W, b, labels)

    def forward(m):
        return m.classifier_head_forward(pooled, W, b, labels)
    loss, probs = fwd(r, FORWARD, pooled, W, b, labels, hint=T.raised(forward))
    loss = as_array(r, "loss", loss, (), "the loss is one number (a float or a 0-d array): the mean over the batch")
    compare(r, "loss vs minibert", loss, want_loss, known=T.known(lambda m: forward(m)[0]),
            hint="loss = -mean over the batch of log softmax(pooled @ W.T + b)[j, labels[j]]")
    probs = as_array(r, "probs", probs, (B, C), "probs is (B, C): softmax of the logits, one row per example")
    compare(r, "probs vs minibert", probs, want_probs, known=T.known(lambda m: forward(m)[1]),
            hint="probs = softmax(pooled @ W.T + b) over the classes (axis=1)")


def _check_large_logits(r: Report, pooled, W, b, labels) -> None:
    """Logits of several hundred, as an untrained head with a large learning rate can reach: the
    loss must stay finite (computed from the log-softmax, never from log(softmax))."""
    loss, _ = fwd(r, FORWARD, pooled, W, b, labels)
    loss = np.asarray(loss, dtype=np.float64)
    r.require(loss.shape == () and bool(np.isfinite(loss)), "finite loss for logits of several hundred",
              cases.UNSTABLE.hint)
    compare(r, "loss for logits of several hundred", loss, reference(pooled, W, b, labels)[0])


def _check_backward(r: Report, pooled, W, b, labels, dloss) -> None:
    _, probs = reference(pooled, W, b, labels)
    args = (dloss, pooled, W, probs, labels)

    def backward(m):                # fresh arrays each call: a slip that changes probs in place must not
        return m.classifier_head_backward(*(fresh(a) for a in args))   # change them for the next case
    result = call_watched(r, BACKWARD, dloss, fresh(pooled), fresh(W), fresh(probs), fresh(labels),
                          roles=[None, "input", "input", "cache", "input"], hint=T.raised(backward))
    got = unpack(r, BACKWARD, result, 3, "dpooled, dW, db")
    grads = [as_array(r, name, g, shape, _shape_hint(backward, i, g, name, shape))
             for i, ((name, shape), g) in enumerate(zip(GRADS, got))]

    def loss():                    # reads the arrays the gradient check perturbs
        return reference(pooled, W, b, labels)[0]
    for i, ((name, _), param, g) in enumerate(zip(GRADS, (pooled, W, b), grads)):
        grad_check(r, f"{name}, dloss = {dloss},", loss, param, dloss, g,
                   known=T.known(lambda m, i=i: backward(m)[i], of=BACKWARD))


def _shape_hint(backward, i, got, name, shape):
    """The hint of the case whose gradient has this wrong shape (and these values), or the shape rule."""
    rule = f"{name} has the shape {shape} of what it is the gradient of"
    try:
        if np.shape(got) != shape:
            return T.matching(lambda m: backward(m)[i], got) or rule
    except Exception:          # a result that is not even an array: the rule says what is wanted
        pass
    return rule


# what each part checks: a notebook checks one function at a time (checks/__init__.py)
PARTS = (((FORWARD,), _check_forwards), ((BACKWARD,), _check_backwards))
