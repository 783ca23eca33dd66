"""The pieces the capstone (exercise ``bert``) is built from, and minibert's own version of each.

The capstone assembles BERT from the student's own functions of the earlier
exercises and calls them by their names.  When it is wrong, the checker puts
minibert's version of one piece in place of the student's (``swapped``) and
runs the stage again: the first piece whose swap makes it right is the wrong
one.  minibert's versions are its library's functions (``minibert.ops``,
``minibert.optim``) adapted to the exercises' signatures; nothing here is an
exercise's solution that the library does not already hold.

This module runs in the worker process too (``worker.py``'s ``swap``), so it
imports nothing of the checker.
"""
from __future__ import annotations

import types

import numpy as np

from minibert import ops as L
from minibert.ops.dropout import uniform
from minibert.optim import linear_warmup_decay

# exercise -> the functions of it the capstone calls, in the course's order (the order of the swaps)
PIECES = {
    "embedding": ("embedding_forward", "embedding_backward"),
    "linear": ("linear_forward", "linear_backward"),
    "layernorm": ("layernorm_forward", "layernorm_backward"),
    "gelu": ("gelu_forward", "gelu_backward"),
    "attention": ("attention_dropout_forward", "attention_dropout_backward"),
    "dropout": ("dropout_forward", "dropout_backward"),
    "cross_entropy": ("softmax_cross_entropy_forward", "softmax_cross_entropy_backward"),
    "pooler": ("pooler_forward", "pooler_backward", "nsp_head_forward", "nsp_head_backward"),
    "adamw": ("adamw_step",),
    "schedule": ("learning_rate", "clip_by_global_norm"),
}
MODEL_PIECES = tuple(PIECES)[:8]           # what the forward and backward passes call
TRAINING_PIECES = ("adamw", "schedule")    # what the training loop adds
# where each piece is written: attention with dropout on its weights is the dropout exercise's second part
EXERCISE_OF = {**{p: p for p in PIECES}, "attention": "dropout"}


def _layernorm_forward(x, gamma, beta, eps=1e-12):
    return L.layernorm_forward(x, gamma, beta, eps)


def _draws(rng, dtype):
    """minibert's dropout asks a function of the shape for its uniform draws; the exercises pass a Generator."""
    return None if rng is None else (lambda shape: uniform(rng, shape, dtype))


def _attention_dropout_forward(q, k, v, attention_mask, p, rng, *, train):
    return L.attention_forward(q, k, v, L.attention_mask_bias(attention_mask, q.dtype), p,
                               _draws(rng, q.dtype), train)


def _dropout_forward(x, p, rng, *, train):
    return L.dropout_forward(x, p, _draws(rng, x.dtype), train)


def _pooler_forward(hidden, W, b):
    z, c_linear = L.linear_forward(hidden[:, 0], W, b)        # the [CLS] position
    pooled, c_tanh = L.tanh_forward(z)
    return pooled, (hidden.shape, c_linear, c_tanh)


def _pooler_backward(dpooled, cache):
    shape, c_linear, c_tanh = cache
    dcls, dW, db = L.linear_backward(L.tanh_backward(dpooled, c_tanh), c_linear)
    dhidden = np.zeros(shape, dtype=dcls.dtype)
    dhidden[:, 0] = dcls
    return dhidden, dW, db


def _adamw_step(param, grad, m, v, t, *, lr, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.01, decay=True):
    p, m, v = (np.array(a, dtype=np.float64).reshape(-1) for a in (param, m, v))
    g = np.asarray(grad, dtype=np.float64).reshape(-1)
    L.adamw_update(p, g, m, v, beta1, beta2, lr / (1.0 - beta1 ** t), np.sqrt(1.0 - beta2 ** t), eps,
                   1.0 - lr * weight_decay, p.size if decay else 0)
    shape = np.shape(param)
    return p.reshape(shape), m.reshape(shape), v.reshape(shape)


def _learning_rate(step, *, peak_lr, warmup_steps, total_steps):
    return peak_lr * linear_warmup_decay(step, total_steps, warmup_steps)


def _clip_by_global_norm(grads, max_norm):
    norm = float(np.sqrt(sum(float((g * g).sum()) for g in grads)))
    scale = min(1.0, max_norm / (norm + 1e-6))                # minibert.optim.clip_grad_norm's factor
    return [g * scale for g in grads], norm


MINIBERTS = {
    "embedding_forward": L.embedding_forward, "embedding_backward": L.embedding_backward,
    "linear_forward": L.linear_forward, "linear_backward": L.linear_backward,
    "layernorm_forward": _layernorm_forward, "layernorm_backward": L.layernorm_backward,
    "gelu_forward": L.gelu_forward, "gelu_backward": L.gelu_backward,
    "attention_dropout_forward": _attention_dropout_forward, "attention_dropout_backward": L.attention_backward,
    "dropout_forward": _dropout_forward, "dropout_backward": L.dropout_backward,
    "softmax_cross_entropy_forward": L.softmax_cross_entropy_forward,
    "softmax_cross_entropy_backward": L.softmax_cross_entropy_backward,
    "pooler_forward": _pooler_forward, "pooler_backward": _pooler_backward,
    "nsp_head_forward": L.linear_forward, "nsp_head_backward": L.linear_backward,
    "adamw_step": _adamw_step,
    "learning_rate": _learning_rate, "clip_by_global_norm": _clip_by_global_norm,
}


def miniberts(pieces) -> dict:
    """{function name: minibert's version} for the functions of ``pieces`` (names of ``PIECES``)."""
    return {f: MINIBERTS[f] for p in pieces for f in PIECES[p]}


def swapped(functions: dict, pieces) -> dict:
    """``functions`` (the student's capstone functions) as they would be with minibert's ``pieces``
    in place of theirs.

    A function finds a piece by its name in its module's globals (a file's, or a notebook's), so
    each function is rebuilt over a copy of those globals with minibert's pieces written in;
    every other function of the same globals (a helper the student wrote) is rebuilt over the
    copy too, so that it calls the swapped pieces as well.  The student's own globals are not
    changed.
    """
    replace = miniberts(pieces)
    copies: dict = {}

    def rebuilt(f):
        g = getattr(f, "__globals__", None)
        if not isinstance(f, types.FunctionType) or g is None:
            return f
        if id(g) not in copies:
            new = dict(g)
            copies[id(g)] = new
            for name, value in g.items():
                if isinstance(value, types.FunctionType) and value.__globals__ is g and name not in replace:
                    new[name] = _with_globals(value, new)
            new.update({name: value for name, value in replace.items()})
        new = copies[id(g)]
        return _with_globals(f, new)

    return {name: rebuilt(f) for name, f in functions.items()}


def _with_globals(f, g):
    out = types.FunctionType(f.__code__, g, f.__name__, f.__defaults__, f.__closure__)
    out.__kwdefaults__ = f.__kwdefaults__
    out.__qualname__, out.__doc__ = f.__qualname__, f.__doc__
    return out
