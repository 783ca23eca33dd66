"""Layer normalisation over the last axis, forward and backward, with BERT's default eps."""
from __future__ import annotations

import numpy as np

from minibert import ops as L

from ..cases import layernorm as cases
from ..harness import as_array, compare, grad_check
from ..report import Report
from .common import bwd, forward_output, fwd, unpack

T = cases.TABLE
DEFAULT_EPS = cases.BERT_EPS    # the default of layernorm_forward's eps in the stub: BERT's layer_norm_eps
H = 7


def check(r: Report) -> None:
    rng = np.random.default_rng(2)
    eps = 1e-5   # large enough that an eps in the wrong place shows
    x = rng.standard_normal((2, 3, H)) * 3 + 1
    gamma, beta = rng.standard_normal(H), rng.standard_normal(H)
    want, _ = L.layernorm_forward(x, gamma, beta, eps)
    y, cache = fwd(r, "layernorm_forward", x, gamma, beta, eps)
    y = as_array(r, "y", y, x.shape, "y has x's shape: normalise over the last axis with keepdims=True")
    compare(r, "forward vs minibert", y, want, known=T.known(lambda m: m.layernorm_forward(x, gamma, beta, eps)[0]))
    _check_default_eps(r, rng)
    dy = rng.standard_normal(x.shape)
    right = _check_backward(r, x, gamma, beta, eps, dy, cache)
    _check_two_dimensional(r, x, gamma, beta, eps, dy, right)


def _check_default_eps(r: Report, rng) -> None:
    """eps left out: the stub's default, BERT's layer_norm_eps = 1e-12 (not PyTorch's 1e-5).

    With a variance of about 1e-6, eps = 1e-5 changes every output a lot, 1e-12 by 1e-6 at most.
    """
    xs = rng.standard_normal((4, H)) * 1e-3
    ones, zeros = np.ones(H), np.zeros(H)

    def no_eps(m):
        return m.layernorm_forward(xs, ones, zeros)[0]
    ys, _ = fwd(r, "layernorm_forward", xs, ones, zeros, hint=T.raised(no_eps))
    ys = as_array(r, "y without eps", ys, xs.shape)
    compare(r, f"y without eps (default {DEFAULT_EPS:g}) vs minibert", ys,
            L.layernorm_forward(xs, ones, zeros, DEFAULT_EPS)[0],
            hint=f"when eps is not passed, use BERT's default eps={DEFAULT_EPS:g}",
            known=T.known(no_eps), explain=lambda got: _default_eps_hint(xs, got))


def _default_eps_hint(x, y):
    """Name the eps a LayerNorm without eps used, from its output (gamma = 1, beta = 0), when no case has it.

    y = (x - mu) / sqrt(var + e), so mean(y^2) = var / (var + e), which gives e
    row by row; the rows agree when the forward is right but for its default eps.
    """
    var = x.var(-1)
    m2 = (np.asarray(y, dtype=np.float64) ** 2).mean(-1)
    e = var * (1.0 / m2 - 1.0)
    if not (np.isfinite(e).all() and (e > 1e-10).all() and e.max() < 1.05 * e.min()):
        return None
    return cases.DEFAULT_EPS.format(eps=f"about {float(np.median(e)):.1g}")


def _check_backward(r: Report, x, gamma, beta, eps, dy, cache) -> dict:
    """dx, dgamma, dbeta against the numerical gradient; which of y and them were right."""
    dx, dg, db = unpack(r, "layernorm_backward", bwd(r, "layernorm_backward", dy, cache), 3, "dx, dgamma, dbeta")
    dx = as_array(r, "dx", dx, x.shape)
    dg = as_array(r, "dgamma", dg, gamma.shape, "dgamma has shape (H,): sum over every axis but the last")
    db = as_array(r, "dbeta", db, beta.shape, "dbeta has shape (H,): sum over every axis but the last")
    f = forward_output(r, "layernorm_forward", x, gamma, beta, eps)
    right = {"y": True}
    for i, (name, param, got) in enumerate((("dx", x, dx), ("dgamma", gamma, dg), ("dbeta", beta, db))):
        known = T.known(lambda m, i=i: m.layernorm_backward(dy, m.layernorm_forward(x, gamma, beta, eps)[1])[i])
        right[name] = grad_check(r, name, f, param, dy, got, known=known)
    return right


def _check_two_dimensional(r: Report, x, gamma, beta, eps, dy, right: dict) -> None:
    """x is (..., H): any number of leading axes, here none but the rows.  A result already wrong for
    the 3-D x is not compared again: its failure above says all there is to say."""
    x2, dy2 = x.reshape(-1, H), dy.reshape(-1, H)
    leading = cases.THREE_D_ONLY.hint
    y2, cache2 = fwd(r, "layernorm_forward", x2, gamma, beta, eps,
                     hint=T.raised(lambda m: m.layernorm_forward(x2, gamma, beta, eps)))
    grads2 = unpack(r, "layernorm_backward", bwd(r, "layernorm_backward", dy2, cache2), 3, "dx, dgamma, dbeta")
    ref_y, ref_cache = L.layernorm_forward(x2, gamma, beta, eps)
    want2 = (ref_y,) + L.layernorm_backward(dy2, ref_cache)
    for name, got, ref in zip(("y", "dx", "dgamma", "dbeta"), (y2,) + tuple(grads2), want2):
        if not right[name]:
            continue
        got = as_array(r, f"{name} for a 2-D x", got, ref.shape, leading)
        compare(r, f"{name} for a 2-D x (6, {H}) vs minibert", got, ref, hint=leading)
