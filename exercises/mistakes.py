"""Planted mistakes: the solutions with one usual error each, to prove the checkers catch them.

``MISTAKES[exercise]`` lists ``Mistake(name, module, hint)``: ``module``
behaves like the solution module except for one function, and ``hint`` is a
piece of the hint the checker must give for it.  Instructor-only (left out
of the student copy, since each one is a near-solution).
"""
from __future__ import annotations

import functools
import importlib
import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np


@dataclass
class Mistake:
    name: str
    module: object
    hint: str


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
         one_replacement=False, clamp=True, specials_first=False, ceil=False, fixed_p=False):
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
            elif u < 0.9:
                masked[pos] = token_all if one_replacement else replacement()
        return masked, labels
    return mask_tokens


# ---------------------------------------------------------------------- nsp_pairing
def _nsp(flip=False, same_doc_ok=False, truncate=True, is_next_prob=0.5, copy=True, alternate=False):
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
            else:
                other = int(rng.integers(0, len(documents) - 1))
                other += other >= doc_index
            doc = documents[other]
            b, label = own(doc[int(rng.integers(0, len(doc)))]), 1
        while truncate and len(a) + len(b) > max_len - 3:
            (a if len(a) > len(b) else b).pop()
        if flip:
            label = 1 - label
        ids = [cls_id] + a + [sep_id] + b + [sep_id]
        return ids, [0] * (len(a) + 2) + [1] * (len(b) + 1), label
    return make_nsp_example


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
        ],
        "gelu": [
            M("tanh approximation", variant("gelu", gelu_forward=_gelu_tanh_forward), "tanh approximation"),
            M("derivative without x phi(x)", variant("gelu", gelu_backward=_gelu_cdf_only_backward),
              "product rule"),
            M("density without 1/sqrt(2 pi)", variant("gelu", gelu_backward=_gelu_unnormalised_pdf),
              "sqrt(2 pi)"),
        ],
        "softmax": [
            M("no max subtraction", variant("softmax", softmax_forward=_softmax_unstable), "row maximum"),
            M("diagonal-only backward", variant("softmax", softmax_backward=_softmax_diagonal_backward),
              "diagonal of the Jacobian"),
            M("normalised over axis 0", variant("softmax", softmax_forward=_softmax_axis0), "axis 0"),
            M("maximum of the whole array", variant("softmax", softmax_forward=_softmax_global_max),
              "each row's own"),
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
