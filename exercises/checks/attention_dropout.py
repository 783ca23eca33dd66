"""Dropout on the attention weights: out = dropout(P) v in training, plain attention at evaluation.

Read through v = [I | R], the first T columns of out are the dropped weights
themselves, so each can be checked: 0 or P / (1 - p).
"""
from __future__ import annotations

import math

import numpy as np

from minibert import ops as L
from minibert.gradcheck import max_rel_error

from ..cases import dropout as cases
from ..harness import as_array, compare, grad_check
from ..report import Report
from .common import bwd, fwd, near, seeded_output, unpack
from .dropout import drop_share_hint, scale_hint

T = cases.TABLE
B, A, TT = 2, 2, 5
D = 2 * TT                                 # room for v = [I | R]: out = [Pd | Pd R] shows Pd itself
FUNC = "attention_dropout_forward"


def check(r: Report) -> None:
    rng = np.random.default_rng(12)
    q, k, v = (rng.standard_normal((B, A, TT, D)) for _ in range(3))
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    bias = L.attention_mask_bias(mask, np.float64)
    P = L.softmax_forward(q @ k.swapaxes(-1, -2) / math.sqrt(D) + bias)[0]
    p, seed = 0.2, 21

    oe, ce = fwd(r, FUNC, q, k, v, mask, p, np.random.default_rng(3), train=False)
    oe = as_array(r, "attention out (train=False)", oe, q.shape, "out has q's shape (B, A, T, D)")
    compare(r, "attention, train=False, vs minibert", oe, L.attention_forward(q, k, v, bias)[0],
            known=T.known(lambda m: m.attention_dropout_forward(q, k, v, mask, p, np.random.default_rng(3),
                                                                train=False)[0]),
            hint="with train=False there is no dropout: out = softmax(q k^T / sqrt(D) + mask bias) v, "
                 "as in the attention exercise")
    Pd = _dropped_weights(r, rng, q, k, mask, p, seed)
    real = P > 0.0                         # padded keys have weight exactly 0, dropped or not
    kept = real & (Pd != 0.0)
    ratio = Pd[kept] / P[kept]
    if near(ratio, 1.0 / (1.0 - p)) and not Pd[~real].any():
        weights_hint = None
    elif np.allclose(Pd.sum(-1), 1.0, atol=1e-9) and not np.allclose(Pd, P, rtol=1e-9, atol=0.0):
        weights_hint = ("the dropped weights still sum to 1 in every row: apply dropout to P after the softmax and "
                        "do not renormalise (dropping scores before the softmax is not dropout on the weights)")
    else:
        weights_hint = scale_hint(ratio, p, "weights") or "each weight of P is either 0 (dropped) or P / (1 - p) (kept)"
    r.expect(weights_hint is None, "train=True: each weight is 0 or P / (1 - p)", weights_hint)
    share = float((real & (Pd == 0.0)).sum() / real.sum())
    r.expect(0.05 < share < 0.45, f"{share:.2f} of the weights dropped with p = {p}",
             drop_share_hint(share, p, "weights"))
    M = np.where(real, Pd / np.where(real, P, 1.0), 0.0)   # the student's mask for this seed
    dout = rng.standard_normal(q.shape)
    _check_backward(r, (q, k, v, mask, p), P, M, seed, dout)
    _check_evaluation_backward(r, q, k, v, bias, ce, dout)


def _dropped_weights(r: Report, rng, q, k, mask, p, seed):
    """The student's dropped weights Pd, read through v = [I | R]: out = [Pd | Pd R]."""
    R = rng.standard_normal((TT, TT))
    v_probe = np.broadcast_to(np.concatenate([np.eye(TT), R], axis=1), (B, A, TT, D)).copy()
    op, _ = fwd(r, FUNC, q, k, v_probe, mask, p, np.random.default_rng(seed), train=True)
    op = as_array(r, "attention out (train=True)", op, q.shape)
    Pd = op[..., :TT]
    r.require(max_rel_error(op[..., TT:], Pd @ R) < 1e-9, "train=True: out = dropout(P) v, the weights dropped "
                                                           "before v", cases.ON_OUTPUT.hint)
    return Pd


def _check_backward(r: Report, args, P, M, seed, dout) -> None:
    """The backward pass in training, against the student's own forward with the same seed.

    A case's backward runs on the cache the right forward pass would have made
    with the student's own mask M, so that it is compared on the same draws.
    """
    q, k, v, mask, p = args
    ot, ct = fwd(r, FUNC, *args, np.random.default_rng(seed), train=True)
    grads = unpack(r, "attention_dropout_backward", bwd(r, "attention_dropout_backward", dout, ct), 3, "dq, dk, dv")
    dq, dk, dv = (as_array(r, n, g, q.shape) for n, g in zip(("dq", "dk", "dv"), grads))
    cache = (q, k, v, P, P * M, M, 1.0 / math.sqrt(D))
    f = seeded_output(r, FUNC, *args, seed=seed, train=True)

    def backward(m, i):
        # a mutant of the solution reads the solution's own cache, made by its forward with the same seed
        if getattr(m, "is_mutant", False):
            return m.attention_dropout_backward(dout, m.attention_dropout_forward(
                *args, np.random.default_rng(seed), train=True)[1])[i]
        return m.attention_dropout_backward(dout, cache)[i]
    for i, (name, got, x) in enumerate((("dq", dq, q), ("dk", dk, k), ("dv", dv, v))):
        grad_check(r, f"{name} (train=True)", f, x, dout, got, known=T.known(lambda m, i=i: backward(m, i)))


def _check_evaluation_backward(r: Report, q, k, v, bias, ce, dout) -> None:
    """At evaluation: plain attention's backward pass."""
    ge = unpack(r, "attention_dropout_backward", bwd(r, "attention_dropout_backward", dout, ce), 3, "dq, dk, dv")
    ref = L.attention_backward(dout, L.attention_forward(q, k, v, bias)[1])
    for name, got, want in zip(("dq", "dk", "dv"), ge, ref):
        got = as_array(r, f"{name} (train=False)", got, q.shape)
        compare(r, f"{name}, train=False, vs minibert", got, want,
                hint="with train=False there is no mask: the backward pass is plain attention's")
