"""BERT's two pre-training heads on the encoder's output, forward and backward.

Masked language modelling: dense + GELU + LayerNorm, then a decoder whose
weight is the word-embedding matrix (tied) plus a bias of its own, run only
at the labelled positions when there are labels.  Next sentence prediction:
a 2-way linear layer on the pooled [CLS] vector.  Shapes: B, T, H, V
(vocabulary), N (labelled positions).
"""
from __future__ import annotations

from .constants import IGNORE_INDEX
from .encoder import gelu_kind
from .ops.common import get_array_module
from .params import ParamSpec

DENSE, NORM = "cls.predictions.transform.dense.", "cls.predictions.transform.LayerNorm."
DECODER, DECODER_BIAS = "bert.embeddings.word_embeddings.weight", "cls.predictions.bias"   # tied to the embedding
NSP = "cls.seq_relationship."


def head_specs(H, V):
    return [ParamSpec(DENSE + "weight", (H, H), "normal", True), ParamSpec(DENSE + "bias", (H,), "zeros", False),
            ParamSpec(NORM + "weight", (H,), "ones", False), ParamSpec(NORM + "bias", (H,), "zeros", False),
            ParamSpec(DECODER_BIAS, (V,), "zeros", False),
            ParamSpec(NSP + "weight", (2, H), "normal", True), ParamSpec(NSP + "bias", (2,), "zeros", False)]


def heads_forward(ops, h, pooled, W, P, config, mlm_labels, caches):
    """h: (B, T, H); pooled: (B, H)  ->  mlm_logits, nsp_logits, positions (caches filled in).

    W: the matrices the products use (float16 copies in mixed precision); P:
    the parameters.  With ``mlm_labels`` (B, T) the MLM head runs at the N
    labelled positions only (``positions``: their flat indices b*T + t) and
    mlm_logits is (N, V); without, at every position: (B, T, V).
    """
    B, T, H = h.shape
    if mlm_labels is not None:
        positions = get_array_module(h).flatnonzero(mlm_labels.reshape(-1) != IGNORE_INDEX)
        hm = h.reshape(B * T, H)[positions]                                 # (N, H)
    else:
        positions, hm = None, h
    t, caches["mlm_dense"] = ops.linear_forward(hm, W[DENSE + "weight"], P[DENSE + "bias"])
    t, caches["mlm_gelu"] = ops.gelu_forward(t, gelu_kind(config.hidden_act))
    t, caches["mlm_ln"] = ops.layernorm_forward(t, P[NORM + "weight"], P[NORM + "bias"], config.layer_norm_eps)
    mlm_logits, caches["decoder"] = ops.linear_forward(t, W[DECODER], P[DECODER_BIAS])
    # NSP head on the pooled [CLS]
    nsp_logits, caches["nsp"] = ops.linear_forward(pooled, W[NSP + "weight"], P[NSP + "bias"])
    return mlm_logits, nsp_logits, positions


def loss_weight(loss_scale, n_here, count):
    """The factor on a mean loss that turns it into its rows' sum divided by ``count`` instead.

    A data-parallel rank holds ``n_here`` of the global batch's ``count``
    rows; the global loss is their sum over ``count``, and d(global)/d(row)
    is 1/count, not the rank's own 1/n_here.
    """
    return loss_scale if count is None else loss_scale * (n_here / count)


def heads_backward(ops, caches, loss_scale, add, dtype, loss_counts=None):
    """Gradients of ``loss_scale`` times the losses  ->  dh (B, T, H), dpooled (B, H) or None.

    ``add(name, g)`` adds each parameter gradient to its buffer.  ``loss_counts``: None,
    or (masked tokens, sequences) to divide the losses' sums by instead of
    this batch's own counts (the global batch's, in data parallelism).
    """
    mlm_count, nsp_count = loss_counts if loss_counts is not None else (None, None)
    dpooled = None
    if "nsp_ce" in caches:
        ce = caches["nsp_ce"]
        dnsp = ops.softmax_cross_entropy_backward(loss_weight(loss_scale, ce.denom, nsp_count), ce)
        dpooled, dW, db = ops.linear_backward(dnsp, caches["nsp"])
        add(NSP + "weight", dW)
        add(NSP + "bias", db)
    B, T = caches["shape"]
    H = caches["mlm_ln"].gamma.shape[0]
    dh = get_array_module(caches["mlm_ln"].gamma).zeros((B, T, H), dtype=dtype)
    if "mlm_ce" in caches:
        ce = caches["mlm_ce"]
        dlogits = ops.softmax_cross_entropy_backward(loss_weight(loss_scale, ce.denom, mlm_count), ce)
        dt, dW_dec, db = ops.linear_backward(dlogits, caches["decoder"])
        # the tied decoder's share of the word-embedding gradient (the embedding adds its own later)
        add(DECODER, dW_dec)
        del dW_dec, dlogits   # (V, H) and (N, V): freed before the encoder's backward
        add(DECODER_BIAS, db)
        dt, dg, db = ops.layernorm_backward(dt, caches["mlm_ln"])
        add(NORM + "weight", dg)
        add(NORM + "bias", db)
        dt = ops.gelu_backward(dt, caches["mlm_gelu"])
        dhm, dW, db = ops.linear_backward(dt, caches["mlm_dense"])
        add(DENSE + "weight", dW)
        add(DENSE + "bias", db)
        # positions are distinct, so a plain indexed assignment scatters the rows back
        dh.reshape(B * T, H)[caches["positions"]] = dhm
    return dh, dpooled
