"""Softmax cross-entropy averaged over the labelled rows, the label ignore_index (-100) not counted."""
from __future__ import annotations

import numpy as np

from minibert import ops as L

from ..cases import cross_entropy as cases
from ..harness import as_array, compare, grad_check
from ..report import Report
from .common import bwd, forward_output, fwd

T = cases.TABLE
N, C = 9, 7
IDX_HINT = ("-100 is not a class index: replace ignored labels by 0 before indexing (np.where(valid, labels, 0)), "
            "then zero their terms with the mask")
FORWARD = "softmax_cross_entropy_forward"
BACKWARD = "softmax_cross_entropy_backward"


def _grad(m, logits, labels, dloss, **kw):
    return m.softmax_cross_entropy_backward(dloss, m.softmax_cross_entropy_forward(logits, labels, **kw)[1])


def check(r: Report) -> None:
    rng = np.random.default_rng(6)
    logits = rng.standard_normal((N, C)) * 3
    labels = rng.integers(0, C, N)
    labels[[1, 4, 5]] = -100
    loss, cache = fwd(r, FORWARD, logits, labels, hint=IDX_HINT)
    loss = as_array(r, "loss", loss, (), "the loss is one number (a float or a 0-d array)")
    compare(r, "loss vs minibert", loss, float(L.softmax_cross_entropy_forward(logits, labels)[0]),
            known=T.known(lambda m: m.softmax_cross_entropy_forward(logits, labels)[0]),
            hint="loss = -mean over labelled rows of log softmax(logits)[row, label]")
    big = logits * 300
    lb, _ = fwd(r, FORWARD, big, labels, hint=IDX_HINT)
    lb = np.asarray(lb, dtype=np.float64)
    r.require(lb.shape == () and np.isfinite(lb), "finite loss for logits of size ~1000", cases.UNSTABLE.hint)
    compare(r, "loss for logits of size ~1000", lb, float(L.softmax_cross_entropy_forward(big, labels)[0]))
    _check_nothing_labelled(r, logits)
    dloss = 1.7
    dl = as_array(r, "dlogits", bwd(r, BACKWARD, dloss, cache), logits.shape)
    r.expect(not dl[labels == -100].any(), "ignored rows get exactly zero gradient", cases.IGNORED_ROWS.hint)
    grad_check(r, "dlogits (dloss = 1.7)", forward_output(r, FORWARD, logits, labels), logits, dloss, dl,
               known=T.known(lambda m: _grad(m, logits, labels, dloss)))
    _check_large_logits_backward(r, big, labels)
    _check_ignore_index(r, logits, labels, loss, dl, dloss)


def _check_nothing_labelled(r: Report, logits) -> None:
    none = np.full(N, -100)
    l0, c0 = fwd(r, FORWARD, logits, none, hint=IDX_HINT)
    l0 = np.asarray(l0, dtype=np.float64)
    r.require(l0.shape == () and l0 == 0.0, "loss is 0 when every label is ignored",
              "with no labelled row, divide by max(n_valid, 1) so the loss is 0, not NaN")
    d0 = as_array(r, "dlogits with every label ignored", bwd(r, BACKWARD, 1.0, c0),
                  logits.shape, "with no labelled row the gradient is 0: divide by max(n_valid, 1)")
    r.expect(not d0.any(), "zero gradient when every label is ignored", cases.IGNORED_ROWS.hint)


def _check_large_logits_backward(r: Report, big, labels) -> None:
    """The backward pass for logits of size ~1000, once it is right for ordinary ones: a difference
    here can only come from exp overflowing (a non-finite result says so)."""
    _, cb = fwd(r, FORWARD, big, labels, hint=IDX_HINT)
    stable = cases.UNSTABLE_BACKWARD.hint
    db_ = as_array(r, "dlogits for logits of size ~1000", bwd(r, BACKWARD, 1.0, cb), big.shape, stable)
    compare(r, "dlogits for logits of size ~1000", db_,
            L.softmax_cross_entropy_backward(1.0, L.softmax_cross_entropy_forward(big, labels)[1]),
            hint="subtract each row's maximum before exp in the backward pass too; the values are right "
                 "for ordinary logits but not for large ones")


def _check_ignore_index(r: Report, logits, labels, loss, dl, dloss) -> None:
    """Another ignore_index: the argument, not the constant -100, says which rows do not count.

    The same rows are ignored, so the results must be the student's own from above (right or
    wrong): a difference can only come from how ignore_index is used.  C = 7 is not a class,
    which the docstring allows: "each a class in [0, C) or ignore_index".
    """
    valid = labels != -100
    for ignore in (-1, C):
        use_it = cases.CONSTANT_IGNORE.hint.format(ignore=ignore)
        other = np.where(valid, labels, ignore)
        li, ci = fwd(r, FORWARD, logits, other, ignore_index=ignore, hint=use_it)
        li = as_array(r, f"loss with ignore_index={ignore}", li, ())
        compare(r, f"loss, ignore_index={ignore} vs -100", li, loss, hint=use_it)
        di = as_array(r, f"dlogits with ignore_index={ignore}", bwd(r, BACKWARD, dloss, ci), logits.shape)
        compare(r, f"dlogits, ignore_index={ignore} vs -100", di, dl, hint=use_it)
