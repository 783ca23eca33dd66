"""BERT's two pre-training heads on the encoder's output, forward and backward.

Masked language modelling: dense + GELU + LayerNorm, then a decoder whose
weight is the word-embedding matrix (tied) plus a bias of its own, run only
at the labelled positions when there are labels.  Next sentence prediction:
a 2-way linear layer on the pooled [CLS] vector.  Shapes: B, T, H, V
(vocabulary), N (labelled positions).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..constants import IGNORE_INDEX
from .encoder import Linear, Norm, backward_linear, backward_norm, gelu_kind, linear_weights, norm_weights
from ..ops.common import get_array_module
from .params import ParamSpec

DENSE, NORM = "cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm"
WORD, DECODER_BIAS = "bert.embeddings.word_embeddings.weight", "cls.predictions.bias"   # the decoder is tied
NSP = "cls.seq_relationship"


@dataclass
class HeadWeights:
    """The pre-training heads by role; the Hugging Face names below ``cls.``."""
    dense: Linear      # predictions.transform.dense (H, H)
    norm: Norm         # predictions.transform.LayerNorm
    decoder: Linear    # the word-embedding table (V, H), tied (its gradient is the table's), + predictions.bias
    nsp: Linear        # seq_relationship (2, H)


def head_specs(H, V):
    return [ParamSpec(DENSE + ".weight", (H, H), "normal", True), ParamSpec(DENSE + ".bias", (H,), "zeros", False),
            ParamSpec(NORM + ".weight", (H,), "ones", False), ParamSpec(NORM + ".bias", (H,), "zeros", False),
            ParamSpec(DECODER_BIAS, (V,), "zeros", False),
            ParamSpec(NSP + ".weight", (2, H), "normal", True), ParamSpec(NSP + ".bias", (2,), "zeros", False)]


def head_weights(store, half=False) -> HeadWeights:
    """The heads' weights: views into ``store`` (float16 copies of the matrices in mixed precision)."""
    table = (store.halves if half else store.params)[WORD]
    return HeadWeights(dense=linear_weights(store, DENSE, half), norm=norm_weights(store, NORM),
                       decoder=Linear(table, store.params[DECODER_BIAS], store.grads[WORD], store.grads[DECODER_BIAS]),
                       nsp=linear_weights(store, NSP, half))


def heads_forward(ops, h, pooled, w: HeadWeights, config, mlm_labels, positions=None):
    """h: (B, T, H); pooled: (B, H)  ->  (mlm_logits, nsp_logits, positions), cache.

    With ``mlm_labels`` (B, T) the MLM head runs at the N labelled positions
    only (``positions``: their flat indices b*T + t, found here unless given)
    and mlm_logits is (N, V); without, at every position: (B, T, V).
    """
    B, T, H = h.shape
    if mlm_labels is not None:
        if positions is None:
            positions = get_array_module(h).flatnonzero(mlm_labels.reshape(-1) != IGNORE_INDEX)
        hm = h.reshape(B * T, H)[positions]                                 # (N, H)
    else:
        positions, hm = None, h
    c = {"shape": h.shape, "positions": positions}
    t, c["dense"] = ops.linear_forward(hm, w.dense.weight, None)        # the GELU adds the bias
    t, c["gelu"] = ops.gelu_forward(t, gelu_kind(config.hidden_act), bias=w.dense.bias)
    t, c["ln"] = ops.layernorm_forward(t, w.norm.gamma, w.norm.beta, config.layer_norm_eps)
    mlm_logits, c["decoder"] = ops.linear_forward(t, w.decoder.weight, w.decoder.bias)
    # NSP head on the pooled [CLS]
    nsp_logits, c["nsp"] = ops.linear_forward(pooled, w.nsp.weight, w.nsp.bias)
    return (mlm_logits, nsp_logits, positions), c


def loss_weight(loss_scale, n_here, count):
    """The factor on a mean loss that turns it into its rows' sum divided by ``count`` instead.

    A data-parallel rank holds ``n_here`` of the global batch's ``count``
    rows; the global loss is their sum over ``count``, and d(global)/d(row)
    is 1/count, not the rank's own 1/n_here.
    """
    return loss_scale if count is None else loss_scale * (n_here / count)


def heads_backward(ops, c, mlm_ce, nsp_ce, w: HeadWeights, loss_scale, add, dtype, loss_counts=None):
    """Gradients of ``loss_scale`` times the losses  ->  dh (B, T, H), dpooled (B, H) or None.

    ``c``: the heads' cache; ``mlm_ce``, ``nsp_ce``: the caches of the two losses (None where a loss
    was not taken).  ``add(buffer, g)`` adds each parameter gradient to its buffer.  ``loss_counts``:
    None, or (masked tokens, sequences) to divide the losses' sums by instead of this batch's own
    counts (the global batch's, in data parallelism).
    """
    mlm_count, nsp_count = loss_counts if loss_counts is not None else (None, None)
    dpooled = None
    if nsp_ce is not None:
        dnsp = ops.softmax_cross_entropy_backward(loss_weight(loss_scale, nsp_ce.denom, nsp_count), nsp_ce)
        dpooled = backward_linear(ops, dnsp, c["nsp"], w.nsp, add, half_dx=True)     # tanh's backward widens it
    B, T, H = c["shape"]
    dh = get_array_module(w.norm.gamma).zeros((B, T, H), dtype=dtype)
    if mlm_ce is not None:
        dlogits = ops.softmax_cross_entropy_backward(loss_weight(loss_scale, mlm_ce.denom, mlm_count), mlm_ce)
        # the tied decoder's share of the word-embedding gradient (the embedding adds its own later)
        dt = backward_linear(ops, dlogits, c["decoder"], w.decoder, add, half_dx=True)  # LayerNorm's widens it
        del dlogits                     # (N, V): freed before the encoder's backward
        dt = backward_norm(ops, dt, c["ln"], w.norm, add)
        dhm = backward_linear(ops, ops.gelu_backward(dt, c["gelu"]), c["dense"], w.dense, add)
        # positions are distinct, so a plain indexed assignment scatters the rows back
        dh.reshape(B * T, H)[c["positions"]] = dhm
    return dh, dpooled
