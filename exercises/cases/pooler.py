"""The pooler's and the NSP head's usual mistakes.

pooled = tanh(z), z = h[:, 0] W_p^T + b_p: only [CLS] is read, so the backward
pass gives dhidden[:, 0] = dz W_p and zero elsewhere, with dz = dpooled * (1 - pooled^2)
(tanh' = 1 - tanh^2, written with the OUTPUT of tanh).  logits = pooled W_n^T + b_n.
"""
from __future__ import annotations

import numpy as np

from .table import Table


def _cls(h):
    return h[:, 0]


def _pooler_forward(read=_cls, act=np.tanh):
    """pooler_forward reading the row ``read(h)`` (B, H); the cache keeps z for the cases that use it."""
    def pooler_forward(hidden, W, b):
        x = read(hidden)
        z = x @ W.T + b
        y = act(z)
        return y, (hidden.shape, x, W, z, y)
    return pooler_forward


def _tanh_grad(z, y):
    return 1.0 - y ** 2


def _at_cls(shape, dx):
    """The gradient of [CLS]'s row, put back at position 0 of a zero (B, T, H)."""
    dh = np.zeros(shape)
    dh[:, 0] = dx
    return dh


def _pooler_backward(deriv=_tanh_grad, place=_at_cls, dW=None, db=None):
    """pooler_backward with tanh' = ``deriv(z, y)``, dhidden = ``place(shape, dx)``, and dW, db as given."""
    def pooler_backward(dpooled, cache):
        shape, x, W, z, y = cache
        dz = dpooled * deriv(z, y)
        return (place(shape, dz @ W), dz.T @ x if dW is None else dW(dz, x),
                dz.sum(axis=0) if db is None else db(dz))
    return pooler_backward


def _nsp_forward(act=None, bias=True):
    def nsp_head_forward(pooled, W, b):
        logits = pooled @ W.T + (b if bias else 0.0)
        return (logits if act is None else act(logits)), (pooled, W)
    return nsp_head_forward


def _nsp_backward(dW=None):
    def nsp_head_backward(dlogits, cache):
        pooled, W = cache
        return dlogits @ W, dlogits.T @ pooled if dW is None else dW(dlogits, pooled), dlogits.sum(axis=0)
    return nsp_head_backward


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _everywhere(shape, dx):
    return np.broadcast_to(dx[:, None, :], shape).copy()


TABLE = Table("pooler", pooler_forward=_pooler_forward(), pooler_backward=_pooler_backward(),
              nsp_head_forward=_nsp_forward(), nsp_head_backward=_nsp_backward())
case = TABLE.case

ONLY_CLS = ("only [CLS] (position 0) was read, so only dhidden[:, 0] gets a gradient: dhidden is zeros of "
            "hidden's shape with dz @ W at position 0, and exactly 0 at every other position")

# ---- the pooler's forward pass
case("the last token instead of [CLS]", "BERT pools the hidden state of [CLS], the FIRST position: hidden[:, 0], "
                                        "not the last one (hidden[:, -1])",
     pooler_forward=_pooler_forward(read=lambda h: h[:, -1]),
     pooler_backward=_pooler_backward(place=lambda shape, dx: _last(shape, dx)))
case("the mean over the positions", "BERT's pooler reads one position, [CLS] (hidden[:, 0]): no mean over the "
                                    "tokens (that is another way to pool a sentence, not BERT's)",
     pooler_forward=_pooler_forward(read=lambda h: h.mean(axis=1)))
case("no tanh", "pooled = tanh(hidden[:, 0] W^T + b): the pooler is a dense layer followed by tanh",
     pooler_forward=_pooler_forward(act=lambda z: z))

# ---- the pooler's backward pass
case("tanh derivative as 1 - tanh", "tanh'(z) = 1 - tanh(z)^2: square pooled, dz = dpooled * (1 - pooled**2), "
                                    "not 1 - pooled",
     pooler_backward=_pooler_backward(deriv=lambda z, y: 1.0 - y))
case("tanh derivative from the pre-activation", "tanh'(z) = 1 - tanh(z)^2 = 1 - pooled^2: square the OUTPUT of "
                                                "tanh (pooled), not its input z",
     pooler_backward=_pooler_backward(deriv=lambda z, y: 1.0 - z ** 2))
case("tanh left out of the backward pass", "go back through tanh first: dz = dpooled * (1 - pooled**2), then "
                                           "the dense layer's gradients from dz",
     pooler_backward=_pooler_backward(deriv=lambda z, y: 1.0))
case("gradient spread to every position", ONLY_CLS, pooler_backward=_pooler_backward(place=_everywhere))
case("gradient averaged over the positions", "do not share dz @ W out over the T positions: [CLS] alone was read, "
                                             "so it gets all of it and the others get 0",
     pooler_backward=_pooler_backward(place=lambda shape, dx: _everywhere(shape, dx) / shape[1]))
case("dW transposed", "dW has W's layout (out, in): dW = dz^T @ hidden[:, 0], not hidden[:, 0]^T @ dz (both are "
                      "(H, H), so the shape cannot tell)",
     pooler_backward=_pooler_backward(dW=lambda dz, x: x.T @ dz))
DB_SHAPE = case("db not summed over the batch", "db has b's shape (H,): b is added to every example, so sum dz "
                                                "over the batch (axis 0)",
                pooler_backward=_pooler_backward(db=lambda dz: dz))
case("db averaged over the batch", "db is the SUM of dz over the batch, not the mean",
     pooler_backward=_pooler_backward(db=lambda dz: dz.mean(axis=0)))

# ---- the NSP head
case("softmax in the NSP head", "the NSP head returns logits, raw scores pooled @ W.T + b: the softmax belongs to "
                                "the loss (softmax cross-entropy), not to the head",
     nsp_head_forward=_nsp_forward(act=_softmax))
case("NSP head without its bias", "logits = pooled @ W.T + b: add the NSP head's bias",
     nsp_head_forward=_nsp_forward(bias=False))
NSP_DW_SHAPE = case("NSP dW transposed", "the NSP head's dW has W's shape (2, H): dlogits^T @ pooled, not "
                                         "pooled^T @ dlogits",
                    nsp_head_backward=_nsp_backward(dW=lambda dl, x: x.T @ dl))


def _last(shape, dx):
    dh = np.zeros(shape)
    dh[:, -1] = dx
    return dh


def _cosh_backward(dpooled, cache):
    """The same dz from the pre-activation: tanh'(z) = 1 / cosh(z)^2."""
    shape, x, W, z, y = cache
    dz = dpooled / np.cosh(z) ** 2
    dh = np.concatenate([(dz @ W)[:, None, :], np.zeros((shape[0], shape[1] - 1, shape[2]))], axis=1)
    return dh, np.einsum("bo,bi->oi", dz, x), np.einsum("bo->o", dz)


TABLE.variant("tanh' as 1 / cosh^2, dhidden by concatenation, sums with einsum", pooler_backward=_cosh_backward)
