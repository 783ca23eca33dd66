"""Planted mistakes: the solutions with one usual error each, to prove the checkers catch them.

``build()[exercise]`` lists ``Mistake(name, module, hint)``: ``module``
behaves like the solution module except for one function, and ``hint`` is a
piece of the hint the checker must give for it, under the first FAIL line.
``correct_variants()[exercise]`` lists ``Variant(name, module)``: right
answers written differently from the solution (google-research/bert's
choices among them), which the checker must pass.  Instructor-only (left out
of the student copy, since each one is a near-solution).
"""
from __future__ import annotations

import functools
import importlib
import math
import types
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np


@dataclass
class Mistake:
    name: str
    module: object
    hint: str


@dataclass
class Variant:
    name: str
    module: object


def variant(exercise: str, **overrides):
    """The solution module of ``exercise`` with some functions replaced."""
    base = importlib.import_module(f"exercises.solutions.{exercise}")
    ns = SimpleNamespace(**{k: v for k, v in vars(base).items() if not k.startswith("__")})
    for k, v in overrides.items():
        setattr(ns, k, v)
    ns.__name__ = f"{exercise} (planted mistake)"
    return ns


def _softmax(s, axis=-1):
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# --------------------------------------------------------------------------- linear
def _linear_db_mean(dy, cache):
    x, W = cache
    dy2 = dy.reshape(-1, dy.shape[-1])
    return dy @ W, dy2.T @ x.reshape(-1, x.shape[-1]), dy2.mean(axis=0)


def _linear_dW_transposed(dy, cache):
    x, W = cache
    dy2 = dy.reshape(-1, dy.shape[-1])
    x2 = x.reshape(-1, x.shape[-1])
    return dy @ W, x2.T @ dy2, dy2.sum(axis=0)


def _linear_dx_wrong(dy, cache):
    x, W = cache
    dy2 = dy.reshape(-1, dy.shape[-1])
    return dy @ W.T, dy2.T @ x.reshape(-1, x.shape[-1]), dy2.sum(axis=0)


def _linear_no_bias(x, W, b):
    return x @ W.T, (x, W)


# ------------------------------------------------------------------------ embedding
def _embedding_overwrite(dout, cache, padding_idx=None):
    ids, shape = cache
    dW = np.zeros(shape)
    dW[ids] += dout                    # repeated ids: only one row of dout survives
    if padding_idx is not None:
        dW[padding_idx] = 0
    return dW


def _embedding_keeps_pad(dout, cache, padding_idx=None):
    ids, shape = cache
    dW = np.zeros(shape)
    np.add.at(dW, ids.reshape(-1), dout.reshape(-1, shape[1]))
    return dW


# ------------------------------------------------------------------------ layernorm
def _ln_no_mean_term(dy, cache):
    xhat, rstd, gamma = cache
    H = dy.shape[-1]
    g = dy * gamma
    dx = rstd * (g - xhat * (g * xhat).mean(-1, keepdims=True))
    return dx, (dy * xhat).reshape(-1, H).sum(0), dy.reshape(-1, H).sum(0)


def _ln_no_var_term(dy, cache):
    xhat, rstd, gamma = cache
    H = dy.shape[-1]
    g = dy * gamma
    dx = rstd * (g - g.mean(-1, keepdims=True))
    return dx, (dy * xhat).reshape(-1, H).sum(0), dy.reshape(-1, H).sum(0)


def _ln_backward_3d_only(dy, cache):
    xhat, rstd, gamma = cache
    g = dy * gamma
    dx = rstd * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True))
    return dx, (dy * xhat).sum(axis=(0, 1)), dy.sum(axis=(0, 1))


def _ln_unbiased_forward(x, gamma, beta, eps=1e-12):
    mu = x.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(x.var(-1, ddof=1, keepdims=True) + eps)
    xhat = (x - mu) * rstd
    return gamma * xhat + beta, (xhat, rstd, gamma)


def _ln_forward(stats, eps_default=1e-12, var_sum=False):
    """A LayerNorm forward whose mean and variance come from ``stats(x) -> (mu, var)``."""
    def layernorm_forward(x, gamma, beta, eps=eps_default):
        mu, var = stats(x)
        if var_sum:
            var = var * x.shape[-1]
        rstd = 1.0 / np.sqrt(var + eps)
        xhat = (x - mu) * rstd
        return gamma * xhat + beta, (xhat, rstd, gamma)
    return layernorm_forward


def _row_stats(x):
    mu = x.mean(-1, keepdims=True)
    return mu, ((x - mu) ** 2).mean(-1, keepdims=True)


def _batch_stats(x):                   # over the batch axis, as BatchNorm does (no keepdims: broadcasts)
    mu = x.mean(axis=0)
    return mu, ((x - mu) ** 2).mean(axis=0)


def _ln_dgamma_without_xhat(dy, cache):
    xhat, rstd, gamma = cache
    H = dy.shape[-1]
    g = dy * gamma
    dx = rstd * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True))
    return dx, dy.reshape(-1, H).sum(0), dy.reshape(-1, H).sum(0)


def _ln_backward_n_form(dy, cache):
    # correct: the same dx written with sums, (1/H) r (H g - sum g - xhat sum(g xhat))
    xhat, rstd, gamma = cache
    H = dy.shape[-1]
    g = dy * gamma
    dx = rstd / H * (H * g - g.sum(-1, keepdims=True) - xhat * (g * xhat).sum(-1, keepdims=True))
    lead = tuple(range(dy.ndim - 1))
    return dx, (dy * xhat).sum(axis=lead), dy.sum(axis=lead)


# ----------------------------------------------------------------------------- gelu
def _gelu_tanh_forward(x):
    t = np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))
    return 0.5 * x * (1 + t), (x, None)


def _gelu_cdf_only_backward(dy, cache):
    x, cdf = cache
    return dy * cdf


def _gelu_unnormalised_pdf(dy, cache):
    x, cdf = cache
    return dy * (cdf + x * np.exp(-0.5 * x * x))


def _gelu_erf_half_forward(x):
    cdf = 0.5 * (1.0 + _erf(x / 2.0))
    return x * cdf, (x, cdf)


def _gelu_density_without_half(dy, cache):
    x, cdf = cache
    return dy * (cdf + x * np.exp(-x * x) / math.sqrt(2 * math.pi))


def _erf(x):
    from scipy.special import erf
    return erf(x)


# -------------------------------------------------------------------------- softmax
def _softmax_unstable(x):
    e = np.exp(x)
    p = e / e.sum(axis=-1, keepdims=True)
    return p, p


def _softmax_global_max(x):
    e = np.exp(x - x.max())
    p = e / e.sum(axis=-1, keepdims=True)
    return p, p


def _softmax_diagonal_backward(dp, cache):
    p = cache
    return p * (1 - p) * dp


def _softmax_axis0(x):
    p = _softmax(x, axis=0)
    return p, p


def _softmax_backward_plain_sum(dp, cache):
    p = cache
    return p * (dp - dp.sum(axis=-1, keepdims=True))


# ------------------------------------------------------------------------ attention
def _att_mask_after_softmax(q, k, v, attention_mask):
    D = q.shape[-1]
    scale = 1.0 / math.sqrt(D)
    probs = _softmax(q @ k.swapaxes(-1, -2) * scale) * attention_mask[:, None, None, :]
    return probs @ v, (q, k, v, probs, scale)


def _att_no_scale(q, k, v, attention_mask):
    bias = np.where(attention_mask == 1, 0.0, np.finfo(q.dtype).min)[:, None, None, :]
    probs = _softmax(q @ k.swapaxes(-1, -2) + bias)
    return probs @ v, (q, k, v, probs, 1.0)


def _att_unstable(q, k, v, attention_mask):
    scale = 1.0 / math.sqrt(q.shape[-1])
    bias = np.where(attention_mask == 1, 0.0, np.finfo(q.dtype).min)[:, None, None, :]
    e = np.exp(q @ k.swapaxes(-1, -2) * scale + bias)
    probs = e / e.sum(axis=-1, keepdims=True)
    return probs @ v, (q, k, v, probs, scale)


def _att_backward_no_scale(dout, cache):
    q, k, v, probs, scale = cache
    dv = probs.swapaxes(-1, -2) @ dout
    dprobs = dout @ v.swapaxes(-1, -2)
    dscores = probs * (dprobs - (dprobs * probs).sum(-1, keepdims=True))
    return dscores @ k, dscores.swapaxes(-1, -2) @ q, dv


def _att_mask_queries(q, k, v, attention_mask):
    D = q.shape[-1]
    scale = 1.0 / math.sqrt(D)
    bias = np.where(attention_mask == 1, 0.0, np.finfo(q.dtype).min)[:, None, :, None]
    probs = _softmax(q @ k.swapaxes(-1, -2) * scale + bias)
    return probs @ v, (q, k, v, probs, scale)


def _att(scale_of=lambda q: 1.0 / math.sqrt(q.shape[-1]), masked=None, axis=-1, dtype=None):
    """An attention forward with one piece changed.

    masked(scores, attention_mask) -> the masked scores; dtype: the type the
    probabilities are computed in (the result goes back to float64 through v).
    """
    def attention_forward(q, k, v, attention_mask):
        scale = scale_of(q)
        scores = (q @ k.swapaxes(-1, -2)) * scale
        if masked is None:
            scores = scores + np.where(attention_mask == 1, 0.0, np.finfo(q.dtype).min)[:, None, None, :]
        else:
            scores = masked(scores, attention_mask[:, None, None, :])
        if dtype is not None:
            scores = scores.astype(dtype)
        probs = _softmax(scores, axis=axis)
        return probs @ v, (q, k, v, probs, scale)
    return attention_forward


def _att_probs_float32(q, k, v, attention_mask):
    out, (q, k, v, probs, scale) = _att()(q, k, v, attention_mask)
    probs = probs.astype(np.float32)                 # "to save memory"
    return probs @ v, (q, k, v, probs, scale)


def _att_backward(sum_axis=-1, keepdims=True):
    def attention_backward(dout, cache):
        q, k, v, probs, scale = cache
        dv = probs.swapaxes(-1, -2) @ dout
        dprobs = dout @ v.swapaxes(-1, -2)
        s = (dprobs * probs).sum(axis=sum_axis, keepdims=keepdims)
        dscores = probs * (dprobs - s) * scale
        return dscores @ k, dscores.swapaxes(-1, -2) @ q, dv
    return attention_backward


# -------------------------------------------------------------------- cross_entropy
def _ce_mean_over_all(logits, labels, ignore_index=-100):
    N = logits.shape[0]
    valid = labels != ignore_index
    safe = np.where(valid, labels, 0)
    z = logits - logits.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    loss = -(logp[np.arange(N), safe] * valid).sum() / N
    return loss, (logp, safe, valid, N)


def _ce_grad_on_ignored(dloss, cache):
    logp, safe, valid, n_valid = cache
    d = np.exp(logp)
    d[np.arange(len(safe)), safe] -= 1.0
    return d * dloss / n_valid


def _ce_forward_keeps_logits(logits, labels, ignore_index=-100):
    # the solution's forward, but the cache keeps the logits instead of the log-probabilities
    solution = importlib.import_module("exercises.solutions.cross_entropy")
    loss, (_, safe, valid, n_valid) = solution.softmax_cross_entropy_forward(logits, labels, ignore_index)
    return loss, (logits, safe, valid, n_valid)


def _ce_backward_unstable(dloss, cache):
    logits, safe, valid, n_valid = cache
    e = np.exp(logits)
    d = e / e.sum(axis=1, keepdims=True)
    d[np.arange(len(safe)), safe] -= 1.0
    return d * (valid * (dloss / n_valid))[:, None]


def _ce_backward_over_n(dloss, cache):
    logp, safe, valid, n_valid = cache
    d = np.exp(logp)
    d[np.arange(len(safe)), safe] -= 1.0
    return d * (valid * (dloss / len(safe)))[:, None]


def _ce_unstable(logits, labels, ignore_index=-100):
    N = logits.shape[0]
    valid = labels != ignore_index
    n_valid = max(int(valid.sum()), 1)
    safe = np.where(valid, labels, 0)
    logp = np.log(np.exp(logits) / np.exp(logits).sum(1, keepdims=True))
    loss = -(logp[np.arange(N), safe] * valid).sum() / n_valid
    return loss, (logp, safe, valid, n_valid)


# ---------------------------------------------------------------------- mlm_masking
@functools.lru_cache(maxsize=4)
def _ordinary(vocab_size, special):
    return [t for t in range(vocab_size) if t not in special]


def _mlm(all_mask=False, specials_ok=False, label_all=False, cap=True, bernoulli=False, one_fate=False,
         one_replacement=False, clamp=True, specials_first=False, ceil=False, fixed_p=False,
         nested=False, shuffled=False):
    """mask_tokens with one usual mistake, or (nested, shuffled) written as google-research/bert does."""
    def mask_tokens(ids, rng, *, vocab_size, mask_id, special_ids, mlm_probability=0.15,
                    max_predictions=20):
        special = set(special_ids)
        candidates = [i for i, t in enumerate(ids) if specials_ok or t not in special]
        p = 0.15 if fixed_p else mlm_probability
        n = max(1, math.ceil(len(ids) * p) if ceil else int(round(len(ids) * p)))
        if cap:
            n = min(n, max_predictions)
        if clamp:
            n = min(n, len(candidates))
        if bernoulli:
            chosen = [i for i in candidates if rng.random() < mlm_probability]
        elif shuffled:          # shuffle the candidates, take the first n
            chosen = rng.permutation(candidates)[:n]
        else:
            chosen = rng.choice(candidates, size=n, replace=False)
        ordinary = _ordinary(vocab_size, frozenset(special))

        def replacement():
            if specials_first:      # as if the special ids were 0 .. len(special_ids) - 1
                return int(rng.integers(len(special), vocab_size))
            return int(ordinary[rng.integers(len(ordinary))])
        masked = list(ids)
        labels = list(ids) if label_all else [-100] * len(ids)
        u_all, token_all = rng.random(), replacement()
        for pos in chosen:
            pos = int(pos)
            labels[pos] = ids[pos]
            u = u_all if one_fate else rng.random()
            if all_mask or u < 0.8:
                masked[pos] = mask_id
            elif nested:        # the other 20%: a second draw, half kept, half random
                if rng.random() >= 0.5:
                    masked[pos] = replacement()
            elif u < 0.9:
                masked[pos] = token_all if one_replacement else replacement()
        return masked, labels
    return mask_tokens


# ---------------------------------------------------------------------- nsp_pairing
def _nsp(flip=False, same_doc_ok=False, truncate=True, is_next_prob=0.5, copy=True, alternate=False,
         no_shift=False, shorter=None, reject=False, either_end=False):
    """make_nsp_example with one usual mistake, or (reject, either_end) written as google-research/bert does.

    shorter: "pop" pops the shorter segment (until it is empty), "keep1" pops the
    shorter one but never its last token.
    """
    def make_nsp_example(documents, doc_index, sent_index, rng, *, cls_id, sep_id, max_len):
        document = documents[doc_index]
        own = list if copy else (lambda sentence: sentence)
        a = own(document[sent_index])
        coin = (doc_index + sent_index) % 2 == 1 if alternate else rng.random() < is_next_prob
        if sent_index + 1 < len(document) and coin:
            b, label = own(document[sent_index + 1]), 0
        else:
            if same_doc_ok:
                other = int(rng.integers(0, len(documents)))
            elif no_shift:      # one fewer document to draw from, but the shift is forgotten
                other = int(rng.integers(0, len(documents) - 1))
            elif reject:        # draw again until it is another document
                other = doc_index
                while other == doc_index:
                    other = int(rng.integers(0, len(documents)))
            else:
                other = int(rng.integers(0, len(documents) - 1))
                other += other >= doc_index
            doc = documents[other]
            b, label = own(doc[int(rng.integers(0, len(doc)))]), 1
        while truncate and len(a) + len(b) > max_len - 3:
            longer, other_one = (a, b) if len(a) > len(b) else (b, a)
            if shorter == "pop" or (shorter == "keep1" and len(other_one) > 1):
                longer = other_one
            if either_end and rng.random() < 0.5:
                longer.pop(0)
            else:
                longer.pop()
        if flip:
            label = 1 - label
        ids = [cls_id] + a + [sep_id] + b + [sep_id]
        return ids, [0] * (len(a) + 2) + [1] * (len(b) + 1), label
    return make_nsp_example


# -------------------------------------------------------------------------- dropout
def _dropout(scale="inverted", fresh_backward=False, keep_prob_p=False, eval_drops=False, fixed_seed=False,
             per_feature=False, keep_below=False, boolean_cache=False, binomial=False):
    """(dropout_forward, dropout_backward) with one usual mistake, or written another right way.

    scale: "inverted" (1/(1-p) at training), "eval" (none at training, (1-p) at
    evaluation: the original dropout), "times_keep" ((1-p) at training).
    """
    def dropout_forward(x, p, rng, *, train):
        if (not train and not eval_drops) or p == 0.0:
            return (x * (1.0 - p) if scale == "eval" else x), None
        if fixed_seed:
            rng = np.random.default_rng(0)
        u_shape = x.shape[-1:] if per_feature else x.shape
        if binomial:
            keep = rng.binomial(1, 1.0 - p, size=u_shape).astype(bool)
        elif keep_below:
            keep = rng.random(u_shape) < 1.0 - p
        else:
            keep = rng.random(u_shape) >= p
        if keep_prob_p:
            keep = ~keep
        factor = {"inverted": 1.0 / (1.0 - p), "eval": 1.0, "times_keep": 1.0 - p}[scale]
        if boolean_cache:
            return x * keep * factor, (keep, factor)
        mask = np.broadcast_to(keep * factor, x.shape)
        if fresh_backward:
            return x * mask, (rng, p, x.shape, factor)
        return x * mask, mask

    def dropout_backward(dout, cache):
        if cache is None:
            return dout
        if boolean_cache:
            keep, factor = cache
            return dout * keep * factor
        if fresh_backward:      # a new draw: another mask than the forward's
            rng, p, shape, factor = cache
            return dout * (rng.random(shape) >= p) * factor
        return dout * cache
    return dropout_forward, dropout_backward


def _dropout_variant(**kw):
    forward, backward = _dropout(**kw)
    # the attention functions call the module's dropout: make them call this one
    base = importlib.import_module("exercises.solutions.dropout")
    return variant("dropout", dropout_forward=forward, dropout_backward=backward,
                   attention_dropout_forward=_rebind(base.attention_dropout_forward, forward),
                   attention_dropout_backward=_rebind(base.attention_dropout_backward, backward))


def _rebind(func, dropout_func):
    """``func`` with the name of ``dropout_func`` in its globals bound to ``dropout_func``."""
    glb = dict(func.__globals__)
    glb[dropout_func.__name__] = dropout_func
    return types.FunctionType(func.__code__, glb, func.__name__, func.__defaults__, func.__closure__)


def _att_dropout(on_output=False, dv_undropped=False, no_mask_backward=False, softmax_on_dropped=False,
                 inline=False):
    """(attention_dropout_forward, attention_dropout_backward) with one mistake, or inline (right)."""
    sol = importlib.import_module("exercises.solutions.dropout")

    def attention_dropout_forward(q, k, v, attention_mask, p, rng, *, train):
        scale = 1.0 / math.sqrt(q.shape[-1])
        bias = np.where(attention_mask == 1, 0.0, np.finfo(q.dtype).min)[:, None, None, :]
        probs = _softmax((q @ k.swapaxes(-1, -2)) * scale + bias)
        if on_output:
            out, mask = sol.dropout_forward(probs @ v, p, rng, train=train)
            return out, (q, k, v, probs, probs, mask, scale)
        if inline:              # the mask written out here, and kept as 0/1 with p beside it
            keep = rng.random(probs.shape) >= p if train and p > 0 else np.ones(probs.shape, dtype=bool)
            factor = 1.0 / (1.0 - p) if train else 1.0
            dropped = probs * keep * factor
            return dropped @ v, (q, k, v, probs, dropped, keep * factor, scale)
        dropped, mask = sol.dropout_forward(probs, p, rng, train=train)
        return dropped @ v, (q, k, v, probs, dropped, mask, scale)

    def attention_dropout_backward(dout, cache):
        q, k, v, probs, dropped, mask, scale = cache
        if on_output:
            dout = sol.dropout_backward(dout, mask)
        dv = (probs if dv_undropped else dropped).swapaxes(-1, -2) @ dout
        dprobs = dout @ v.swapaxes(-1, -2)
        if not (no_mask_backward or on_output):
            dprobs = sol.dropout_backward(dprobs, mask)
        w = dropped if softmax_on_dropped else probs
        dscores = w * (dprobs - (dprobs * w).sum(axis=-1, keepdims=True)) * scale
        return dscores @ k, dscores.swapaxes(-1, -2) @ q, dv
    return attention_dropout_forward, attention_dropout_backward


def _att_dropout_variant(**kw):
    forward, backward = _att_dropout(**kw)
    return variant("dropout", attention_dropout_forward=forward, attention_dropout_backward=backward)


# ---------------------------------------------------------------------------- adamw
def _adamw(ignore_flag=False, bias_correction=True, l2=False, fixed_betas=False, fixed_eps=False):
    def adamw_step(param, grad, m, v, t, *, lr, beta1=0.9, beta2=0.999, eps=1e-6,
                   weight_decay=0.01, decay=True):
        if fixed_betas:
            beta1, beta2 = 0.9, 0.999
        if fixed_eps:
            eps = 1e-6
        if decay or ignore_flag:
            if l2:
                grad = grad + weight_decay * param
            else:
                param = param * (1 - lr * weight_decay)
        m = beta1 * m + (1 - beta1) * grad
        v = beta2 * v + (1 - beta2) * grad * grad
        mh, vh = (m / (1 - beta1 ** t), v / (1 - beta2 ** t)) if bias_correction else (m, v)
        return param - lr * mh / (np.sqrt(vh) + eps), m, v
    return adamw_step


def build() -> dict[str, list[Mistake]]:
    """Every planted mistake, per exercise (built on demand: the solutions must exist)."""
    M = Mistake
    return {
        "linear": [
            M("db averaged instead of summed", variant("linear", linear_backward=_linear_db_mean), "SUM of dy"),
            M("dW transposed", variant("linear", linear_backward=_linear_dW_transposed), "dy^T @ x"),
            M("dx with W transposed", variant("linear", linear_backward=_linear_dx_wrong), "shape mismatch"),
            M("bias left out", variant("linear", linear_forward=_linear_no_bias), "bias b is missing"),
        ],
        "embedding": [
            M("dW[ids] += dout", variant("embedding", embedding_backward=_embedding_overwrite), "np.add.at"),
            M("[PAD] row not zeroed", variant("embedding", embedding_backward=_embedding_keeps_pad),
              "padding_idx=0"),
        ],
        "layernorm": [
            M("dx without the mean term", variant("layernorm", layernorm_backward=_ln_no_mean_term),
              "missing the mean term"),
            M("dx without the variance term", variant("layernorm", layernorm_backward=_ln_no_var_term),
              "variance term"),
            M("unbiased variance", variant("layernorm", layernorm_forward=_ln_unbiased_forward), "ddof"),
            M("dgamma summed over axes (0, 1)", variant("layernorm", layernorm_backward=_ln_backward_3d_only),
              "however many there are"),
            M("variance as a sum", variant("layernorm", layernorm_forward=_ln_forward(_row_stats, var_sum=True)),
              "MEAN of (x - mu)^2"),
            M("statistics over the batch axis (BatchNorm)",
              variant("layernorm", layernorm_forward=_ln_forward(_batch_stats)), "batch normalisation"),
            M("dgamma without xhat", variant("layernorm", layernorm_backward=_ln_dgamma_without_xhat),
              "carries xhat"),
            M("PyTorch's default eps=1e-5",
              variant("layernorm", layernorm_forward=_ln_forward(_row_stats, eps_default=1e-5)),
              "uses eps = 1e-05 (PyTorch"),
        ],
        "gelu": [
            M("tanh approximation", variant("gelu", gelu_forward=_gelu_tanh_forward), "tanh approximation"),
            M("derivative without x phi(x)", variant("gelu", gelu_backward=_gelu_cdf_only_backward),
              "product rule"),
            M("density without 1/sqrt(2 pi)", variant("gelu", gelu_backward=_gelu_unnormalised_pdf),
              "sqrt(2 pi)"),
            M("erf(x / 2)", variant("gelu", gelu_forward=_gelu_erf_half_forward), "not x / 2"),
            M("density exp(-x^2)", variant("gelu", gelu_backward=_gelu_density_without_half), "not -x^2"),
        ],
        "softmax": [
            M("no max subtraction", variant("softmax", softmax_forward=_softmax_unstable), "row maximum"),
            M("diagonal-only backward", variant("softmax", softmax_backward=_softmax_diagonal_backward),
              "diagonal of the Jacobian"),
            M("normalised over axis 0", variant("softmax", softmax_forward=_softmax_axis0), "axis 0"),
            M("maximum of the whole array", variant("softmax", softmax_forward=_softmax_global_max),
              "each row's own"),
            M("backward sum without p", variant("softmax", softmax_backward=_softmax_backward_plain_sum),
              "each dp_i weighted by p_i"),
        ],
        "attention": [
            M("mask applied after the softmax", variant("attention", attention_forward=_att_mask_after_softmax),
              "after the softmax"),
            M("no 1/sqrt(D) scale", variant("attention", attention_forward=_att_no_scale), "sqrt(D)"),
            M("backward without the scale", variant("attention", attention_backward=_att_backward_no_scale),
              "also divides by sqrt(D)"),
            M("mask on queries", variant("attention", attention_forward=_att_mask_queries), "hides KEYS"),
            M("softmax without the row maximum", variant("attention", attention_forward=_att_unstable),
              "each row's maximum"),
            M("scaled by sqrt(H)",
              variant("attention", attention_forward=_att(scale_of=lambda q: 1.0 / math.sqrt(q.shape[1] * q.shape[-1]))),
              "the size of ONE head"),
            M("positive number added at padded keys",
              variant("attention", attention_forward=_att(masked=lambda s, m: s + (1.0 - m) * 10000.0)),
              "mask is turned around"),
            M("very negative number at the real keys",
              variant("attention", attention_forward=_att(masked=lambda s, m: s + m * -10000.0)),
              "mask is turned around"),
            M("0/1 mask added to the scores", variant("attention", attention_forward=_att(masked=lambda s, m: s + m)),
              "added to the scores as it is"),
            M("softmax over the queries", variant("attention", attention_forward=_att(axis=-2)), "over the keys"),
            M("softmax backward summed over the queries",
              variant("attention", attention_backward=_att_backward(sum_axis=-2)), "not over the queries"),
            M("softmax backward sum without keepdims",
              variant("attention", attention_backward=_att_backward(keepdims=False)), "keepdims=True"),
            M("probabilities kept in float32", variant("attention", attention_forward=_att_probs_float32),
              "float32 number"),
            M("scores computed in float32", variant("attention", attention_forward=_att(dtype=np.float32)),
              "becomes -inf"),
            M("mask value -inf",
              variant("attention", attention_forward=_att(masked=lambda s, m: s + np.where(m == 1, 0.0, -np.inf))),
              "-inf - (-inf) = NaN"),
        ],
        "cross_entropy": [
            M("mean over all rows", variant("cross_entropy", softmax_cross_entropy_forward=_ce_mean_over_all),
              "not by N"),
            M("gradient on ignored rows",
              variant("cross_entropy", softmax_cross_entropy_backward=_ce_grad_on_ignored), "zero gradient"),
            M("log of softmax", variant("cross_entropy", softmax_cross_entropy_forward=_ce_unstable),
              "log-softmax"),
            M("backward recomputes exp(logits)",
              variant("cross_entropy", softmax_cross_entropy_forward=_ce_forward_keeps_logits,
                      softmax_cross_entropy_backward=_ce_backward_unstable), "must be stable too"),
            M("backward divided by N",
              variant("cross_entropy", softmax_cross_entropy_backward=_ce_backward_over_n),
              "n_valid, the number of labelled rows, not by N"),
        ],
        "dropout": [
            M("scaled at evaluation instead of training", _dropout_variant(scale="eval"), "TRAINING time"),
            M("scaled by (1 - p)", _dropout_variant(scale="times_keep"), "scaled by (1 - p)"),
            M("a new mask in the backward pass", _dropout_variant(fresh_backward=True), "not draw a new one"),
            M("drops with probability 1 - p", _dropout_variant(keep_prob_p=True), "probability of DROPPING"),
            M("drops at evaluation too", _dropout_variant(eval_drops=True), "nothing is dropped at evaluation"),
            M("a generator with a fixed seed", _dropout_variant(fixed_seed=True), "rng argument"),
            M("one draw per feature", _dropout_variant(per_feature=True), "one number per ENTRY"),
            M("attention backward without the mask", _att_dropout_variant(no_mask_backward=True),
              "by the forward's dropout mask"),
            M("attention dv from the weights before dropout", _att_dropout_variant(dv_undropped=True),
              "dv = dropout(P)^T dout"),
            M("dropout on the attention output", _att_dropout_variant(on_output=True),
              "dropout goes on the attention weights"),
            M("softmax backward through the dropped weights", _att_dropout_variant(softmax_on_dropped=True),
              "before dropout"),
        ],
        "mlm_masking": [
            M("every chosen token becomes [MASK]", variant("mlm_masking", mask_tokens=_mlm(all_mask=True)),
              "only 80%"),
            M("special tokens can be chosen", variant("mlm_masking", mask_tokens=_mlm(specials_ok=True)),
              "special_ids"),
            M("labels everywhere", variant("mlm_masking", mask_tokens=_mlm(label_all=True)), "-100"),
            M("no cap on predictions", variant("mlm_masking", mask_tokens=_mlm(cap=False)), "max_predictions"),
            M("a coin flip per token", variant("mlm_masking", mask_tokens=_mlm(bernoulli=True)), "coin flip"),
            M("one 80/10/10 draw per sequence", variant("mlm_masking", mask_tokens=_mlm(one_fate=True)),
              "EACH chosen position"),
            M("one random token per sequence", variant("mlm_masking", mask_tokens=_mlm(one_replacement=True)),
              "a new random token"),
            M("n not limited to the candidates", variant("mlm_masking", mask_tokens=_mlm(clamp=False)),
              "len(candidates)"),
            M("special ids taken to be the smallest",
              variant("mlm_masking", mask_tokens=_mlm(specials_first=True)), "need not be the smallest"),
            M("math.ceil instead of round", variant("mlm_masking", mask_tokens=_mlm(ceil=True)), "not math.ceil"),
            M("mlm_probability ignored", variant("mlm_masking", mask_tokens=_mlm(fixed_p=True)),
              "mlm_probability argument"),
        ],
        "nsp_pairing": [
            M("labels flipped (1 = IsNext)", variant("nsp_pairing", make_nsp_example=_nsp(flip=True)),
              "0 = IsNext"),
            M("random B from any document", variant("nsp_pairing", make_nsp_example=_nsp(same_doc_ok=True)),
              "DIFFERENT document"),
            M("no truncation", variant("nsp_pairing", make_nsp_example=_nsp(truncate=False)), "max_len"),
            M("IsNext too rare", variant("nsp_pairing", make_nsp_example=_nsp(is_next_prob=0.15)),
              "probability 0.5"),
            M("truncation shortens the caller's sentences", variant("nsp_pairing", make_nsp_example=_nsp(copy=False)),
              "copy the sentences"),
            M("IsNext decided by the indices", variant("nsp_pairing", make_nsp_example=_nsp(alternate=True)),
              "not from doc_index or sent_index"),
            M("other document drawn without the shift", variant("nsp_pairing", make_nsp_example=_nsp(no_shift=True)),
              "DIFFERENT document"),
            M("truncation pops the shorter segment", variant("nsp_pairing", make_nsp_example=_nsp(shorter="pop")),
              "never from the shorter one"),
            M("truncation pops the shorter segment down to one token",
              variant("nsp_pairing", make_nsp_example=_nsp(shorter="keep1")), "from the LONGER"),
        ],
        "adamw": [
            M("decays LayerNorm/bias (decay flag ignored)", variant("adamw", adamw_step=_adamw(ignore_flag=True)),
              "decay=False"),
            M("no bias correction", variant("adamw", adamw_step=_adamw(bias_correction=False)),
              "bias correction"),
            M("L2 in the gradient", variant("adamw", adamw_step=_adamw(l2=True)), "L2 regularisation"),
            M("betas written into the code", variant("adamw", adamw_step=_adamw(fixed_betas=True)),
              "use the beta1, beta2"),
            M("eps written into the code", variant("adamw", adamw_step=_adamw(fixed_eps=True)), "use the beta1"),
        ],
    }


def correct_variants() -> dict[str, list[Variant]]:
    """Right answers that differ from the solutions, per exercise: each checker must pass them."""
    V = Variant
    return {
        "layernorm": [
            V("dx with sums instead of means, leading axes summed with a tuple",
              variant("layernorm", layernorm_backward=_ln_backward_n_form)),
        ],
        "attention": [
            V("additive mask of -10000 (google-research/bert)",
              variant("attention", attention_forward=_att(masked=lambda s, m: s + (1.0 - m) * -10000.0))),
            V("scores replaced at padded keys (masked_fill)",
              variant("attention", attention_forward=_att(
                  masked=lambda s, m: np.where(m == 1, s, np.finfo(s.dtype).min)))),
            V("additive mask of -1e9",
              variant("attention", attention_forward=_att(masked=lambda s, m: s - 1e9 * (1 - m)))),
        ],
        "dropout": [
            V("keep where u < 1 - p", _dropout_variant(keep_below=True)),
            V("0/1 keep and the scale in the cache", _dropout_variant(boolean_cache=True)),
            V("the mask from rng.binomial", _dropout_variant(binomial=True)),
            V("attention with the dropout written inline", _att_dropout_variant(inline=True)),
        ],
        "mlm_masking": [
            V("nested 80/10/10 draws (google-research/bert)", variant("mlm_masking", mask_tokens=_mlm(nested=True))),
            V("candidates shuffled, the first n taken (google-research/bert)",
              variant("mlm_masking", mask_tokens=_mlm(shuffled=True))),
        ],
        "nsp_pairing": [
            V("other document by drawing again (google-research/bert)",
              variant("nsp_pairing", make_nsp_example=_nsp(reject=True))),
            V("truncation from either end at random (google-research/bert)",
              variant("nsp_pairing", make_nsp_example=_nsp(either_end=True))),
        ],
    }
