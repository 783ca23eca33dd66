"""One checker per exercise.

``run_check(name, module)`` runs the checker of exercise ``name`` on
``module`` (the student's file, the solution, or anything with the same
functions) and returns a ``Report``.  Layers are compared with minibert's
reference implementation and gradient-checked against central differences
of the student's own forward pass, in float64, with ``max_rel_error``
(the largest error relative to the largest entry) below 1e-7.  The data
exercises are checked against BERT's rules, structurally on every example
and statistically over many; AdamW against ``minibert.optim.AdamW`` to 1e-12.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from minibert import ops as L
from minibert.gradcheck import max_rel_error
from minibert.optim import AdamW
from minibert.model.params import ParamSpec, ParamStore

from .harness import (Abort, Forward, Report, as_array, call, call_each, call_watched, compare, diagnose, fresh,
                      grad_check, try_call)
from .sandbox import WorkerGone

CHECKS = {}


def checker(name):
    def register(func):
        CHECKS[name] = func
        return func
    return register


def run_check(name: str, module) -> Report:
    """Run the checker of exercise ``name`` on ``module``; never raises for the student's bugs."""
    report = Report(name, module)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            CHECKS[name](report)
    except Abort:
        report.stopped()
    except WorkerGone as gone:  # ran out of time, exited, crashed: nothing more can be asked of it
        report.fail(gone.message, gone.hint)
        report.stopped()
    except Exception as exc:  # a result the checker could not even inspect
        report.fail(f"could not use what the functions returned ({type(exc).__name__}: {exc})",
                    "compare the return values with what the stub's docstring asks for")
    return report


def unpack(r: Report, func: str, result, n: int, names: str):
    if not isinstance(result, (tuple, list)) or len(result) != n:
        got = f"a {type(result).__name__}" if not isinstance(result, (tuple, list)) else f"{len(result)} values"
        r.fail(f"{func} should return {n} values ({names}), got {got}",
               "return them as a tuple, in the order the docstring gives")
        raise Abort
    return result


def fwd(r: Report, func: str, *args, **kwargs):
    """Call a CS231n-style forward on copies of the arrays in ``args``; return (out, cache).

    A forward pass that changes one of its input arrays fails here, with a
    message saying so, rather than later in a gradient check.
    """
    args = [fresh(a) for a in args]
    roles = ["input" if isinstance(a, np.ndarray) else None for a in args]
    return unpack(r, func, call_watched(r, func, *args, roles=roles, **kwargs), 2, "out, cache")


def bwd(r: Report, func: str, upstream, cache, **kwargs):
    """Call a backward pass on a copy of the upstream gradient; it must change neither that nor the cache."""
    return call_watched(r, func, fresh(upstream), cache, roles=["upstream", "cache"], **kwargs)


def forward_output(r: Report, func: str, *args, **kwargs) -> Forward:
    """The function the gradient check differentiates: ``func(*args)[0]``, on fresh copies of ``args``."""
    return Forward(r.module, func, args, kwargs)


# =============================================================================== linear
@checker("linear")
def check_linear(r: Report) -> None:
    rng = np.random.default_rng(0)
    W = rng.standard_normal((3, 5))
    b = rng.standard_normal(3)
    for shape in [(4, 5), (2, 3, 5)]:
        x = rng.standard_normal(shape)
        want, _ = L.linear_forward(x, W, b)
        y, cache = fwd(r, "linear_forward", x, W, b)
        y = as_array(r, f"y for x of shape {shape}", y, want.shape,
                     "y has shape (..., out): x @ W.T, since W is stored as (out, in)")
        compare(r, f"forward, x {shape}, vs minibert", y, want,
                known=[(x @ W.T, "the bias b is missing from y"),
                       (x @ W.T - b, "add the bias, do not subtract it")])
        dy = rng.standard_normal(want.shape)
        dx, dW, db = unpack(r, "linear_backward", bwd(r, "linear_backward", dy, cache), 3, "dx, dW, db")
        dx = as_array(r, "dx", dx, x.shape, "dx has x's shape: dy @ W")
        dW = as_array(r, "dW", dW, W.shape,
                      "dW has W's shape (out, in): flatten to 2-D, then dy^T @ x (not x^T @ dy)")
        db = as_array(r, "db", db, b.shape,
                      "db has b's shape (out,): sum dy over every axis but the last")
        dy2 = dy.reshape(-1, 3)
        x2 = x.reshape(-1, 5)
        f = forward_output(r, "linear_forward", x, W, b)
        grad_check(r, f"dx, x {shape}", f, x, dy, dx)
        summed = "dW is the SUM over the rows of dy^T @ x, not the mean: do not divide by the number of rows"
        known_dW = [(dy2.T @ x2 / len(x2), summed)]
        known_db = [(dy2.mean(axis=0), "db is the SUM of dy over the rows, not the mean: "
                                       "the bias is added to every row")]
        if len(shape) > 2:
            flatten = "with x of shape (B, T, in), flatten x and dy to 2-D before dy^T @ x"
            known_dW += [(dy[0].T @ x[0], flatten), (dy[-1].T @ x[-1], flatten),
                         (dy2.T @ x2 / shape[0], summed)]
            known_db += [(dy[0].sum(axis=0), "db sums dy over every leading axis (B and T), "
                                             "not only the first sequence: flatten dy to 2-D first")]
        grad_check(r, f"dW, x {shape}", f, W, dy, dW, known=known_dW)
        grad_check(r, f"db, x {shape}", f, b, dy, db, known=known_db)


# ============================================================================ embedding
@checker("embedding")
def check_embedding(r: Report) -> None:
    rng = np.random.default_rng(1)
    V, H = 11, 6
    ids = np.array([[1, 4, 4, 0, 0], [10, 1, 0, 3, 4]])   # repeated ids, and [PAD] = 0
    W = rng.standard_normal((V, H))
    out, cache = fwd(r, "embedding_forward", ids, W)
    out = as_array(r, "out", out, (2, 5, H), "out[b, t] = W[ids[b, t]] has shape (B, T, H)")
    compare(r, "forward vs minibert", out, L.embedding_forward(ids, W)[0],
            hint="out[b, t] is the row W[ids[b, t]]: index the table with the ids (W[ids])")
    dout = rng.standard_normal(out.shape)

    overwrite = np.zeros_like(W)
    overwrite[ids] = dout            # the fancy-index mistake: repeated ids keep one row
    ref_cache = L.embedding_forward(ids, W)[1]
    for padding_idx in (None, 0):
        dW = bwd(r, "embedding_backward", dout, cache, padding_idx=padding_idx)
        dW = as_array(r, f"dW (padding_idx={padding_idx})", dW, W.shape, "dW has W's shape (V, H)")
        wrong_overwrite = overwrite.copy()
        wrong_keep_pad = L.embedding_backward(dout, ref_cache)   # [PAD] row not zeroed
        if padding_idx is not None:
            wrong_overwrite[padding_idx] = 0
        known = [(wrong_overwrite, "a repeated id must get the SUM of its rows of dout; "
                                   "dW[ids] += dout keeps only one of them (use np.add.at)")]
        if padding_idx is not None:
            known.append((wrong_keep_pad, f"the row padding_idx={padding_idx} ([PAD]) must get a "
                                          "zero gradient: set it to 0 at the end"))
        else:
            known.append((L.embedding_backward(dout, ref_cache, padding_idx=0),
                          "with padding_idx=None every row gets its gradient, row 0 included"))
        grad_check(r, f"dW (padding_idx={padding_idx})", forward_output(r, "embedding_forward", ids, W),
                   W, dout, dW, known=known, zero_rows=padding_idx)


# ============================================================================ layernorm
@checker("layernorm")
def check_layernorm(r: Report) -> None:
    rng = np.random.default_rng(2)
    eps = 1e-5   # large enough that an eps in the wrong place shows
    H = 7
    x = rng.standard_normal((2, 3, H)) * 3 + 1
    gamma = rng.standard_normal(H)
    beta = rng.standard_normal(H)
    want, _ = L.layernorm_forward(x, gamma, beta, eps)
    rstd = 1.0 / np.sqrt(x.var(-1, keepdims=True) + eps)
    xhat = (x - x.mean(-1, keepdims=True)) * rstd
    y, cache = fwd(r, "layernorm_forward", x, gamma, beta, eps)
    y = as_array(r, "y", y, x.shape, "y has x's shape: normalise over the last axis with keepdims=True")
    mu = x.mean(-1, keepdims=True)
    known = [
        (gamma * (x - mu) / x.std(-1, ddof=1, keepdims=True) + beta,
         "use the biased variance (divide by H, np.var's default ddof=0), not ddof=1"),
        (gamma * (x - mu) / (x.std(-1, keepdims=True) + eps) + beta,
         "eps goes inside the square root: sqrt(var + eps)"),
        ((x - mu) * rstd, "scale by gamma and shift by beta after normalising"),
        (gamma * (x - x.mean()) / x.std() + beta,
         "normalise each row over the last axis (axis=-1, keepdims=True), not the whole array"),
        (gamma * (x - mu) / np.sqrt(x.var(-1, keepdims=True) + 1e-12) + beta,
         "use the eps argument (here 1e-5), not a fixed value"),
        (gamma * (x - mu) / np.sqrt(H * x.var(-1, keepdims=True) + eps) + beta,
         "the variance is the MEAN of (x - mu)^2 over the H features (divide the sum by H), not the sum"),
    ]
    batchnorm = ("normalise each token's own vector, over its H features (axis=-1): statistics over "
                 "the batch axis mix different examples, which is batch normalisation, not layer "
                 "normalisation")
    for axes in (0, (0, 1)):
        m_, v_ = x.mean(axes, keepdims=True), x.var(axes, keepdims=True)
        known.append((gamma * (x - m_) / np.sqrt(v_ + eps) + beta, batchnorm))
    compare(r, "forward vs minibert", y, want, known=known)

    # ---- eps left out: the stub's default, BERT's layer_norm_eps = 1e-12 (not PyTorch's 1e-5).
    # With a variance of about 1e-6, eps = 1e-5 changes every output a lot, 1e-12 by 1e-6 at most.
    xs = rng.standard_normal((4, H)) * 1e-3
    ones, zeros = np.ones(H), np.zeros(H)
    no_eps = ("call layernorm_forward(x, gamma, beta) without eps must work: keep the stub's "
              f"signature, eps={LAYERNORM_DEFAULT_EPS:g}")
    ys, _ = fwd(r, "layernorm_forward", xs, ones, zeros,
                hint=lambda exc: no_eps if isinstance(exc, TypeError) else _LN_AXIS if "axis" in str(exc) else None)
    ys = as_array(r, "y without eps", ys, xs.shape)
    compare(r, f"y without eps (default {LAYERNORM_DEFAULT_EPS:g}) vs minibert", ys,
            L.layernorm_forward(xs, ones, zeros, LAYERNORM_DEFAULT_EPS)[0],
            hint=f"when eps is not passed, use BERT's default eps={LAYERNORM_DEFAULT_EPS:g}",
            explain=lambda got: _default_eps_hint(xs, got))

    dy = rng.standard_normal(x.shape)
    dx, dg, db = unpack(r, "layernorm_backward", bwd(r, "layernorm_backward", dy, cache),
                        3, "dx, dgamma, dbeta")
    dx = as_array(r, "dx", dx, x.shape)
    dg = as_array(r, "dgamma", dg, gamma.shape, "dgamma has shape (H,): sum over every axis but the last")
    db = as_array(r, "dbeta", db, beta.shape, "dbeta has shape (H,): sum over every axis but the last")
    g = dy * gamma
    mean = lambda a: a.mean(-1, keepdims=True)
    known_dx = [
        (rstd * (g - xhat * mean(g * xhat)),
         "dx is missing the mean term: dx = r * (g - mean(g) - xhat * mean(g * xhat)); "
         "the '- mean(g)' comes from the path through mu"),
        (rstd * (g - mean(g)),
         "dx is missing the variance term '- xhat * mean(g * xhat)' (the path through var)"),
        (rstd * g, "dx needs both correction terms: r * (g - mean(g) - xhat * mean(g * xhat))"),
        (rstd * (dy - mean(dy) - xhat * mean(dy * xhat)),
         "multiply dy by gamma first: g = dy * gamma is the gradient with respect to xhat"),
    ]
    f = forward_output(r, "layernorm_forward", x, gamma, beta, eps)
    right = {"y": True}
    right["dx"] = grad_check(r, "dx", f, x, dy, dx, known=known_dx)
    right["dgamma"] = grad_check(r, "dgamma", f, gamma, dy, dg, known=[
        ((dy * xhat).sum(axis=(0, 1)) / 6, "sum over the rows, do not average"),
        (dy.sum(axis=(0, 1)), "dgamma is the sum of dy * xhat: y = gamma * xhat + beta, so gamma's "
                              "gradient carries xhat (dbeta is the one without it)"),
    ])
    right["dbeta"] = grad_check(r, "dbeta", f, beta, dy, db,
                                known=[(dy.mean(axis=(0, 1)), "dbeta is the sum of dy over the rows, not the mean")])

    # ---- x is (..., H): any number of leading axes, here none but the rows.  A result already
    # wrong for the 3-D x is not compared again: its failure above says all there is to say.
    x2, dy2 = x.reshape(-1, H), dy.reshape(-1, H)
    leading = "x is (..., H): sum dgamma and dbeta over every axis but the last, however many there are"
    y2, cache2 = fwd(r, "layernorm_forward", x2, gamma, beta, eps,
                     hint=lambda exc: _LN_AXIS if "axis" in str(exc) else None)
    grads2 = unpack(r, "layernorm_backward", bwd(r, "layernorm_backward", dy2, cache2), 3, "dx, dgamma, dbeta")
    want2 = (want.reshape(-1, H),) + L.layernorm_backward(dy2, L.layernorm_forward(x2, gamma, beta, eps)[1])
    for name, got, ref in zip(("y", "dx", "dgamma", "dbeta"), (y2,) + tuple(grads2), want2):
        if not right[name]:
            continue
        got = as_array(r, f"{name} for a 2-D x", got, ref.shape, leading)
        compare(r, f"{name} for a 2-D x (6, {H}) vs minibert", got, ref, hint=leading)


LAYERNORM_DEFAULT_EPS = 1e-12   # the default of layernorm_forward's eps in the stub: BERT's layer_norm_eps
_LN_AXIS = ("x is (..., H), here 2-D: normalise over axis=-1, the last axis whatever the number of axes, "
            "not a fixed axis=2")


def _default_eps_hint(x, y):
    """Name the eps a LayerNorm without eps used, from its output (gamma = 1, beta = 0).

    y = (x - mu) / sqrt(var + e), so mean(y^2) = var / (var + e), which gives e
    row by row; the rows agree when the forward is right but for its default eps.
    """
    var = x.var(-1)
    m2 = (np.asarray(y, dtype=np.float64) ** 2).mean(-1)
    e = var * (1.0 / m2 - 1.0)
    if not (np.isfinite(e).all() and (e > 1e-10).all() and e.max() < 1.05 * e.min()):
        return None
    e = float(np.median(e))
    known = {1e-5: " (PyTorch's nn.LayerNorm default)", 1e-3: " (Keras' LayerNormalization default)",
             1e-6: "", 1e-8: ""}
    name = next((f"{k:g}{v}" for k, v in known.items() if abs(e - k) < 0.02 * k), f"about {e:.1g}")
    return (f"called without eps, your layernorm_forward uses eps = {name}; BERT's default is "
            f"{LAYERNORM_DEFAULT_EPS:g} (layer_norm_eps): make eps={LAYERNORM_DEFAULT_EPS:g} the default")


# ================================================================================= gelu
@checker("gelu")
def check_gelu(r: Report) -> None:
    rng = np.random.default_rng(3)
    x = np.concatenate([np.linspace(-5, 5, 21), rng.standard_normal(15) * 2]).reshape(4, 9)
    want, _ = L.gelu_forward(x, "none")
    y, cache = fwd(r, "gelu_forward", x)
    y = as_array(r, "y", y, x.shape)
    tanh_form, _ = L.gelu_forward(x, "tanh")
    compare(r, "forward vs minibert (exact GELU)", y, want, known=[
        (tanh_form, "that is the tanh approximation; write the exact x * Phi(x) with "
                    "Phi(x) = (1 + erf(x / sqrt(2))) / 2"),
        (np.maximum(x, 0), "that is ReLU; BERT uses GELU(x) = x * Phi(x)"),
        (x / (1 + np.exp(-1.702 * x)), "that is the sigmoid approximation x * sigmoid(1.702 x); "
                                       "write the exact x * Phi(x)"),
        (x * 0.5 * (1 + _erf(x)), "erf's argument is x / sqrt(2), not x"),
        (x * 0.5 * (1 + _erf(x / 2)), "erf's argument is x / sqrt(2), not x / 2: "
                                      "Phi(x) = (1 + erf(x / sqrt(2))) / 2"),
    ])
    dy = rng.standard_normal(x.shape)
    dx = as_array(r, "dx", bwd(r, "gelu_backward", dy, cache), x.shape)
    cdf = 0.5 * (1 + _erf(x / math.sqrt(2)))
    grad_check(r, "dx", forward_output(r, "gelu_forward", x), x, dy, dx, known=[
        (dy * cdf, "the product rule: d/dx [x Phi(x)] = Phi(x) + x phi(x); the x phi(x) term is missing"),
        (dy * (cdf + x * np.exp(-x * x / 2)),
         "phi(x) = exp(-x^2 / 2) / sqrt(2 pi): the 1 / sqrt(2 pi) is missing"),
        (cdf + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi),
         "multiply the local derivative by dy (the chain rule)"),
        (dy * (cdf + x * np.exp(-x * x) / math.sqrt(2 * math.pi)),
         "the density's exponent is -x^2 / 2, not -x^2: phi(x) = exp(-x^2 / 2) / sqrt(2 pi)"),
        (dy * _gelu_tanh_derivative(x),
         "that is the derivative of the tanh approximation; the exact GELU's derivative is "
         "Phi(x) + x phi(x), with phi(x) = exp(-x^2 / 2) / sqrt(2 pi)"),
    ])


def _gelu_tanh_derivative(x):
    """d/dx of 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3): the approximation's derivative."""
    c = math.sqrt(2 / math.pi)
    t = np.tanh(c * (x + 0.044715 * x ** 3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x)


def _erf(x):
    from scipy.special import erf
    return erf(x)


# ============================================================================== softmax
@checker("softmax")
def check_softmax(r: Report) -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 4, 6)) * 5
    want, _ = L.softmax_forward(x)
    p, cache = fwd(r, "softmax_forward", x)
    p = as_array(r, "p", p, x.shape)
    e = np.exp(x)
    compare(r, "forward vs minibert", p, want, known=[
        (e / e.sum(axis=0, keepdims=True), "normalise over the last axis (axis=-1), not axis 0"),
        (e / e.sum(), "normalise each row separately: sum over axis=-1 with keepdims=True"),
    ])
    # the last row lies 2000 below the first: only its OWN maximum keeps its exp away from 0
    big = np.array([[1000.0, 1000.0, -1000.0], [-1000.0, 0.0, 1000.0], [-1000.0, -1001.0, -1002.0]])
    pb, _ = fwd(r, "softmax_forward", big)
    pb = np.asarray(pb, dtype=np.float64)
    stable = pb.shape == big.shape and np.isfinite(pb).all()
    r.require(stable, "finite for scores like +-1000 (no overflow, no 0/0)",
              "exp(1000) is inf: subtract the row maximum before exp (it cancels out); each row's own "
              "maximum, x.max(axis=-1, keepdims=True), not that of the whole array or of |x|")
    compare(r, "forward for scores like 1000", pb, L.softmax_forward(big)[0])

    dp = rng.standard_normal(x.shape)
    dx = as_array(r, "dx", bwd(r, "softmax_backward", dp, cache), x.shape)
    grad_check(r, "dx", forward_output(r, "softmax_forward", x), x, dp, dx, known=[
        (want * (1 - want) * dp,
         "that is only the diagonal of the Jacobian: every p_i depends on every x_j, "
         "dx_j = p_j (dp_j - sum_i dp_i p_i)"),
        (dp - (dp * want).sum(-1, keepdims=True), "multiply by p: dx_j = p_j (dp_j - sum_i dp_i p_i)"),
        (want * dp, "p * dp is missing the term that subtracts sum_i dp_i p_i: "
                    "dx_j = p_j (dp_j - sum_i dp_i p_i), because p_j depends on every x"),
        (want * (dp - (dp * want).sum(0, keepdims=True)), "the sum runs over the last axis"),
        (want * (dp - dp.sum(-1, keepdims=True)),
         "the sum inside is sum_i dp_i p_i, each dp_i weighted by p_i (the chain rule through every "
         "p_i), not sum_i dp_i: dx_j = p_j (dp_j - sum_i dp_i p_i)"),
    ])


# ============================================================================ attention
def _softmax_axis(s, axis=-1):
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _attention_weights(module, func, q, k, *args, **kwargs):
    """The student's attention weights P, read through v = the identity (out = P I = P); None if that fails.

    ``func(q, k, v, *args, **kwargs)`` must return (out, cache).  Only for a
    diagnosis: an exception or an odd result gives None, never a report line.
    """
    B, A, T, _ = q.shape
    v = np.broadcast_to(np.eye(T), (B, A, T, T)).copy()
    res = try_call(module, func, q.copy(), k.copy(), v, *args, **kwargs)
    try:
        out = np.asarray(res[0], dtype=np.float64)
    except Exception:
        return None
    return out if out.shape == (B, A, T, T) else None


def _float32_hint(P, P_ref):
    """The hint for attention weights computed in float32, if every weight is a float32 number."""
    if P is None or not np.isfinite(P).all():
        return None
    as32 = lambda a: a.astype(np.float32).astype(np.float64)
    if np.array_equal(as32(P), P) and not np.array_equal(as32(P_ref), P_ref):
        return ("every attention weight is a float32 number: the scores or the probabilities are computed "
                "in float32 somewhere (astype(np.float32), dtype=np.float32). float32 rounds by about 1e-7, "
                "as much as the check's tolerance, so the gradient check sees only noise: keep float64")
    return None


@checker("attention")
def check_attention(r: Report) -> None:
    rng = np.random.default_rng(5)
    B, A, T, D = 2, 2, 5, 4
    q, k, v = (rng.standard_normal((B, A, T, D)) for _ in range(3))
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    bias = L.attention_mask_bias(mask, np.float64)
    want, _ = L.attention_forward(q, k, v, bias)

    def soft(s):
        return L.softmax_forward(s)[0]
    S = q @ k.swapaxes(-1, -2)
    Ss = S / math.sqrt(D)
    keep = mask[:, None, None, :]
    pad = 1.0 - keep
    big = np.finfo(np.float64).min
    P_ref = soft(Ss + bias)
    # +big at the padded keys and -big at the real ones differ by the same constant in every row,
    # which the softmax cancels: one mistake, one hint
    turned = ("the mask is turned around: it pushes padded keys UP against the real ones. The very "
              "NEGATIVE number goes to the padded keys (attention_mask == 0) and 0 to the real ones: "
              "bias = (1 - mask) * np.finfo(q.dtype).min (or * -10000)")
    query_axis = ("the softmax runs over the keys, the last axis of S (axis=-1): each query's weights "
                  "sum to 1. Over axis -2 each key's weights sum to 1 over the queries")
    known = [
        (soft(Ss) * keep @ v,
         "the mask is applied after the softmax: the kept weights no longer sum to 1. "
         "Add a very negative number to the scores of padded keys BEFORE the softmax"),
        (soft(S + bias) @ v, "divide the scores by sqrt(D), the head size"),
        (soft(S / D + bias) @ v, "divide the scores by sqrt(D), not by D"),
        (soft(S / math.sqrt(A * D) + bias) @ v,
         f"divide by sqrt(D), the size of ONE head (q.shape[-1] = {D}), not by sqrt(H) of the whole hidden "
         f"state (A * D = {A * D})"),
        (soft(Ss) @ v, "the padding mask is not applied"),
        (soft(Ss + bias.swapaxes(-1, -2)) @ v,
         "the mask hides KEYS (the last axis of the scores): reshape it to (B, 1, 1, T)"),
        (soft(Ss - bias) @ v, turned), (soft(Ss + 1e4 * pad) @ v, turned),
        (soft(Ss + keep * big) @ v, turned), (soft(Ss - 1e4 * keep) @ v, turned),
        (soft(Ss + keep) @ v,
         "the 0/1 attention_mask is added to the scores as it is: turn it into a bias first, 0 for a "
         "real key and a very negative number for a padded one ((1 - mask) * np.finfo(q.dtype).min)"),
        (_softmax_axis(Ss + bias, -2) @ v, query_axis), (_softmax_axis(Ss - 1e4 * pad, -2) @ v, query_axis),
    ]
    weights = {}

    def float32_weights(_got=None):
        """Diagnosis by the weights themselves (read once, through v = I)."""
        if "f32" not in weights:
            weights["f32"] = _float32_hint(_attention_weights(r.module, "attention_forward", q, k, mask),
                                           P_ref)
        return weights["f32"]

    out, cache = fwd(r, "attention_forward", q, k, v, mask)
    out = as_array(r, "out", out, want.shape, "out has q's shape (B, A, T, D)")
    compare(r, "forward vs minibert", out, want, known=known, explain=float32_weights)

    qb = q * 1000                # scores beyond 709, where exp overflows without the row maximum
    ob, _ = fwd(r, "attention_forward", qb, k, v, mask)
    stable = "subtract each row's maximum score before exp, as in the softmax exercise: exp(1000) is inf"
    ob = as_array(r, "out for scores of size ~1000", ob, want.shape, stable)
    compare(r, "forward for scores of size ~1000", ob, L.attention_forward(qb, k, v, bias)[0], hint=stable)

    v2 = v.copy()
    v2[1, :, 3:, :] = 1e3        # whatever sits at padded positions must not leak in
    out2, _ = fwd(r, "attention_forward", q, k, v2, mask)
    r.expect(np.allclose(np.asarray(out2, dtype=np.float64), out, rtol=1e-9, atol=1e-9),
             "changing v at padded positions leaves out unchanged",
             "padded keys must get exactly zero attention weight")

    # ---- a batch with a sequence that is padding only (it happens: an empty document, a short
    # last batch padded out).  Its output may be anything finite: the mean of v with
    # np.finfo.min (every score ties), softmax(S) v with google-research/bert's -10000.
    dead_mask = np.array([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0]])
    od, cd = fwd(r, "attention_forward", q, k, v, dead_mask)
    od = as_array(r, "out with a fully padded sequence", od, want.shape, finite=False)
    finite = bool(np.isfinite(od).all())
    nan_in_dead_only = bool(np.isfinite(od[0]).all()) and not finite
    if finite:
        dead_hint = None
    elif float32_weights():     # np.finfo(np.float64).min is -inf in float32: the same NaN
        dead_hint = float32_weights() + " (in float32, np.finfo(np.float64).min becomes -inf, hence the NaN)"
    elif nan_in_dead_only:
        dead_hint = ("a sequence whose every key is padding gives NaN: with -inf as the mask value each of "
                     "its scores is -inf, the row maximum is -inf, and -inf - (-inf) = NaN (notebook 03). "
                     "Mask with a large finite negative number instead: np.finfo(q.dtype).min (or -10000, "
                     "as google-research/bert does)")
    else:
        dead_hint = ("the output holds NaN or inf when one sequence of the batch is all padding: keep the "
                     "mask value finite and never divide by a sum of weights that can be 0")
    r.require(finite, "a fully padded sequence gives a finite output (no NaN)", dead_hint)
    ref_dead = L.attention_forward(q, k, v, L.attention_mask_bias(dead_mask, np.float64))[0]
    compare(r, "the other sequence of that batch vs minibert", od[0], ref_dead[0],
            hint="a fully padded sequence must not change the output of the other sequences of the batch")
    dd = unpack(r, "attention_backward", bwd(r, "attention_backward", rng.standard_normal(want.shape), cd),
                3, "dq, dk, dv")
    for n, g in zip(("dq", "dk", "dv"), dd):
        as_array(r, f"{n} with a fully padded sequence", g, q.shape,
                 "the backward pass gives NaN or inf for a fully padded sequence: never divide by a sum "
                 "of weights that can be 0, keep the mask value finite")
    r.ok("dq, dk, dv are finite with a fully padded sequence")

    dout = rng.standard_normal(out.shape)
    grads = unpack(r, "attention_backward", bwd(r, "attention_backward", dout, cache),
                   3, "dq, dk, dv")
    dq, dk, dv = (as_array(r, n, g, q.shape) for n, g in zip(("dq", "dk", "dv"), grads))
    rq, rk, rv = L.attention_backward(dout, L.attention_forward(q, k, v, bias)[1])
    uq, uk, uv = L.attention_backward(dout, L.attention_forward(q, k, v, 0 * bias)[1])   # without the mask
    P = P_ref
    dP = dout @ v.swapaxes(-1, -2)
    dS = P * (dP - (dP * P).sum(-1, keepdims=True)) / math.sqrt(D)
    dS_q = P * (dP - (dP * P).sum(-2, keepdims=True)) / math.sqrt(D)        # summed over the queries
    no_scale = "the backward pass of S = q k^T / sqrt(D) also divides by sqrt(D)"
    no_mask = ("the backward pass must use the masked P of the forward pass (keep it in the cache): "
               "without the mask, padded keys get weight and gradient")
    transpose_dS = ("dk = dS^T q / sqrt(D): transpose dS (swapaxes(-1, -2)), "
                    "since S = q k^T holds k transposed")
    sum_axis = ("the softmax backward sums dP * P over the keys, the axis the softmax normalised "
                "(axis=-1, keepdims=True), not over the queries")
    f = forward_output(r, "attention_forward", q, k, v, mask)
    grad_check(r, "dq", f, q, dout, dq, known=[
        (rq * math.sqrt(D), no_scale), (uq, no_mask),
        (rq * mask[:, None, :, None], "the mask hides keys only: a padded query still has an output, "
                                      "so its dq is not zero; do not mask dq"),
        (dS_q @ k, sum_axis),
    ], explain=float32_weights)
    grad_check(r, "dk", f, k, dout, dk, known=[(rk * math.sqrt(D), no_scale), (uk, no_mask),
                                                (dS @ q, transpose_dS), (rq, transpose_dS),
                                                (dS_q.swapaxes(-1, -2) @ q, sum_axis)],
               explain=float32_weights)
    grad_check(r, "dv", f, v, dout, dv, known=[
        (uv, no_mask),
        (P @ dout, "dv = P^T dout: transpose P (swapaxes(-1, -2)); out = P v sums over the keys"),
    ], explain=float32_weights)


# ======================================================================== cross_entropy
@checker("cross_entropy")
def check_cross_entropy(r: Report) -> None:
    rng = np.random.default_rng(6)
    N, C = 9, 7
    logits = rng.standard_normal((N, C)) * 3
    labels = rng.integers(0, C, N)
    labels[[1, 4, 5]] = -100
    valid = labels != -100
    want, _ = L.softmax_cross_entropy_forward(logits, labels)
    want = float(want)
    idx_hint = ("-100 is not a class index: replace ignored labels by 0 before indexing "
                "(np.where(valid, labels, 0)), then zero their terms with the mask")
    loss, cache = fwd(r, "softmax_cross_entropy_forward", logits, labels, hint=idx_hint)
    loss = as_array(r, "loss", loss, (), "the loss is one number (a float or a 0-d array)")
    n_valid = int(valid.sum())
    compare(r, "loss vs minibert", loss, want, known=[
        (want * n_valid / N, "average over the labelled rows only: divide by the number of labels "
                             "that are not ignore_index, not by N"),
        (want * n_valid, "the loss is the mean over the labelled rows, not the sum"),
    ], hint="loss = -mean over labelled rows of log softmax(logits)[row, label]")

    big = logits * 300
    lb, _ = fwd(r, "softmax_cross_entropy_forward", big, labels, hint=idx_hint)
    lb = np.asarray(lb, dtype=np.float64)
    r.require(lb.shape == () and np.isfinite(lb), "finite loss for logits of size ~1000",
              "compute log-softmax as z - log(sum(exp(z))) with z = logits - row max; "
              "log(softmax) underflows to log(0)")
    compare(r, "loss for logits of size ~1000", lb, float(L.softmax_cross_entropy_forward(big, labels)[0]))

    none = np.full(N, -100)
    l0, c0 = fwd(r, "softmax_cross_entropy_forward", logits, none, hint=idx_hint)
    l0 = np.asarray(l0, dtype=np.float64)
    r.require(l0.shape == () and l0 == 0.0, "loss is 0 when every label is ignored",
              "with no labelled row, divide by max(n_valid, 1) so the loss is 0, not NaN")
    d0 = as_array(r, "dlogits with every label ignored", bwd(r, "softmax_cross_entropy_backward", 1.0, c0),
                  logits.shape, "with no labelled row the gradient is 0: divide by max(n_valid, 1)")
    r.expect(not d0.any(), "zero gradient when every label is ignored",
             "ignored rows get zero gradient: multiply each row of the gradient by its 0/1 'valid' mask "
             "(here every row is ignored, so dlogits must be all 0)")

    dloss = 1.7
    dl = as_array(r, "dlogits", bwd(r, "softmax_cross_entropy_backward", dloss, cache), logits.shape)
    r.expect(not dl[~valid].any(), "ignored rows get exactly zero gradient",
             "multiply each row of the gradient by its 0/1 'valid' mask")
    p = L.softmax_forward(logits)[0]
    onehot = np.zeros_like(p)
    onehot[np.arange(N), np.where(valid, labels, 0)] = 1
    f = forward_output(r, "softmax_cross_entropy_forward", logits, labels)
    grad_check(r, "dlogits (dloss = 1.7)", f, logits, dloss, dl, known=[
        (dloss * (p - onehot) / n_valid, "ignored rows must get zero gradient"),
        ((p - onehot) * valid[:, None] / n_valid, "multiply the gradient by dloss"),
        (dloss * (p - onehot) * valid[:, None] / N,
         "the gradient divides by n_valid, the number of labelled rows, not by N: it is the gradient "
         "of the mean over the labelled rows"),
        (dloss * (p - onehot) * valid[:, None],
         "the 1/n_valid of the mean is missing: dlogits = dloss * (softmax - onehot) / n_valid "
         "on the labelled rows"),
        (dloss * (p - onehot) * valid[:, None] / n_valid ** 2,
         "divide by n_valid once: the gradient of the mean carries 1/n_valid a single time"),
    ])

    # ---- the backward pass for logits of size ~1000, once it is right for ordinary ones: a
    # difference here can only come from exp overflowing (a non-finite result says so)
    _, cb = fwd(r, "softmax_cross_entropy_forward", big, labels, hint=idx_hint)
    stable = ("the backward pass must be stable too: take softmax = exp(log p) from the log-softmax of "
              "the forward pass, or subtract the row maximum again; exp(logits) overflows")
    db_ = as_array(r, "dlogits for logits of size ~1000", bwd(r, "softmax_cross_entropy_backward", 1.0, cb),
                   big.shape, stable)
    compare(r, "dlogits for logits of size ~1000", db_,
            L.softmax_cross_entropy_backward(1.0, L.softmax_cross_entropy_forward(big, labels)[1]),
            hint="subtract each row's maximum before exp in the backward pass too; the values are right "
                 "for ordinary logits but not for large ones")

    # ---- another ignore_index: the argument, not the constant -100, says which rows do not count.
    # The same rows are ignored, so the results must be the student's own from above (right or
    # wrong): a difference can only come from how ignore_index is used.  C = 7 is not a class,
    # which the docstring allows: "each a class in [0, C) or ignore_index".
    for ignore in (-1, C):
        use_it = (f"compare the labels with the ignore_index argument (here {ignore}), "
                  "not with the constant -100; then replace the ignored labels by 0 before indexing")
        other = np.where(valid, labels, ignore)
        li, ci = fwd(r, "softmax_cross_entropy_forward", logits, other, ignore_index=ignore, hint=use_it)
        li = as_array(r, f"loss with ignore_index={ignore}", li, ())
        compare(r, f"loss, ignore_index={ignore} vs -100", li, loss, hint=use_it)
        di = as_array(r, f"dlogits with ignore_index={ignore}",
                      bwd(r, "softmax_cross_entropy_backward", dloss, ci), logits.shape)
        compare(r, f"dlogits, ignore_index={ignore} vs -100", di, dl, hint=use_it)


# ============================================================================== dropout
def _seeded_output(r: Report, func: str, *args, seed: int, **kwargs):
    """``func(*args, rng)[0]`` with a new generator of the same seed at every call, on copies of ``args``.

    What the gradient check differentiates: with the same seed the mask is the
    same at every call, so the forward pass is a fixed function of its input.
    """
    return Forward(r.module, func, args, kwargs, seed=seed)


def _near(values, target, rtol=1e-9) -> bool:
    return values.size > 0 and bool(np.allclose(values, target, rtol=rtol, atol=0.0))


def _scale_hint(ratio, p, what="entries"):
    """Why kept values are not x / (1 - p), from their ratio to x (None if no known reason)."""
    if _near(ratio, 1.0):
        return (f"the kept {what} are not scaled: inverted dropout multiplies them by 1/(1 - p) at TRAINING "
                "time, so that E[out] = x and evaluation is the identity (no scaling at eval)")
    if _near(ratio, 1.0 - p):
        return (f"the kept {what} are scaled by (1 - p); the scale is 1/(1 - p), so that "
                "E[out] = (1 - p) * x / (1 - p) = x")
    if _near(ratio, 1.0 / p):
        return (f"the kept {what} are scaled by 1/p: p is the probability of DROPPING, so keep with "
                "probability 1 - p and scale by 1/(1 - p)")
    return None


def _drop_share_hint(share, p, what="entries"):
    if share == 0:
        return f"nothing was dropped with train=True: drop each of the {what} with probability p"
    if abs(share - (1 - p)) < 0.05:
        return (f"p is the probability of DROPPING (BERT's 0.1 drops 10%): {share:.2f} of the {what} were "
                f"dropped with p = {p}; keep an entry where rng.random() >= p")
    return f"drop each of the {what} with probability p (here {p}): keep where rng.random(shape) >= p"


@checker("dropout")
def check_dropout(r: Report) -> None:
    rng = np.random.default_rng(11)
    p = 0.1
    x = rng.standard_normal((100, 100))
    x[x == 0.0] = 1.0                      # every entry non-zero: a zero in out means dropped

    # ---- training: each entry is 0 or x / (1 - p), about p of them 0, each on its own draw
    out, _ = fwd(r, "dropout_forward", x, p, np.random.default_rng(1), train=True)
    out = as_array(r, "out (train=True)", out, x.shape, "out has x's shape")
    dropped = out == 0.0
    ratio = out[~dropped] / x[~dropped]
    r.expect(_near(ratio, 1.0 / (1.0 - p), 1e-12), "train=True: every entry is 0 or x / (1 - p)",
             _scale_hint(ratio, p) or "in training each entry is either 0 (dropped) or x / (1 - p) (kept)")
    same_rows = float((dropped == dropped[0]).all(axis=1).mean())
    same_cols = float((dropped == dropped[:, :1]).all(axis=0).mean())
    r.expect(same_rows < 0.5 and same_cols < 0.5, "each entry is dropped on its own draw",
             "draw one number per ENTRY of x, rng.random(x.shape), not one per row or per feature: "
             "a mask broadcast over a whole axis drops whole rows or columns at once")
    share = float(dropped.mean())
    r.expect(abs(share - p) < 0.015, f"{share:.3f} of the entries dropped with p = {p}",
             _drop_share_hint(share, p))
    out3, _ = fwd(r, "dropout_forward", x, 0.3, np.random.default_rng(2), train=True)
    out3 = as_array(r, "out (train=True, p=0.3)", out3, x.shape)
    share3 = float((out3 == 0.0).mean())
    kept3 = out3 != 0.0
    right3 = abs(share3 - 0.3) < 0.02 and _near(out3[kept3] / x[kept3], 1 / 0.7, 1e-12)
    r.expect(right3, f"p = 0.3: {share3:.3f} dropped, the rest x / 0.7",
             "use the p argument, not a fixed 0.1" if abs(share3 - p) < 0.02 else
             _scale_hint(out3[kept3] / x[kept3], 0.3) or _drop_share_hint(share3, 0.3))

    # ---- the mask comes from rng: the same seed, the same mask; another seed, another mask
    again, _ = fwd(r, "dropout_forward", x, p, np.random.default_rng(1), train=True)
    other, _ = fwd(r, "dropout_forward", x, p, np.random.default_rng(7), train=True)
    again = as_array(r, "out (train=True, the same seed)", again, x.shape)
    other = as_array(r, "out (train=True, another seed)", other, x.shape)
    r.expect(np.array_equal(again, out) and not np.array_equal(other == 0.0, dropped),
             "the same seed gives the same mask, another seed another",
             "draw every random number from the rng argument (not np.random.*, not a generator of your "
             "own with a fixed seed)")

    # ---- evaluation, and p = 0: the identity
    oe, ce = fwd(r, "dropout_forward", x, p, np.random.default_rng(3), train=False)
    oe = as_array(r, "out (train=False)", oe, x.shape)
    if np.array_equal(oe, x):
        eval_hint = None
    elif _near(oe / x, 1.0 - p):
        eval_hint = ("at evaluation (train=False) dropout is the identity: inverted dropout did its scaling "
                     "at training time, so do not multiply by (1 - p) here")
    elif (oe == 0.0).any():
        eval_hint = "train=False: nothing is dropped at evaluation, out = x"
    else:
        eval_hint = "train=False: out = x, unchanged (the identity)"
    r.expect(eval_hint is None, "train=False: out = x", eval_hint)
    o0, _ = fwd(r, "dropout_forward", x, 0.0, np.random.default_rng(4), train=True)
    o0 = as_array(r, "out (train=True, p=0)", o0, x.shape)
    r.expect(np.array_equal(o0, x), "p = 0: out = x",
             "with p = 0 nothing is dropped and the scale is 1/(1 - 0) = 1: out = x")

    # ---- backward: the forward's mask, with its scale
    xs = rng.standard_normal((6, 7))
    ps, seed = 0.3, 5
    os_, cs = fwd(r, "dropout_forward", xs, ps, np.random.default_rng(seed), train=True)
    os_ = as_array(r, "out (train=True, 6 x 7)", os_, xs.shape)
    dout = rng.standard_normal(xs.shape)
    dx = as_array(r, "dx", bwd(r, "dropout_backward", dout, cs), xs.shape, "dx has x's shape")
    keep = (os_ != 0.0).astype(np.float64)

    def new_mask(got):
        nonzero = got != 0.0
        if (nonzero != (keep > 0)).any() and _near(got[nonzero] / dout[nonzero], 1.0 / (1.0 - ps)):
            return ("dx drops other entries than the forward pass did: the backward pass must use the "
                    "forward's mask (keep it in the cache), not draw a new one")
        return None
    grad_check(r, "dx (train=True)", _seeded_output(r, "dropout_forward", xs, ps, seed=seed, train=True),
               xs, dout, dx, known=[
                   (dout, "dropout's backward multiplies dout by the forward's mask: dx = dout * mask"),
                   (dout * keep, "the mask carries the scale: dx = dout * mask with mask 0 or 1/(1 - p), "
                                 "as in the forward pass"),
               ], explain=new_mask)
    _, ce = fwd(r, "dropout_forward", xs, ps, np.random.default_rng(6), train=False)
    dx_e = as_array(r, "dx (train=False)", bwd(r, "dropout_backward", dout, ce), xs.shape)
    r.expect(np.array_equal(dx_e, dout), "train=False: dx = dout",
             "at evaluation the forward pass is the identity, and so is the backward pass: dx = dout")

    _check_attention_dropout(r)


def _check_attention_dropout(r: Report) -> None:
    rng = np.random.default_rng(12)
    B, A, T = 2, 2, 5
    D = 2 * T                              # room for v = [I | R]: out = [Pd | Pd R] shows Pd itself
    q, k, v = (rng.standard_normal((B, A, T, D)) for _ in range(3))
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    bias = L.attention_mask_bias(mask, np.float64)
    scale = 1.0 / math.sqrt(D)
    P = L.softmax_forward(q @ k.swapaxes(-1, -2) * scale + bias)[0]
    p, seed = 0.2, 21
    func = "attention_dropout_forward"

    # ---- evaluation: plain attention
    oe, ce = fwd(r, func, q, k, v, mask, p, np.random.default_rng(3), train=False)
    oe = as_array(r, "attention out (train=False)", oe, q.shape, "out has q's shape (B, A, T, D)")
    compare(r, "attention, train=False, vs minibert", oe, L.attention_forward(q, k, v, bias)[0],
            known=[((P * (1 - p)) @ v, "at evaluation (train=False) dropout is the identity: do not "
                                       "multiply the weights by (1 - p), inverted dropout scaled at training")],
            hint="with train=False there is no dropout: out = softmax(q k^T / sqrt(D) + mask bias) v, "
                 "as in the attention exercise")

    # ---- training, read through v = [I | R]: the first T columns of out are the dropped weights
    R = rng.standard_normal((T, T))
    v_probe = np.broadcast_to(np.concatenate([np.eye(T), R], axis=1), (B, A, T, D)).copy()
    op, _ = fwd(r, func, q, k, v_probe, mask, p, np.random.default_rng(seed), train=True)
    op = as_array(r, "attention out (train=True)", op, q.shape)
    Pd = op[..., :T]
    r.require(max_rel_error(op[..., T:], Pd @ R) < 1e-9,
              "train=True: out = dropout(P) v, the weights dropped before v",
              "dropout goes on the attention weights P (B, A, T, T), between the softmax and the product "
              "with v: out = dropout(P) v. Dropping entries of the output P v (or of v) is not the same")
    real = P > 0.0                         # padded keys have weight exactly 0, dropped or not
    kept = real & (Pd != 0.0)
    ratio = Pd[kept] / P[kept]
    if _near(ratio, 1.0 / (1.0 - p)) and not Pd[~real].any():
        weights_hint = None
    elif np.allclose(Pd.sum(-1), 1.0, atol=1e-9) and not np.allclose(Pd, P, rtol=1e-9, atol=0.0):
        weights_hint = ("the dropped weights still sum to 1 in every row: apply dropout to P after the "
                        "softmax and do not renormalise (dropping scores before the softmax is not dropout "
                        "on the weights)")
    else:
        weights_hint = (_scale_hint(ratio, p, "weights")
                        or "each weight of P is either 0 (dropped) or P / (1 - p) (kept)")
    r.expect(weights_hint is None, "train=True: each weight is 0 or P / (1 - p)", weights_hint)
    share = float((real & (Pd == 0.0)).sum() / real.sum())
    r.expect(0.05 < share < 0.45, f"{share:.2f} of the weights dropped with p = {p}",
             _drop_share_hint(share, p, "weights"))
    M = np.where(real, Pd / np.where(real, P, 1.0), 0.0)   # the student's mask for this seed

    # ---- backward in training, against the student's own forward with the same seed
    dout = rng.standard_normal(q.shape)
    ot, ct = fwd(r, func, q, k, v, mask, p, np.random.default_rng(seed), train=True)
    grads = unpack(r, "attention_dropout_backward", bwd(r, "attention_dropout_backward", dout, ct),
                   3, "dq, dk, dv")
    dq, dk, dv = (as_array(r, n, g, q.shape) for n, g in zip(("dq", "dk", "dv"), grads))
    dPd = dout @ v.swapaxes(-1, -2)

    def dqk(dP, W=P):
        dS = W * (dP - (dP * W).sum(-1, keepdims=True)) * scale
        return dS @ k, dS.swapaxes(-1, -2) @ q
    no_mask = ("multiply dPd = dout v^T by the forward's dropout mask (kept in the cache) before the "
               "softmax backward: out = dropout(P) v, so the gradient reaches P only through the kept weights")
    unscaled = ("the mask in the backward pass is the forward's, with its scale: dP = dPd * mask, "
                "mask = keep / (1 - p)")
    with_pd = ("the softmax backward uses P, the softmax's own output before dropout: "
               "dS = P * (dP - sum_keys(dP * P))")
    wrong = {"no_mask": dqk(dPd), "unscaled": dqk(dPd * (M > 0)), "with_pd": dqk(dPd * M, P * M)}
    hints = {"no_mask": no_mask, "unscaled": unscaled, "with_pd": with_pd}
    args = (q, k, v, mask, p)
    f = _seeded_output(r, func, *args, seed=seed, train=True)
    for i, (name, got, x) in enumerate((("dq", dq, q), ("dk", dk, k))):
        grad_check(r, f"{name} (train=True)", f, x, dout, got,
                   known=[(wrong[key][i], hints[key]) for key in wrong])
    grad_check(r, "dv (train=True)", f, v, dout, dv, known=[
        (P.swapaxes(-1, -2) @ dout, "dv = dropout(P)^T dout: v was multiplied by the dropped weights, so "
                                    "dv uses them, not P"),
    ])

    # ---- backward at evaluation: plain attention's
    ge = unpack(r, "attention_dropout_backward", bwd(r, "attention_dropout_backward", dout, ce), 3, "dq, dk, dv")
    ref = L.attention_backward(dout, L.attention_forward(q, k, v, bias)[1])
    for name, got, want in zip(("dq", "dk", "dv"), ge, ref):
        got = as_array(r, f"{name} (train=False)", got, q.shape)
        compare(r, f"{name}, train=False, vs minibert", got, want,
                hint="with train=False there is no mask: the backward pass is plain attention's")


# ========================================================================== mlm_masking
_V = 1000
_PAD, _UNK, _CLS, _SEP, _MASK = 0, 1, 2, 3, 4
_SPECIAL = (_PAD, _UNK, _CLS, _SEP, _MASK)


def _expected_predictions(n_tokens, n_candidates, p=0.15, cap=20):
    return min(cap, max(1, int(round(n_tokens * p))), n_candidates)


def _pair_sequence(rng, n_a, n_b):
    a = rng.integers(len(_SPECIAL), _V, n_a).tolist()
    b = rng.integers(len(_SPECIAL), _V, n_b).tolist()
    return [_CLS] + a + [_SEP] + b + [_SEP]


@checker("mlm_masking")
def check_mlm_masking(r: Report) -> None:
    rng = np.random.default_rng(7)

    def run_each(jobs, hint=None):
        """(masked, labels) for each (ids, seed, keyword arguments) of ``jobs``, in order."""
        calls = []
        for ids, seed, kw in jobs:
            kwargs = dict(vocab_size=_V, mask_id=_MASK, special_ids=list(_SPECIAL))
            kwargs.update(kw)
            calls.append(((list(ids), np.random.default_rng(seed)), kwargs))
        for (ids, _, _), res in zip(jobs, call_each(r, "mask_tokens", calls, hint=hint)):
            masked, labels = unpack(r, "mask_tokens", res, 2, "masked_ids, labels")
            try:
                masked = [int(t) for t in masked]
                labels = [int(t) for t in labels]
            except (TypeError, ValueError):
                r.fail("masked_ids and labels must be sequences of ints")
                raise Abort
            if len(masked) != len(ids) or len(labels) != len(ids):
                r.fail(f"masked_ids and labels must have len(ids) = {len(ids)} entries, "
                       f"got {len(masked)} and {len(labels)}",
                       "return one label per position: -100 where nothing is predicted")
                raise Abort
            yield np.array(masked), np.array(labels)

    def run(ids, seed, hint=None, **kw):
        return next(run_each([(ids, seed, kw)], hint))

    # ---- one call: types, and the input left alone
    ids = _pair_sequence(rng, 18, 19)
    before = list(ids)
    kwargs = dict(vocab_size=_V, mask_id=_MASK, special_ids=list(_SPECIAL))
    call(r, "mask_tokens", ids, np.random.default_rng(0), **kwargs)
    r.expect(ids == before, "the input list is left unchanged",
             "build a new list (list(ids)) instead of changing the caller's")
    run(ids, 0)
    r.ok("returns masked_ids and labels, one entry per position")

    # ---- many sequences: the rules on every one, the proportions over all
    # (21 tokens: round gives 3 predictions, ceil 4; 12 tokens: round 2, floor 1)
    lengths = [(4, 5), (8, 10), (18, 19), (30, 31), (48, 49), (60, 61)]
    n_seq = 600
    bad = {k: 0 for k in ("label", "unchosen", "special", "count", "value")}
    n_more = 0                    # sequences with more predictions than n
    counts_by_len: dict[int, set] = {}
    n_mask = n_random = n_keep = 0
    randoms = []
    n_many = n_mixed = 0          # sequences with 5+ predictions; those whose fates differ
    n_two_random = n_same_random = 0
    n_all_labelled = 0            # sequences where every position has a label
    sequences = []
    for i in range(n_seq):
        na, nb = lengths[i % len(lengths)]
        ids = np.array(_pair_sequence(rng, na, nb))
        if i % 4 == 3:            # [UNK] and [MASK] inside, [PAD] after: special ids, never chosen
            ids[rng.integers(1, na)] = _UNK
            ids[na + 2] = _MASK
            ids = np.concatenate([ids, np.full(int(rng.integers(1, 6)), _PAD)])
        sequences.append(ids)
    results = run_each([(ids.tolist(), 1000 + i, {}) for i, ids in enumerate(sequences)])
    for ids, (masked, labels) in zip(sequences, results):
        chosen = labels != -100
        n_all_labelled += int(chosen.all())
        special = np.isin(ids, _SPECIAL)
        bad["label"] += int((labels[chosen] != ids[chosen]).any())
        bad["unchosen"] += int((masked[~chosen] != ids[~chosen]).any())
        bad["special"] += int((chosen & special).any())
        n_expected = _expected_predictions(len(ids), int((~special).sum()))
        bad["count"] += int(chosen.sum() != n_expected)
        n_more += int(chosen.sum() > n_expected)
        counts_by_len.setdefault(len(ids), set()).add(int(chosen.sum()))
        new = masked[chosen]
        orig = ids[chosen]
        is_mask = new == _MASK
        is_keep = new == orig
        is_rand = ~is_mask & ~is_keep
        bad["value"] += int((np.isin(new[is_rand], _SPECIAL) | (new[is_rand] < 0) | (new[is_rand] >= _V)).any())
        n_mask += int(is_mask.sum())
        n_keep += int(is_keep.sum())
        n_random += int(is_rand.sum())
        randoms.extend(new[is_rand].tolist())
        if chosen.sum() >= 5:
            n_many += 1
            n_mixed += int(len({bool(a) for a in is_mask}) > 1 or len({bool(a) for a in is_keep}) > 1)
        if is_rand.sum() >= 2:
            n_two_random += 1
            n_same_random += int(len(set(new[is_rand].tolist())) == 1)

    every = all(c == {L_} for L_, c in counts_by_len.items())
    r.expect(bad["label"] == 0, "labels hold the ORIGINAL id at predicted positions",
             "the label is the token that was there before masking (ids[pos]), not [MASK]")
    r.expect(bad["unchosen"] == 0, "positions not predicted are left unchanged",
             "only the chosen positions are corrupted; every position whose label is -100 keeps its id")
    r.expect(bad["special"] == 0, "[CLS] and [SEP] are never chosen",
             "labels must be -100 at every position that is not predicted: only the chosen ~15% carry "
             "their original id" if n_all_labelled == n_seq else
             "candidates are the positions whose id is not in special_ids")
    if bad["count"]:
        if every:
            hint = "labels must be -100 at every position that is not predicted"
        elif any(len(c) > 1 for c in counts_by_len.values()) and not n_more:
            # never more than n, sometimes fewer: the same position drawn twice
            hint = ("some sequences get fewer than n predictions: choose n DIFFERENT positions, "
                    "rng.choice(candidates, n, replace=False); with replace=True a position can be "
                    "drawn twice")
        elif any(len(c) > 1 for c in counts_by_len.values()):
            hint = ("choose exactly n = min(max_predictions, max(1, round(len(ids) * mlm_probability))) "
                    "positions, not a coin flip per token")
        elif max(max(c) for c in counts_by_len.values()) > 20:
            hint = "at most max_predictions positions are chosen per sequence"
        else:
            hint = ("n = min(max_predictions, max(1, round(len(ids) * mlm_probability))), counting every "
                    "token ([PAD] too), rounded to the nearest integer (not math.ceil, not int())")
        r.fail(f"the number of predicted positions is wrong in {bad['count']} of {n_seq} sequences", hint)
    else:
        r.ok("round(15% of the tokens) chosen in every sequence")
    r.expect(bad["value"] == 0, "random replacements are ordinary ids in [0, vocab_size)",
             "draw random replacements from range(vocab_size) without special_ids")
    # 5+ predictions all with the same fate: 0.8^5 = 33% at most if each position draws its own
    all_mask = n_mask > 0.95 * max(n_mask + n_random + n_keep, 1)
    r.expect(n_many and n_mixed >= 0.5 * n_many,
             f"each predicted position draws its own fate ({n_mixed} of {n_many} sequences with 5+ "
             f"predictions mix [MASK], random and unchanged)",
             "every chosen position became [MASK]: only 80% should; 10% random, 10% unchanged" if all_mask else
             "draw the 80/10/10 choice anew for EACH chosen position (rng.random() inside the loop), "
             "not once per sequence")
    r.expect(n_two_random == 0 or n_same_random <= 0.2 * n_two_random,
             f"each random replacement is a fresh draw ({n_same_random} of {n_two_random} sequences with "
             f"2+ random replacements used one token for all)",
             "draw a new random token for each position that gets one, inside the loop")

    total = n_mask + n_random + n_keep
    if total:
        share = {"[MASK]": n_mask / total, "random": n_random / total, "unchanged": n_keep / total}
        target = {"[MASK]": (0.8, 0.025), "random": (0.1, 0.02), "unchanged": (0.1, 0.02)}
        for what, (t, tol) in target.items():
            hint = ("each chosen position becomes [MASK] with probability 0.8, a random token with 0.1 "
                    "and stays unchanged with 0.1")
            if share["[MASK]"] > 0.95:
                hint = "every chosen position became [MASK]: only 80% should; 10% random, 10% unchanged"
            r.expect(abs(share[what] - t) < tol,
                     f"{what:>9s}: {share[what]:.3f} of the predicted positions (BERT: {t:.1f})", hint)

    # ---- uniform choice of positions; random replacements spread over the vocabulary
    ids = _pair_sequence(rng, 18, 19)
    hits = np.zeros(len(ids))
    n_runs = 400
    for _, labels in run_each([(ids, 5000 + i, {}) for i in range(n_runs)]):
        hits += labels != -100
    cand = hits[~np.isin(ids, _SPECIAL)]
    # chi-square test of "every candidate equally likely", failing only at p < 1e-6
    from scipy.special import chdtri          # chdtri(df, p): the chi-square quantile of 1 - p
    stat = float(((cand - cand.mean()) ** 2 / max(cand.mean(), 1e-12)).sum())
    r.expect(cand.sum() > 0 and stat < chdtri(len(cand) - 1, 1e-6),
             "every candidate position is chosen about equally often",
             "choose the positions uniformly at random, e.g. rng.choice(candidates, n, replace=False)")
    r.expect(len(set(randoms)) >= 100, f"random replacements spread over the vocabulary "
                                       f"({len(set(randoms))} distinct ids)",
             "a random replacement is drawn uniformly from the ordinary ids, anew for each position")

    # ---- a random replacement may be the original token itself, as in BERT (its draw is
    # uniform over all ordinary ids). With only two ordinary ids, half the random draws give the
    # original back: a chosen position keeps its token 0.1 + 0.1/2 = 15% of the time, not 10%.
    same = total_small = 0
    small = [[_CLS] + rng.integers(5, 7, 19).tolist() + [_SEP] + rng.integers(5, 7, 18).tolist() + [_SEP]
             for _ in range(600)]
    for ids, (masked, labels) in zip(small, run_each([(ids, 9000 + i, {"vocab_size": 7})
                                                      for i, ids in enumerate(small)])):
        chosen = labels != -100
        same += int((masked[chosen] == np.array(ids)[chosen]).sum())
        total_small += int(chosen.sum())
    kept = same / max(total_small, 1)
    r.expect(abs(kept - 0.15) < 0.025,
             f"with 2 ordinary ids, {kept:.3f} of the predicted positions keep their token (BERT: 0.15)",
             "a random replacement is drawn from all ordinary ids, the original one included (BERT "
             "does not exclude it): 10% unchanged plus half of the 10% random draws"
             if kept < 0.125 else
             "each chosen position becomes [MASK] with probability 0.8, a random token with 0.1 "
             "and stays unchanged with 0.1")

    # ---- the cap, and the minimum of one prediction
    long_ids = _pair_sequence(rng, 100, 97)
    for cap in (20, 5):
        _, labels = run(long_ids, 11, max_predictions=cap)
        got = int((labels != -100).sum())
        r.expect(got == cap, f"a 200-token sequence gets exactly max_predictions={cap} predictions",
                 "n = min(max_predictions, ...): never more than max_predictions" if got > cap else
                 f"{got} predictions: with 197 candidates there is room for all {cap}, so choose exactly "
                 f"max_predictions={cap} different positions (replace=False)")
    _, labels = run([_CLS, 77, _SEP], 3)
    r.expect(int((labels != -100).sum()) == 1, "a 3-token sequence still gets 1 prediction",
             "n = max(1, round(...)): at least one prediction")

    # ---- fewer candidates than n: all of them (none at all: nothing is predicted)
    few = "n is at most the number of candidates: n = min(max_predictions, max(1, round(...)), len(candidates))"
    masked, labels = run([_CLS, _SEP], 4, hint=few)
    r.expect(masked.tolist() == [_CLS, _SEP] and (labels == -100).all(),
             "[CLS] [SEP] alone: nothing to predict, nothing changed", few)
    padded = [_CLS, 77, _SEP] + [_PAD] * 10         # n = round(13 * 0.15) = 2, one candidate
    _, labels = run(padded, 5, hint=few)
    r.expect(labels.tolist() == [-100, 77] + [-100] * 11,
             "[CLS] x [SEP] + 10 [PAD]: the one candidate is predicted, no [PAD]", few)

    # ---- the arguments: another mlm_probability, special ids that are not the smallest ids
    ids = _pair_sequence(rng, 18, 19)
    _, labels = run(ids, 6, mlm_probability=0.3)
    r.expect(int((labels != -100).sum()) == 12, "mlm_probability=0.3 on 40 tokens: 12 predictions",
             "use the mlm_probability argument, not a fixed 0.15")
    special = [0, 100, 101, 102, 103]                 # BERT's own: [PAD] 0, [UNK] 100, ..., [MASK] 103
    ordinary = np.array([t for t in range(110) if t not in special])
    wrong = 0
    bert_ids = [[101] + rng.choice(ordinary, 18).tolist() + [102] + rng.choice(ordinary, 19).tolist() + [102]
                for _ in range(400)]
    kw = dict(vocab_size=110, mask_id=103, special_ids=special)
    for ids, (masked, labels) in zip(bert_ids, run_each([(ids, 7000 + i, kw) for i, ids in enumerate(bert_ids)])):
        chosen = labels != -100
        new_ids, old_ids = masked[chosen], np.array(ids)[chosen]
        wrong += int(np.isin(new_ids[(new_ids != old_ids) & (new_ids != 103)], special).any()
                     or np.isin(old_ids, special).any())
    r.expect(wrong == 0, "with BERT's special ids (0, 100-103) no special token is chosen or drawn",
             "take the special ids from special_ids: they need not be the smallest ids "
             "(BERT's are 0 and 100 to 103), so draw from range(vocab_size) without them")

    # ---- reproducible from rng alone
    a = run(ids, 123)
    np.random.seed(1)
    b = run(ids, 123)
    r.expect(all(np.array_equal(x, y) for x, y in zip(a, b)), "the same rng seed gives the same masking",
             "draw every random number from the rng argument (not np.random.* or the random module)")


# =========================================================================== nsp_pairing
_CLS_ID, _SEP_ID = 1, 2


def _documents(rng, sentence_counts, lengths=(2, 9)):
    """Documents whose every token id is unique, so a token tells where it comes from."""
    docs, owner, next_id = [], {}, 10
    for d, n_sent in enumerate(sentence_counts):
        doc = []
        for s in range(n_sent):
            n = int(rng.integers(lengths[0], lengths[1] + 1))
            sent = list(range(next_id, next_id + n))
            for t in sent:
                owner[t] = (d, s)
            next_id += n
            doc.append(sent)
        docs.append(doc)
    return docs, owner


def _is_run(part, whole):
    """Is ``part`` a contiguous run of ``whole``?"""
    n = len(part)
    return any(whole[i:i + n] == part for i in range(len(whole) - n + 1))


@checker("nsp_pairing")
def check_nsp_pairing(r: Report) -> None:
    rng = np.random.default_rng(8)
    docs, owner = _documents(rng, [3, 5, 4, 8, 2, 6])

    def run_each(documents, jobs, hint=None):
        """(ids, types, label) for each (d, s, seed, max_len) of ``jobs``, in order."""
        calls = [((documents, d, s, np.random.default_rng(seed)),
                  dict(cls_id=_CLS_ID, sep_id=_SEP_ID, max_len=max_len)) for d, s, seed, max_len in jobs]
        for res in call_each(r, "make_nsp_example", calls, hint=hint):
            ids, types, label = unpack(r, "make_nsp_example", res, 3, "input_ids, token_type_ids, nsp_label")
            try:
                ids, types, label = [int(t) for t in ids], [int(t) for t in types], int(label)
            except (TypeError, ValueError):
                r.fail("input_ids and token_type_ids must be lists of ints and nsp_label an int")
                raise Abort
            yield ids, types, label

    def run(documents, d, s, seed, max_len, hint=None):
        return next(run_each(documents, [(d, s, seed, max_len)], hint))

    def parse(ids, types):
        """(A, B) or a description of what is wrong with the layout."""
        if len(types) != len(ids):
            return "token_type_ids must have one entry per token"
        seps = [i for i, t in enumerate(ids) if t == _SEP_ID]
        if not ids or ids[0] != _CLS_ID or len(seps) != 2 or seps[-1] != len(ids) - 1:
            return "the layout is [CLS] A [SEP] B [SEP]: [CLS] first, exactly two [SEP], the last at the end"
        first = seps[0]
        if types != [0] * (first + 1) + [1] * (len(ids) - first - 1):
            return "token_type_ids are 0 for [CLS] A [SEP] and 1 for B [SEP]"
        a, b = ids[1:first], ids[first + 1:-1]
        if not a or not b:
            return "A and B must both be non-empty"
        return a, b

    # ---- one call
    snapshot = [[list(s) for s in d] for d in docs]
    run(docs, 1, 2, 0, 64)
    r.expect(docs == snapshot, "the documents are left unchanged",
             "copy a sentence (list(...)) before truncating it")

    # ---- many examples, nothing truncated
    problems: dict[str, int] = {}
    first_problem: dict[str, str] = {}

    def problem(key, hint):
        problems[key] = problems.get(key, 0) + 1
        first_problem.setdefault(key, hint)

    n_with_next = n_is_next = 0
    n_last = n_last_not_next = 0
    n_own_next = n_own_other = 0      # NotNext examples whose B comes from A's own document
    jobs = []
    for i in range(1500):
        d = int(rng.integers(len(docs)))
        jobs.append((d, int(rng.integers(len(docs[d]))), 100 + i, 64))
    for (d, s, _, _), (ids, types, label) in zip(jobs, run_each(docs, jobs)):
        parsed = parse(ids, types)
        if isinstance(parsed, str):
            problem("layout", parsed)
            continue
        a, b = parsed
        if label not in (0, 1):
            problem("label", "nsp_label is 0 (IsNext) or 1 (NotNext)")
            continue
        if a != docs[d][s]:
            problem("A", "A is the whole sentence documents[doc_index][sent_index] (it fits: no truncation)")
        src = owner.get(b[0])
        if src is None or b != docs[src[0]][src[1]]:
            problem("B", "B is one whole sentence of a document (it fits: no truncation)")
            continue
        true_next = src == (d, s + 1)
        if s == len(docs[d]) - 1:
            n_last += 1
            n_last_not_next += label == 1
        else:
            n_with_next += 1
            n_is_next += label == 0
        if label == 0 and not true_next:
            problem("flip", "label 0 (IsNext) means B is the sentence that follows A; "
                            "check the convention 0 = IsNext, 1 = NotNext" if src[0] != d else
                            "IsNext: B is the sentence right after A (sent_index + 1)")
        if label == 1 and src[0] == d:
            if true_next:
                n_own_next += 1
            else:
                n_own_other += 1
    # A NotNext B from A's own document: if some are other sentences than the next one, the random
    # document can be A's own (and now and then its draw lands on the next sentence: the same
    # mistake, not a label convention).  If every one is the next sentence, the labels are swapped.
    same_doc = ("a NotNext B must come from a DIFFERENT document: leave doc_index out of the draw "
                "(draw from len(documents) - 1 and add 1 when it is >= doc_index)")
    if n_own_other:
        problems["same_doc"] = n_own_other + n_own_next
        first_problem["same_doc"] = same_doc
    elif n_own_next:
        problems["flip"] = problems.get("flip", 0) + n_own_next
        first_problem.setdefault("flip", "B is the sentence that follows A but the label is 1: "
                                         "the convention is 0 = IsNext, 1 = NotNext")
    # the layout and the labels first: when they are wrong, nothing after them can be read
    for key, what in [("layout", "[CLS] A [SEP] B [SEP] layout and token_type_ids"),
                      ("label", "labels are 0 or 1")]:
        n_bad = problems.get(key, 0)
        r.require(n_bad == 0, what + (f" (wrong in {n_bad} of 1500)" if n_bad else ""), first_problem.get(key))
    for key, what in [("A", "A is sentence sent_index of doc_index"),
                      ("B", "B is a whole sentence"),
                      ("same_doc", "a NotNext B comes from another document"),
                      ("flip", "label 0 exactly when B is the true next sentence")]:
        n_bad = problems.get(key, 0)
        r.expect(n_bad == 0, what + (f" (wrong in {n_bad} of 1500)" if n_bad else ""), first_problem.get(key))
    if n_with_next:
        share = n_is_next / n_with_next
        r.expect(abs(share - 0.5) < 0.05, f"IsNext in {share:.3f} of the examples that have a next "
                                          f"sentence (BERT: 0.5)",
                 "B is the true next sentence with probability 0.5")
    if n_last:
        r.expect(n_last_not_next == n_last, "A = the last sentence of a document always gives NotNext",
                 "when sent_index is the last sentence there is no true next one: make it NotNext")
    # ---- the 50/50 is a draw for every example, not a rule of the indices
    shares = []
    for d, s in ((0, 0), (1, 2), (3, 4), (5, 1)):
        labels = [ex[2] for ex in run_each(docs, [(d, s, 30000 + 997 * d + i, 64) for i in range(200)])]
        shares.append(labels.count(0) / len(labels))
    r.expect(all(0.35 < x < 0.65 for x in shares),
             "the same A gets IsNext about half the time over different seeds ("
             + ", ".join(f"{x:.2f}" for x in shares) + ")",
             "decide IsNext or NotNext with a random draw from rng for every example "
             "(rng.random() < 0.5), not from doc_index or sent_index")

    # ---- a NotNext B: uniform over the other documents, and over their sentences
    seen_docs = np.zeros(len(docs))
    seen_sents = {d: set() for d in range(len(docs))}
    for ids, types, label in run_each(docs, [(0, len(docs[0]) - 1, 9000 + i, 64) for i in range(600)]):
        parsed = parse(ids, types)
        if isinstance(parsed, str) or owner.get(parsed[1][0]) is None:
            continue
        bd, bs = owner[parsed[1][0]]
        seen_docs[bd] += 1
        seen_sents[bd].add(bs)
    others = seen_docs[1:]
    r.expect(others.sum() > 0 and np.all(np.abs(others - others.mean()) < 0.4 * others.mean()),
             "the random document is drawn uniformly from the other documents",
             "draw the document uniformly among all documents but doc_index")
    r.expect(all(len(seen_sents[d]) == len(docs[d]) for d in range(1, len(docs))),
             "any sentence of the random document can be B",
             "draw B's sentence uniformly within the random document, not always its first")

    # ---- truncation
    long_docs, long_owner = _documents(np.random.default_rng(9), [4, 4, 4], lengths=(6, 14))
    long_snapshot = [[list(s) for s in d] for d in long_docs]
    trunc_bad = None

    def popped_empty(exc):
        if isinstance(exc, IndexError) and "empty" in str(exc):
            return ("truncation emptied a segment and then popped from it: remove tokens from the LONGER "
                    "of A and B (B on a tie), never from the shorter one")
        return None
    jobs = [(i % 3, i % 4, 20000 + i, max_len) for i in range(300) for max_len in (8, 13, 20)]
    for (d, s, _, max_len), (ids, types, label) in zip(jobs, run_each(long_docs, jobs, hint=popped_empty)):
        parsed = parse(ids, types)
        if isinstance(parsed, str):
            trunc_bad = trunc_bad or parsed
            continue
        a, b = parsed
        full_a = long_docs[d][s]
        src = long_owner.get(b[0])
        full_b = long_docs[src[0]][src[1]] if src else []
        if not _is_run(a, full_a) or not _is_run(b, full_b):
            trunc_bad = trunc_bad or "truncation removes tokens from the ends of A or B, nothing else"
            continue
        if len(ids) != min(len(full_a) + len(full_b) + 3, max_len):
            trunc_bad = trunc_bad or (f"the input must have min(len(A) + len(B) + 3, max_len) tokens: "
                                      f"got {len(ids)} with max_len={max_len}")
            continue
        cut_a, cut_b = len(a) < len(full_a), len(b) < len(full_b)
        if (cut_a and len(a) < len(b)) or (cut_b and len(b) < len(a) - 1):
            trunc_bad = trunc_bad or ("remove tokens one at a time from the LONGER of A and B "
                                      "(B on a tie), so neither is cut more than needed")
    r.expect(trunc_bad is None, "long pairs are truncated to max_len, from the longer segment",
             trunc_bad)
    r.expect(long_docs == long_snapshot, "truncation leaves the documents unchanged",
             "copy the sentences (list(...)) before truncating them: pop() on documents[d][s] itself "
             "shortens the caller's corpus for every later example")

    # ---- reproducible from rng alone
    x = run(docs, 3, 2, 77, 64)
    np.random.seed(5)
    y = run(docs, 3, 2, 77, 64)
    r.expect(x == y, "the same rng seed gives the same example",
             "draw every random number from the rng argument")


# ================================================================================ adamw
_HP = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.1)


def _reference_adamw(p0, grads, decay, hp=_HP):
    """minibert.optim.AdamW on a one-tensor ParamStore: (param, m, v) after each step."""
    store = ParamStore([ParamSpec("w", p0.shape, "zeros", decay)], np, np.float64)
    store.params["w"][...] = p0
    opt = AdamW(store, lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"],
                weight_decay=hp["weight_decay"])
    out = []
    for g in grads:
        store.grads["w"][...] = g
        opt.step()
        out.append((store.params["w"].copy(), opt.m.reshape(p0.shape).copy(), opt.v.reshape(p0.shape).copy()))
    return out


def _variant_adamw(p, grads, decay, *, mode="decoupled", bias_correction=True, eps_inside=False, hp=_HP,
                   moments=False):
    """The usual wrong versions, to recognise them: the last param, or (param, m, v) with moments=True."""
    lr, b1, b2, eps, wd = hp["lr"], hp["beta1"], hp["beta2"], hp["eps"], hp["weight_decay"]
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        if decay and mode == "l2":
            g = g + wd * p
        if decay and mode == "decoupled":
            p = p * (1 - lr * wd)
        if decay and mode == "no_lr":
            p = p * (1 - wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        if bias_correction == "swapped":
            mh, vh = m / (1 - b2 ** t), v / (1 - b1 ** t)
        else:
            mh, vh = (m / (1 - b1 ** t), v / (1 - b2 ** t)) if bias_correction else (m, v)
        denom = np.sqrt(vh + eps) if eps_inside else np.sqrt(vh) + eps
        new = p - lr * mh / denom
        if decay and mode == "after":
            new = new * (1 - lr * wd)
        p = new
    return (p, m, v) if moments else p


def _student_adamw(r: Report, p0, grads, decay, hp=_HP):
    """The student's adamw_step from p0 and zero moments: (t, param, m, v) after each step."""
    p, m, v = p0.copy(), np.zeros(p0.shape), np.zeros(p0.shape)
    hint_t = "t is 1 at the first step: 1 - beta1**t must not be 0"
    for t, g in enumerate(grads, start=1):
        res = call(r, "adamw_step", p.copy(), g.copy(), m.copy(), v.copy(), t, decay=decay, **hp)
        p, m, v = unpack(r, "adamw_step", res, 3, "param, m, v")
        p, m, v = (as_array(r, f"{name} after step {t}", a, p0.shape, hint_t)
                   for name, a in (("param", p), ("m", m), ("v", v)))
        yield t, p, m, v


@checker("adamw")
def check_adamw(r: Report) -> None:
    rng = np.random.default_rng(10)
    shape = (3, 4)
    p0 = rng.standard_normal(shape)
    grads = [rng.standard_normal(shape) * 0.5 for _ in range(5)]
    for decay in (True, False):
        ref = _reference_adamw(p0, grads, decay)
        errs = {"param": 0.0, "m": 0.0, "v": 0.0, "update": 0.0}
        for t, p, m, v in _student_adamw(r, p0, grads, decay):
            rp, rm, rv = ref[t - 1]
            errs["param"] = max(errs["param"], max_rel_error(p, rp))
            errs["m"] = max(errs["m"], max_rel_error(m, rm))
            errs["v"] = max(errs["v"], max_rel_error(v, rv))
            errs["update"] = max(errs["update"], max_rel_error(p - p0, rp - p0))
        flag = f"decay={decay}"
        known = []
        if decay:
            known += [
                (_variant_adamw(p0, grads, True, mode="l2"),
                 "that is L2 regularisation (wd * param added to the gradient); AdamW decays the "
                 "weights directly: param *= 1 - lr * weight_decay, outside Adam's update"),
                (_variant_adamw(p0, grads, False), "with decay=True the weights must be decayed"),
                (_variant_adamw(p0, grads, True, mode="no_lr"), "the decay factor is 1 - lr * weight_decay"),
                (_variant_adamw(p0, grads, True, mode="after"),
                 "decay the parameter as it was before this step's Adam update (decay first)"),
            ]
        else:
            known += [(_variant_adamw(p0, grads, True),
                       "decay=False (biases, LayerNorm) means no weight decay at all for this tensor"),
                      (_variant_adamw(p0, grads, True, mode="l2"),
                       "decay=False (biases, LayerNorm) means no weight decay at all for this tensor")]
        known += [(_variant_adamw(p0, grads, decay, bias_correction=False),
                   "bias correction is missing: m_hat = m / (1 - beta1**t), v_hat = v / (1 - beta2**t)"),
                  (_variant_adamw(p0, grads, decay, bias_correction="swapped"),
                   "the bias corrections are swapped: m_hat = m / (1 - beta1**t) goes with beta1, "
                   "v_hat = v / (1 - beta2**t) with beta2"),
                  (_variant_adamw(p0, grads, decay, eps_inside=True),
                   "eps goes outside the square root: sqrt(v_hat) + eps")]
        # the moments of the last step: L2 regularisation changes them (wd * param is in the gradient)
        _, m_l2, v_l2 = _variant_adamw(p0, grads, True, mode="l2", moments=True)
        l2 = ("that is L2 regularisation: wd * param added to the gradient changes m and v. AdamW decays the "
              "weights directly (param *= 1 - lr * weight_decay) and m, v see the gradient alone" if decay else
              "decay=False (biases, LayerNorm) means no weight decay at all for this tensor")
        b1, b2, n = _HP["beta1"], _HP["beta2"], len(grads)
        for what, got, rm, wrong_l2, corr, how in (
                ("m", m, ref[-1][1], m_l2, 1 - b1 ** n, "m = beta1 * m + (1 - beta1) * grad"),
                ("v", v, ref[-1][2], v_l2, 1 - b2 ** n, "v = beta2 * v + (1 - beta2) * grad**2")):
            line = f"{what}, 5 steps, {flag}, vs minibert"
            if errs[what] < 1e-12:
                r.ok(f"{line:<44s} max_rel_error {errs[what]:.1e} (< 1e-12)")
            else:
                hint = diagnose(got, [(wrong_l2, l2),
                                      (rm / corr, f"store {what} itself, not the bias-corrected {what}_hat")])
                r.fail(f"{line:<44s} max_rel_error {errs[what]:.1e} (must be < 1e-12)", hint or how)
        moments_ok = errs["m"] < 1e-12 and errs["v"] < 1e-12
        err = errs["param"]
        line = f"param, 5 steps, {flag}, vs minibert"
        if err < 1e-12 and errs["update"] < 1e-9:
            r.ok(f"{line:<44s} max_rel_error {err:.1e} (< 1e-12)")
        else:
            hint = diagnose(p, known) or (None if not moments_ok else
                                          "decay first (param *= 1 - lr * weight_decay), then param -= lr * m_hat / "
                                          "(sqrt(v_hat) + eps) with m_hat = m / (1 - beta1**t) and "
                                          "v_hat = v / (1 - beta2**t)")
            r.fail(f"{line:<44s} max_rel_error {err:.1e} (must be < 1e-12); "
                   f"the total update is off by {errs['update']:.1e}", hint)

    # ---- the hyper-parameters are arguments: other values than the defaults
    hp = dict(lr=3e-2, beta1=0.8, beta2=0.99, eps=1e-3, weight_decay=0.05)
    ref = _reference_adamw(p0, grads, True, hp=hp)
    *_, (_, p, m, v) = _student_adamw(r, p0, grads, True, hp)
    err = max(max_rel_error(p, ref[-1][0]), max_rel_error(m, ref[-1][1]), max_rel_error(v, ref[-1][2]))
    line = "betas (0.8, 0.99), eps 1e-3, 5 steps"
    r.expect(err < 1e-12, f"{line:<44s} max_rel_error {err:.1e}" + (" (< 1e-12)" if err < 1e-12 else
                                                                     " (must be < 1e-12)"),
             "use the beta1, beta2, eps, lr and weight_decay arguments everywhere (in the moments, the bias "
             "corrections and the update), not BERT's values written into the code")
