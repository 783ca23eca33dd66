"""BERT's building blocks, each a forward/backward pair written by hand.

Every ``*_forward`` returns ``(out, cache)``; the matching ``*_backward``
takes the upstream gradient and that cache and returns the gradients of the
inputs and parameters.  The functions work on NumPy and CuPy arrays alike:
the array module is read off the inputs with ``get_array_module``.

Shapes use B (batch), T (sequence length), H (hidden size), A (heads),
D = H / A (head size), I (intermediate size), V (vocabulary), N (rows).

The code below is the reference.  For float32 NumPy arrays, the functions
whose elementwise work costs the most hand it to ``fast.py`` (marked
"fast path"): the same formulas computed in cache-sized blocks on all
cores, equal to the reference bit for bit or within float32 rounding (see
that module).  For CuPy arrays the same functions hand it to
``gpu_fused.py`` (marked "GPU path"): one CUDA kernel per formula instead of
one per expression.  ``MINIBERT_FAST=0`` runs the reference everywhere.
"""
from __future__ import annotations

import math

import numpy as np

from . import fast, gpu_fused
from .backend import erf_fn, scatter_add_rows


def get_array_module(a):
    """numpy for NumPy arrays, cupy for CuPy arrays."""
    if type(a).__module__.split(".")[0] == "cupy":
        import cupy
        return cupy
    return np


def _require(ok: bool, message: str) -> None:
    """A layer's shape check: one clear line instead of NumPy's broadcasting error further in."""
    if not ok:
        raise ValueError(message)


# --------------------------------------------------------------------------- linear
def linear_forward(x, W, b):
    """y = x W^T + b, with W in PyTorch's [out, in] layout.

    x: (..., in); W: (out, in); b: (out,)  ->  y: (..., out)

    The leading axes are flattened first: one (N, in) x (in, out) product is
    one BLAS call, where a (B, T, in) @ (in, out) product would be B calls.

    A float16 ``W`` (mixed precision, see ``half_matmul``) makes the product
    a half-precision one: x is rounded to float16 and kept so for the
    backward, and y comes back in b's dtype (float32).
    """
    _require(W.ndim == 2 and b.shape == (W.shape[0],) and x.ndim >= 1 and x.shape[-1] == W.shape[1],
             f"linear_forward: x {tuple(x.shape)}, W {tuple(W.shape)}, b {tuple(b.shape)}; "
             f"W is (out, in), so x must end in in = W.shape[1] and b be (out,)")
    if W.dtype == np.float16:
        with np.errstate(over="ignore"):   # beyond 65504 -> inf: the loss reports it
            x16 = x.astype(np.float16)
        # float16 + float32 promotes to float32: the widening and the bias add are one pass
        y = half_matmul(x16.reshape(-1, x.shape[-1]), W.T) + b
        return y.reshape(x.shape[:-1] + (W.shape[0],)), (x16, W)
    if fast.applies(x, W, b):  # fast path: the product and the bias add, rows over all cores
        y = fast.gemm(x.reshape(-1, x.shape[-1]), W.T, b)
        return y.reshape(x.shape[:-1] + (W.shape[0],)), (x, W)
    y = x.reshape(-1, x.shape[-1]) @ W.T
    y += b
    return y.reshape(x.shape[:-1] + (W.shape[0],)), (x, W)


def linear_backward(dy, cache):
    """dy: (..., out)  ->  dx (..., in), dW (out, in), db (out,).

    With x flattened to (N, in):  dx = dy W,  dW = dy^T x,  db = sum_n dy.
    In mixed precision (a float16 W) both products take dy rounded to
    float16, and dx, dW come back in dy's dtype; db is summed from dy itself.
    """
    x, W = cache
    dy2 = dy.reshape(-1, dy.shape[-1])
    x2 = x.reshape(-1, x.shape[-1])
    if W.dtype == np.float16:
        with np.errstate(over="ignore"):   # too large a loss scale -> inf: the LossScaler looks for it
            dy16 = dy2.astype(np.float16)
        dx = half_matmul(dy16, W).astype(dy.dtype).reshape(x.shape)
        dW = half_matmul(dy16.T, x2).astype(dy.dtype)
        return dx, dW, dy2.sum(axis=0)
    mm = fast.gemm if fast.applies(dy2, x2, W) else get_array_module(dy2).matmul  # fast path: see linear_forward
    dx = mm(dy2, W).reshape(x.shape)
    dW = mm(dy2.T, x2)
    db = dy2.sum(axis=0)
    return dx, dW, db


def half_matmul(a, b):
    """a @ b for float16 matrices: products summed in float32, the result rounded to float16.

    a: (N, K) float16; b: (K, M) float16  ->  (N, M) float16

    That is what a GPU does with CuPy's float16 matmul (cuBLAS, tensor
    cores, float32 accumulation), and why mixed precision is fast there.
    NumPy has no fast float16 product, so on the CPU the operands are widened
    to float32 (exactly: every float16 is a float32), multiplied by BLAS,
    and the result rounded back: the same numbers up to the order of the
    float32 sums, but slower than float32 (the conversions are extra passes).
    """
    xp = get_array_module(a)
    if xp is not np:
        return xp.matmul(a, b)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    mm = fast.gemm if fast.applies(a32, b32) else np.matmul
    # an overflow gives inf (and inf * 0 NaN): loss scaling looks for them
    with np.errstate(over="ignore", invalid="ignore"):
        return mm(a32, b32).astype(np.float16)


# ------------------------------------------------------------------------ embedding
def embedding_forward(ids, W):
    """Row lookup: out[b, t] = W[ids[b, t]].

    ids: (B, T) int; W: (V, H)  ->  out: (B, T, H)
    """
    if isinstance(ids, np.ndarray) and ids.size:     # (on a GPU the check would wait for the device)
        _require(ids.dtype.kind in "iu" and 0 <= ids.min() and ids.max() < W.shape[0],
                 f"embedding_forward: ids must be ints in [0, {W.shape[0]}) (the rows of W), "
                 f"got {ids.dtype} from {ids.min()} to {ids.max()}")
    return W[ids], (ids, W.shape)


def embedding_backward(dout, cache, padding_idx=None, out=None):
    """dW[v] = sum of dout over every position whose id is v.

    dout: (B, T, H)  ->  dW: (V, H).  The row ``padding_idx`` (BERT's
    ``[PAD]``) gets no gradient, as with PyTorch's ``nn.Embedding``.
    ``out``: a (V, H) array to add the sums into instead of a new array of
    zeros (the model's gradient buffer, which may already hold the tied MLM
    decoder's share; its ``padding_idx`` row is left as it is).
    """
    ids, shape = cache
    xp = get_array_module(dout)
    dW = xp.zeros(shape, dtype=dout.dtype) if out is None else out
    scatter_add_rows(xp, dW, ids.reshape(-1), dout.reshape(-1, shape[1]), skip=padding_idx)
    return dW


# ------------------------------------------------------------------------ layernorm
def layernorm_forward(x, gamma, beta, eps):
    """Normalise each row over the last axis, then scale and shift.

    y = gamma * (x - mean) / sqrt(var + eps) + beta, with the biased variance.
    x: (..., H); gamma, beta: (H,)  ->  y: (..., H)
    """
    _require(x.ndim >= 1 and gamma.shape == beta.shape == (x.shape[-1],),
             f"layernorm_forward: x {tuple(x.shape)} is normalised over its last axis, so gamma and "
             f"beta must be ({x.shape[-1] if x.ndim else '?'},); got {tuple(gamma.shape)} and {tuple(beta.shape)}")
    if fast.applies(x, gamma, beta):  # fast path: the same operations, row blocks on all cores
        return fast.layernorm_forward(x, gamma, beta, eps)
    if gpu_fused.applies(x, gamma, beta):  # GPU path: one block per row
        return gpu_fused.layernorm_forward(x, gamma, beta, eps)
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=-1, keepdims=True)
    rstd = 1.0 / (var + eps) ** 0.5
    xhat = xc * rstd
    y = xhat * gamma + beta
    return y, (xhat, rstd, gamma)


def layernorm_backward(dy, cache):
    """dy: (..., H)  ->  dx (..., H), dgamma (H,), dbeta (H,).

    With g = dy * gamma, the mean and variance both depend on every x in the
    row, which gives the two correction terms:
        dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
    """
    xhat, rstd, gamma = cache
    if fast.applies(dy, xhat):  # fast path
        return fast.layernorm_backward(dy, cache)
    if gpu_fused.applies(dy, xhat, rstd, gamma):  # GPU path
        return gpu_fused.layernorm_backward(dy, cache)
    H = dy.shape[-1]
    dgamma = (dy * xhat).reshape(-1, H).sum(axis=0)
    dbeta = dy.reshape(-1, H).sum(axis=0)
    g = dy * gamma
    dx = rstd * (g - g.mean(axis=-1, keepdims=True)
                 - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    return dx, dgamma, dbeta


# ----------------------------------------------------------------------------- gelu
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_TANH_C = 0.044715


def gelu_forward(x, approximate="none"):
    """GELU(x) = x * Phi(x), Phi the standard normal CDF.

    approximate="none": exact, Phi(x) = (1 + erf(x / sqrt 2)) / 2
        (HF ``hidden_act="gelu"``).
    approximate="tanh": Phi(x) ~ (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2,
        the form google-research/bert used (HF ``"gelu_new"``).
    x: any shape -> same shape.
    """
    xp = get_array_module(x)
    if approximate in ("none", "tanh") and fast.applies(x):
        # fast path: float32 erf in float64 blocks (within 1 ulp of SciPy's), on all cores
        return fast.gelu_forward(x, approximate)
    if approximate in ("none", "tanh") and gpu_fused.applies(x):  # GPU path: one kernel
        return gpu_fused.gelu_forward(x, approximate)
    if approximate == "none":
        cdf = 0.5 * (1.0 + erf_fn(xp)(x * _INV_SQRT_2))
        return x * cdf, (x, cdf, None)
    if approximate == "tanh":
        t = xp.tanh(_SQRT_2_OVER_PI * (x + _GELU_TANH_C * x * x * x))
        return 0.5 * x * (1.0 + t), (x, None, t)
    raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")


def gelu_backward(dy, cache):
    """d/dx [x Phi(x)] = Phi(x) + x phi(x), phi the normal density.

    For the tanh form, with u = sqrt(2/pi) (x + c x^3) and t = tanh u:
        d/dx = (1 + t) / 2 + x (1 - t^2) sqrt(2/pi) (1 + 3 c x^2) / 2
    """
    x, cdf, t = cache
    xp = get_array_module(x)
    if fast.applies(dy, x):  # fast path: the same operations, blocked and threaded
        return fast.gelu_backward(dy, cache)
    if gpu_fused.applies(dy, x, cdf if t is None else t):  # GPU path: one kernel
        return gpu_fused.gelu_backward(dy, cache)
    if t is None:
        pdf = _INV_SQRT_2PI * xp.exp(-0.5 * x * x)
        return dy * (cdf + x * pdf)
    dudx = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_TANH_C * x * x)
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dudx)


# ------------------------------------------------------------------------- tanh
def tanh_forward(x):
    """y = tanh(x); used by the pooler.  x: any shape."""
    xp = get_array_module(x)
    y = xp.tanh(x)
    return y, y


def tanh_backward(dy, cache):
    """dtanh/dx = 1 - tanh^2."""
    y = cache
    return dy * (1.0 - y * y)


# -------------------------------------------------------------------------- softmax
def softmax_forward(x, axis=-1):
    """Numerically stable softmax along ``axis``.

    Subtracting the row maximum leaves the result unchanged (it cancels
    between numerator and denominator) and keeps exp() from overflowing.
    """
    xp = get_array_module(x)
    z = x - x.max(axis=axis, keepdims=True)
    e = xp.exp(z)
    p = e / e.sum(axis=axis, keepdims=True)
    return p, (p, axis)


def softmax_backward(dp, cache):
    """dx_i = p_i (dp_i - sum_j dp_j p_j): the Jacobian diag(p) - p p^T applied to dp."""
    p, axis = cache
    return p * (dp - (dp * p).sum(axis=axis, keepdims=True))


# -------------------------------------------------------------------------- dropout
def dropout_forward(x, p, rng, train):
    """Inverted dropout: zero each entry with probability p, scale the rest by 1/(1-p).

    Scaling at training time keeps E[out] = x, so nothing changes at
    inference.  ``rng(shape)`` must return uniform samples in [0, 1) of x's
    dtype (the model passes its own seeded generator).  With ``train=False``
    or p == 0 this is the identity.
    """
    if not train or p == 0.0:
        return x, None
    if fast.applies(x):  # fast path: one draw as below, mask and product in blocks
        return fast.dropout_mask_apply(x, rng(x.shape), p)
    if gpu_fused.applies(x):  # GPU path: the same draw, mask and product in one kernel
        return gpu_fused.dropout_forward(x, rng(x.shape), p)
    keep = rng(x.shape) >= p
    scale = x.dtype.type(1.0 / (1.0 - p))
    mask = keep * scale  # entries are 0 or 1/(1-p), in x's dtype
    return x * mask, mask


def dropout_backward(dout, cache):
    mask = cache
    if mask is not None and fast.applies(dout, mask) and dout.shape == mask.shape:
        return fast.multiply(dout, mask)  # fast path
    return dout if mask is None else dout * mask


# ------------------------------------------------------------------------ attention
def attention_mask_bias(attention_mask, dtype):
    """Additive bias from a keep/pad mask, as HF builds it.

    attention_mask: (B, T) with 1 = attend, 0 = padding  ->  (B, 1, 1, T),
    0 where kept and the most negative finite number where padded, so that
    softmax gives padded keys a weight of exactly 0.  A row with no kept key
    gets the same bias everywhere and so a uniform, finite softmax (no NaN).
    """
    neg = np.finfo(dtype).min
    bias = (1.0 - attention_mask.astype(dtype)) * neg
    return bias[:, None, None, :]


def attention_forward(q, k, v, mask_bias, dropout_p=0.0, rng=None, train=False):
    """Scaled dot-product attention for all heads at once.

    q, k, v: (B, A, T, D); mask_bias: (B, 1, 1, T) additive.
        S = q k^T / sqrt(D) + mask_bias      (B, A, T, T)
        P = softmax(S) over the keys, then dropout
        out = P v                            (B, A, T, D)
    """
    _require(q.ndim == k.ndim == v.ndim == 4 and k.shape == v.shape and q.shape[:2] == k.shape[:2]
             and q.shape[3] == k.shape[3],
             f"attention_forward: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}; each must "
             f"be (B, A, T, D) with the same B, A and D (split_heads makes them from (B, T, H))")
    scale = 1.0 / math.sqrt(q.shape[-1])
    if fast.applies(q, k, v):
        # fast path: the B*A small products spread over the cores (one BLAS thread each), then
        # scale, mask, softmax and dropout in one pass over row blocks
        probs, probs_d, do_cache = fast.attention_probs(fast.matmul(q, k.swapaxes(-1, -2)), scale,
                                                        mask_bias, dropout_p, rng, train)
        sm_cache = (probs, -1)
        out = fast.matmul(probs_d, v)
    elif gpu_fused.applies(q, k, v):
        # GPU path: scale, mask, softmax and dropout in one kernel per score row
        probs, probs_d, do_cache = gpu_fused.attention_probs(q @ k.swapaxes(-1, -2), scale, mask_bias,
                                                             dropout_p, rng, train)
        sm_cache = (probs, -1)
        out = probs_d @ v
    else:
        scores = (q @ k.swapaxes(-1, -2)) * scale
        if mask_bias is not None:
            scores += mask_bias
        probs, sm_cache = softmax_forward(scores, axis=-1)
        probs_d, do_cache = dropout_forward(probs, dropout_p, rng, train)
        out = probs_d @ v
    # sequences whose every key is masked (attention_mask all 0): see attention_backward
    dead = None
    if mask_bias is not None:
        dead = (mask_bias[:, 0, 0, :] != 0).all(axis=-1)
        dead = dead if bool(dead.any()) else None
    return out, (q, k, v, probs_d, sm_cache, do_cache, scale, dead)


def attention_backward(dout, cache, out=None):
    """dout: (B, A, T, D)  ->  dq, dk, dv: (B, A, T, D).

    ``out``, optional: a (3, B, A, T, D) array that receives dq, dk and dv
    (they are then views of it), so a caller that wants them stacked saves a copy.

    The mask bias is a constant, so it only acts through the softmax.

    One corner case: in a sequence whose keys are all masked, every score is
    q.k/sqrt(D) plus the most negative float, and in floating point that sum
    no longer depends on q.k at all.  The softmax is then exactly uniform
    whatever q and k are, so the true derivative with respect to q and k is 0,
    and that is what we return.  (Autograd frameworks differentiate the
    exact-arithmetic formula instead and report a gradient that finite
    differences do not see.)
    """
    q, k, v, probs_d, sm_cache, do_cache, scale, dead = cache
    xp = get_array_module(dout)
    if out is None:
        out = xp.empty((3,) + q.shape, dtype=q.dtype)
    dq, dk, dv = out
    is_fast = fast.applies(dout, q, k, v)
    mm = fast.matmul if is_fast else xp.matmul  # fast path: see attention_forward
    mm(probs_d.swapaxes(-1, -2), dout, out=dv)
    if is_fast:
        # fast path: dropout and softmax backward in one pass over row blocks, on all cores
        dscores = fast.attention_dscores(mm(dout, v.swapaxes(-1, -2)), sm_cache[0], do_cache, scale, dead)
    elif gpu_fused.applies(sm_cache[0]) and (do_cache is None or isinstance(do_cache, tuple)):
        # GPU path (the forward took it): dropout and softmax backward in one kernel per row
        dscores = gpu_fused.attention_dscores(dout @ v.swapaxes(-1, -2), sm_cache[0], do_cache, scale, dead)
    else:
        dprobs = dropout_backward(dout @ v.swapaxes(-1, -2), do_cache)
        dscores = softmax_backward(dprobs, sm_cache) * scale
        if dead is not None:
            dscores[dead] = 0
    mm(dscores, k, out=dq)
    mm(dscores.swapaxes(-1, -2), q, out=dk)
    return dq, dk, dv


def split_heads(x, num_heads):
    """(B, T, H) -> (B, A, T, D)."""
    B, T, H = x.shape
    return x.reshape(B, T, num_heads, H // num_heads).transpose(0, 2, 1, 3)


def merge_heads(x):
    """(B, A, T, D) -> (B, T, H)."""
    B, A, T, D = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, T, A * D)


# -------------------------------------------------------------- cross-entropy loss
def softmax_cross_entropy_forward(logits, labels, ignore_index=-100):
    """Mean negative log-likelihood over the rows whose label is not ``ignore_index``.

    logits: (N, C); labels: (N,) int  ->  loss (a 0-d array), cache.
    The log-softmax is computed stably as z - max - log(sum(exp(z - max))).
    With no labelled row the loss is 0 (and so is its gradient).
    """
    _require(logits.ndim == 2 and tuple(labels.shape) == (logits.shape[0],),
             f"softmax_cross_entropy_forward: logits must be (N, C) and labels (N,), got "
             f"{tuple(logits.shape)} and {tuple(labels.shape)}")
    if fast.applies(logits) and logits.ndim == 2:
        # fast path: fused, per row block; keeps two numbers per row instead of log p
        return fast.softmax_cross_entropy_forward(logits, labels, ignore_index)
    xp = get_array_module(logits)
    valid = labels != ignore_index
    n_valid = int(valid.sum())
    safe = xp.where(valid, labels, 0)
    z = logits - logits.max(axis=-1, keepdims=True)
    logsumexp = xp.log(xp.exp(z).sum(axis=-1, keepdims=True))
    logp = z - logsumexp
    picked = xp.take_along_axis(logp, safe[:, None], axis=-1)[:, 0]
    denom = max(n_valid, 1)
    loss = -(picked * valid).sum() / denom
    return loss, (logp, safe, valid, denom)


def softmax_cross_entropy_backward(dloss, cache):
    """dlogits = (softmax(logits) - onehot(label)) / n_valid, zero on ignored rows."""
    if isinstance(cache, fast.CrossEntropyCache):  # fast path (forward took it)
        return fast.softmax_cross_entropy_backward(dloss, cache)
    logp, safe, valid, denom = cache
    xp = get_array_module(logp)
    dlogits = xp.exp(logp)
    dlogits[xp.arange(len(safe)), safe] -= 1.0
    dlogits *= (valid * (dloss / denom))[:, None].astype(logp.dtype)
    return dlogits
