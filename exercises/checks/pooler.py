"""BERT's pooler (tanh of a dense layer on [CLS]) and the NSP head (2-way linear), forward and backward.

The pooler's forward pass is compared with the ``pooler_output`` of a small
float64 ``BertModel`` on its own hidden states, and its dW and db with that
model's gradients; then, on random data large enough for tanh to bend,
every result is compared with minibert's ops and gradient-checked.
"""
from __future__ import annotations

import numpy as np

from minibert import BertConfig, BertModel
from minibert import ops as L

from ..cases import pooler as cases
from ..harness import as_array, compare, grad_check
from ..report import Report
from .common import bwd, forward_output, fwd, unpack

T = cases.TABLE
B, TT, H = 3, 5, 4                 # B != H, so that a db of shape (B, H) cannot pass for (H,)
SHAPE_HINT = "dhidden has hidden's shape (B, T, H): zeros, with the gradient of [CLS] at position 0"


def check(r: Report) -> None:
    rng = np.random.default_rng(5)
    hidden = rng.standard_normal((B, TT, H))
    W, b = rng.standard_normal((H, H)) * 0.6, rng.standard_normal(H) * 0.5   # z of about unit size: tanh bends
    _check_pooler(r, rng, hidden, W, b)
    _check_nsp_head(r, rng)
    _check_against_bert(r, rng)


def _pooler_grads(r: Report, dpooled, cache, hidden, W, b):
    """The student's (dhidden, dW, db), checked for their shapes."""
    def grads(m):
        return m.pooler_backward(dpooled, m.pooler_forward(hidden, W, b)[1])
    result = bwd(r, "pooler_backward", dpooled, cache, hint=T.raised(grads))
    dh, dW, db = unpack(r, "pooler_backward", result, 3, "dhidden, dW, db")
    return (as_array(r, "dhidden", dh, hidden.shape, SHAPE_HINT),
            as_array(r, "dW (pooler)", dW, W.shape, "dW has W's shape (H, H): dz^T @ hidden[:, 0]"),
            as_array(r, "db (pooler)", db, b.shape, cases.DB_SHAPE.hint)), grads


def _check_pooler(r: Report, rng, hidden, W, b) -> None:
    z, _ = L.linear_forward(hidden[:, 0], W, b)
    want, _ = L.tanh_forward(z)
    pooled, cache = fwd(r, "pooler_forward", hidden, W, b)
    pooled = as_array(r, "pooled", pooled, (B, H), "pooled is (B, H): one vector per sequence, from hidden[:, 0]")
    compare(r, "pooled vs minibert (dense + tanh on [CLS])", pooled, want,
            known=T.known(lambda m: m.pooler_forward(hidden, W, b)[0]))
    dpooled = rng.standard_normal((B, H))
    got, grads = _pooler_grads(r, dpooled, cache, hidden, W, b)
    f = forward_output(r, "pooler_forward", hidden, W, b)
    for i, (name, param) in enumerate((("dhidden", hidden), ("dW (pooler)", W), ("db (pooler)", b))):
        grad_check(r, name, f, param, dpooled, got[i],
                   known=T.known(lambda m, i=i: grads(m)[i], of="pooler_backward"))
    r.expect(not got[0][:, 1:].any(), "dhidden is exactly 0 at positions 1 to T-1", cases.ONLY_CLS)


def _check_nsp_head(r: Report, rng) -> None:
    pooled = np.tanh(rng.standard_normal((B, H)))
    W, b = rng.standard_normal((2, H)), rng.standard_normal(2)
    want, _ = L.linear_forward(pooled, W, b)
    logits, cache = fwd(r, "nsp_head_forward", pooled, W, b)
    logits = as_array(r, "logits", logits, (B, 2), "logits are (B, 2): pooled @ W.T + b, W stored as (2, H)")
    compare(r, "logits vs minibert (2-way linear)", logits, want,
            known=T.known(lambda m: m.nsp_head_forward(pooled, W, b)[0]))
    dlogits = rng.standard_normal((B, 2))

    def grads(m):
        return m.nsp_head_backward(dlogits, m.nsp_head_forward(pooled, W, b)[1])
    result = bwd(r, "nsp_head_backward", dlogits, cache, hint=T.raised(grads))
    dp, dW, db = unpack(r, "nsp_head_backward", result, 3, "dpooled, dW, db")
    got = (as_array(r, "dpooled", dp, pooled.shape, "dpooled has pooled's shape (B, H): dlogits @ W"),
           as_array(r, "dW (NSP head)", dW, W.shape, cases.NSP_DW_SHAPE.hint),
           as_array(r, "db (NSP head)", db, b.shape, "db has b's shape (2,): sum dlogits over the batch"))
    f = forward_output(r, "nsp_head_forward", pooled, W, b)
    for i, (name, param) in enumerate((("dpooled", pooled), ("dW (NSP head)", W), ("db (NSP head)", b))):
        grad_check(r, name, f, param, dlogits, got[i], known=T.known(lambda m, i=i: grads(m)[i]))


def _check_against_bert(r: Report, rng) -> None:
    """The pooler of a real (small, untrained) BertModel: its pooler_output and its pooler's gradients."""
    config = BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=8)
    model = BertModel(config, seed=1, dtype="float64")
    ids = rng.integers(5, 20, size=(2, 6))
    out = model(ids, train=False)
    hidden = out.last_hidden_state
    W, b = model.pooler.weight, model.pooler.bias
    pooled, cache = fwd(r, "pooler_forward", hidden, W, b)
    pooled = as_array(r, "pooled of a BertModel", pooled, out.pooler_output.shape)
    compare(r, "pooled vs BertModel's pooler_output", pooled, out.pooler_output,
            known=T.known(lambda m: m.pooler_forward(hidden, W, b)[0]))
    dpooled = rng.standard_normal(pooled.shape)
    model.backward(np.zeros_like(hidden), dpooled)
    want = model.grad_state_dict()
    result = unpack(r, "pooler_backward", bwd(r, "pooler_backward", dpooled, cache), 3, "dhidden, dW, db")
    for name, param, got in (("dW", "weight", result[1]), ("db", "bias", result[2])):
        ref = want[f"pooler.dense.{param}"]
        got = as_array(r, f"{name} of a BertModel's pooler", got, ref.shape)
        compare(r, f"{name} vs BertModel's pooler.dense.{param} grad", got, ref)
