"""Multi-head scaled dot-product attention, its padding mask, and the head reshapes.

Shapes: B (batch), A (heads), T (sequence length), D (head size), H = A * D.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .activations import softmax_backward, softmax_forward
from .common import get_array_module, require
from .dropout import dropout_backward, dropout_forward
from .linear import half_matmul, to_half


class AttentionCache(NamedTuple):
    """What ``attention_backward`` needs, whichever implementation made it."""
    q: object            # (B, A, T, D)
    k: object            # (B, A, T, D)
    v: object            # (B, A, T, D)
    probs: object        # (B, A, T, T) softmax of the scores
    probs_d: object      # probs after dropout (probs itself without dropout; float16 in mixed precision)
    drop_mask: object    # None, or (B, A, T, T): 0 or 1/(1-p) per probability (dropout's own mask)
    scale: float         # 1 / sqrt(D)
    dead: object         # (B,) bool: sequences whose every key is masked, or None


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


def check_attention(q, k, v) -> None:
    require(q.ndim == k.ndim == v.ndim == 4 and k.shape == v.shape and q.shape[:2] == k.shape[:2]
            and q.shape[3] == k.shape[3],
            f"attention_forward: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}; each must "
            f"be (B, A, T, D) with the same B, A and D (split_heads makes them from (B, T, H))")


def dead_sequences(mask_bias):
    """(B,) bool, True for a sequence whose every key is masked; None when there is none."""
    if mask_bias is None:
        return None
    dead = (mask_bias[:, 0, 0, :] != 0).all(axis=-1)
    return dead if bool(dead.any()) else None


def operand(a, like):
    """``a`` as a product's operand in ``like``'s precision: rounded to float16 in mixed precision
    (``like`` float16) unless it comes so, else as it is."""
    return to_half(a) if like.dtype == np.float16 and a.dtype != np.float16 else a


def product(a, b, widen=True):
    """a @ b over the last two axes.  Float16 operands (mixed precision) are multiplied as a GPU's
    tensor cores do, float32 sums rounded to float16 (``half_matmul``), and the result widened to
    float32 for the softmax and the gradients around it, or, ``widen=False``, left in float16 for a
    linear layer's product (``ops.linear``), which takes it so."""
    if a.dtype == np.float16:
        c = half_matmul(a, b)
        return c.astype(np.float32) if widen else c
    return a @ b


def attention_forward(q, k, v, mask_bias, dropout_p=0.0, rng=None, train=False):
    """Scaled dot-product attention for all heads at once.

    q, k, v: (B, A, T, D); mask_bias: (B, 1, 1, T) additive, or None.
        S = q k^T / sqrt(D) + mask_bias      (B, A, T, T)
        P = softmax(S) over the keys, then dropout
        out = P v                            (B, A, T, D)
    Returns (out, ``AttentionCache``).

    In mixed precision q, k and v come in float16: both products take float16 operands
    (P rounded to float16 for the second), S, the softmax and the dropout stay float32, and
    out is the float16 product, the operand of the output projection's.
    """
    check_attention(q, k, v)
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = product(q, k.swapaxes(-1, -2)) * scale
    if mask_bias is not None:
        scores += mask_bias
    probs, _ = softmax_forward(scores, axis=-1)
    probs_d, mask = dropout_forward(probs, dropout_p, rng, train)
    probs_d = operand(probs_d, q)
    out = product(probs_d, v, widen=False)
    return out, AttentionCache(q, k, v, probs, probs_d, mask, scale, dead_sequences(mask_bias))


def attention_backward(dout, cache):
    """dout: (B, A, T, D)  ->  dq, dk, dv: (B, A, T, D).

        dv = P'^T dout;  dP' = dout v^T;  dS = softmax'(dropout'(dP')) / sqrt(D)
        dq = dS k;       dk = dS^T q
    The mask bias is a constant, so it only acts through the softmax.  In mixed precision
    (float16 q, k, v) the products take dout and dS rounded to float16, as the forward's did
    (dout may come so), and dq, dk, dv are their float16 results, the operand of the input
    projection's products (its bias gradient sums them in float32).

    One corner case: in a sequence whose keys are all masked, every score is
    q.k/sqrt(D) plus the most negative float, and in floating point that sum
    no longer depends on q.k at all.  The softmax is then exactly uniform
    whatever q and k are, so the true derivative with respect to q and k is 0,
    and that is what we return.  (Autograd frameworks differentiate the
    exact-arithmetic formula instead and report a gradient that finite
    differences do not see.)
    """
    q, k, v = cache.q, cache.k, cache.v
    dout = operand(dout, q)
    dv = product(cache.probs_d.swapaxes(-1, -2), dout, widen=False)
    dprobs = dropout_backward(product(dout, v.swapaxes(-1, -2)), cache.drop_mask)
    dscores = softmax_backward(dprobs, (cache.probs, -1)) * cache.scale
    if cache.dead is not None:
        dscores[cache.dead] = 0
    dscores = operand(dscores, q)
    dq = product(dscores, k, widen=False)
    dk = product(dscores.swapaxes(-1, -2), q, widen=False)
    return dq, dk, dv


def split_qkv(qkv, bias, num_heads, half_out=False):
    """q, k, v from the one product that makes them, with its bias added.

    qkv: (B, T, 3H), the product x [W_q; W_k; W_v]^T made without its bias (``linear_forward(x, W,
    None)``); bias: (3H,)  ->  q, k, v: (B, A, T, D) each, C-ordered, so that each head's (T, D)
    block is contiguous (the batched products of attention then run at full speed).  One pass that
    adds the bias and copies, in the fast sets of ops.  ``half_out`` (mixed precision): rounded to
    float16, attention's operands, from the float32 sum of the float16 product and the bias.
    """
    B, T, H3 = qkv.shape
    require(bias.shape == (H3,) and H3 % (3 * num_heads) == 0,
            f"split_qkv: qkv {tuple(qkv.shape)} must be (B, T, 3H) with H a multiple of num_heads = {num_heads}, "
            f"and its bias (3H,); got {tuple(bias.shape)}")
    y = qkv + bias
    if half_out:
        y = to_half(y)
    q, k, v = get_array_module(y).ascontiguousarray(y.reshape(B, T, 3, num_heads, H3 // (3 * num_heads))
                                                    .transpose(2, 0, 3, 1, 4))
    return q, k, v


def merge_qkv(dq, dk, dv):
    """The backward of ``split_qkv``: dq, dk, dv (B, A, T, D) each  ->  the gradient of its input qkv,
    (B, T, 3H), in their dtype (float16 in mixed precision, the input projection's operand).  The
    gradient of its bias is this summed over the rows, which the input projection's backward
    makes (its db)."""
    B, A, T, D = dq.shape
    dqkv = get_array_module(dq).empty((B, T, 3, A, D), dtype=dq.dtype)
    for i, g in enumerate((dq, dk, dv)):
        dqkv[:, :, i] = g.transpose(0, 2, 1, 3)
    return dqkv.reshape(B, T, 3 * A * D)


def split_heads(x, num_heads):
    """(B, T, H) -> (B, A, T, D)."""
    B, T, H = x.shape
    return x.reshape(B, T, num_heads, H // num_heads).transpose(0, 2, 1, 3)


def merge_heads(x):
    """(B, A, T, D) -> (B, T, H)."""
    B, A, T, D = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, T, A * D)
