"""One transformer layer of BERT's encoder, forward and backward, and its weights by role.

Shapes: B (batch), T (sequence length), H (hidden size), A (heads), D = H / A
(head size), I (intermediate size).  A layer is post-LayerNorm, as in BERT:

    a = Dropout(attention(x) W_o^T + b_o)           attention: softmax(q k^T / sqrt(D) + mask) v
    h = LayerNorm(x + a)
    f = Dropout(GELU(h W_in^T + b_in) W_out^T + b_out)
    y = LayerNorm(h + f)

The ops come from ``minibert.dispatch`` (the reference ops, or an
accelerated kernel where one is enabled and applies).
"""
from __future__ import annotations

from dataclasses import dataclass

from . import dispatch as D
from .ops.common import get_array_module
from .params import ParamSpec

QKV = ("query", "key", "value")


@dataclass
class Linear:
    """A linear layer's weights and gradient buffers: views into the model's ``ParamStore``."""
    weight: object    # (out, in): the matrix the product uses (its float16 copy in mixed precision)
    bias: object      # (out,)
    dweight: object   # (out, in): its gradient, in the model's dtype
    dbias: object     # (out,)


@dataclass
class Norm:
    """A LayerNorm's scale and shift (HF: ``LayerNorm.weight`` and ``.bias``) and their gradients."""
    gamma: object     # (H,)
    beta: object      # (H,)
    dgamma: object
    dbeta: object


@dataclass
class LayerWeights:
    """The weights of one layer by role; the Hugging Face names below ``encoder.layer.<i>.``."""
    qkv: Linear        # attention.self.{query,key,value}: three (H, H) stacked, one (3H, H) product
    attn_out: Linear   # attention.output.dense (H, H)
    ln1: Norm          # attention.output.LayerNorm
    ffn_in: Linear     # intermediate.dense (I, H)
    ffn_out: Linear    # output.dense (H, I)
    ln2: Norm          # output.LayerNorm


# ---------------------------------------------------------------------------- parameters
def linear_specs(name, n_out, n_in):
    return [ParamSpec(f"{name}.weight", (n_out, n_in), "normal", True),
            ParamSpec(f"{name}.bias", (n_out,), "zeros", False)]


def layernorm_specs(name, H):
    return [ParamSpec(f"{name}.weight", (H,), "ones", False), ParamSpec(f"{name}.bias", (H,), "zeros", False)]


def layer_specs(prefix, H, I):
    """The parameters of the layer whose names start with ``prefix`` (``...encoder.layer.<i>.``).

    query, key and value are registered back to back, weights then biases:
    the store keeps each three adjacent, which is what lets ``qkv`` be a view
    of them (``ParamStore.fused`` checks it) rather than a copy.
    """
    qkv = [linear_specs(f"{prefix}attention.self.{n}", H, H) for n in QKV]
    return ([q[0] for q in qkv] + [q[1] for q in qkv]
            + linear_specs(prefix + "attention.output.dense", H, H)
            + layernorm_specs(prefix + "attention.output.LayerNorm", H)
            + linear_specs(prefix + "intermediate.dense", I, H)
            + linear_specs(prefix + "output.dense", H, I)
            + layernorm_specs(prefix + "output.LayerNorm", H))


def layer_weights(store, prefix, half=False) -> LayerWeights:
    """The ``LayerWeights`` of the layer named ``prefix``: views into ``store``, made once."""
    matrices = store.halves if half else store.params

    def linear(name):
        return Linear(matrices[name + ".weight"], store.params[name + ".bias"],
                      store.grads[name + ".weight"], store.grads[name + ".bias"])

    def norm(name):
        return Norm(store.params[name + ".weight"], store.params[name + ".bias"],
                    store.grads[name + ".weight"], store.grads[name + ".bias"])

    qkv = [f"{prefix}attention.self.{n}" for n in QKV]
    weights, biases = [n + ".weight" for n in qkv], [n + ".bias" for n in qkv]
    return LayerWeights(
        qkv=Linear(store.fused(weights, "half" if half else "data"), store.fused(biases),
                   store.fused(weights, "grad"), store.fused(biases, "grad")),
        attn_out=linear(prefix + "attention.output.dense"), ln1=norm(prefix + "attention.output.LayerNorm"),
        ffn_in=linear(prefix + "intermediate.dense"), ffn_out=linear(prefix + "output.dense"),
        ln2=norm(prefix + "output.LayerNorm"))


# ------------------------------------------------------------------------ embeddings
def embeddings_specs(prefix, config):
    """The word, position and segment tables and their LayerNorm, named from ``prefix``."""
    c, H = config, config.hidden_size
    return [ParamSpec(prefix + "word_embeddings.weight", (c.vocab_size, H), "normal", True),
            ParamSpec(prefix + "position_embeddings.weight", (c.max_position_embeddings, H), "normal", True),
            ParamSpec(prefix + "token_type_embeddings.weight", (c.type_vocab_size, H), "normal", True),
            *layernorm_specs(prefix + "LayerNorm", H)]


def embeddings_forward(ids, types, P, prefix, config, uniform, train, caches):
    """ids, types: (B, T) int  ->  (B, T, H): word + position + segment, then LayerNorm and dropout.

    P: the parameters by name, ``prefix`` that of the embeddings' names; ``caches`` gets what the
    backward needs.
    """
    T = ids.shape[1]
    x_word, caches["word"] = D.embedding_forward(ids, P[prefix + "word_embeddings.weight"])
    x = x_word + P[prefix + "position_embeddings.weight"][:T] + P[prefix + "token_type_embeddings.weight"][types]
    x, caches["emb_ln"] = D.layernorm_forward(x, P[prefix + "LayerNorm.weight"], P[prefix + "LayerNorm.bias"],
                                              config.layer_norm_eps)
    caches["types"] = types
    x, caches["emb_drop"] = D.dropout_forward(x, config.hidden_dropout_prob, uniform, train)
    return x


def embeddings_backward(dx, caches, grads, prefix, config, put):
    """dx: (B, T, H) -> the gradients of the three tables and the LayerNorm, stored with ``put``.

    ``grads``: the gradient buffers by name; the word embedding's is added into, as it may
    already hold the tied MLM decoder's share.
    """
    T = dx.shape[1]
    dx = D.dropout_backward(dx, caches["emb_drop"])
    dx, dg, db = D.layernorm_backward(dx, caches["emb_ln"])
    put(prefix + "LayerNorm.weight", dg)
    put(prefix + "LayerNorm.bias", db)
    # the position embedding of position t receives the gradient of every sequence at t
    dpos = get_array_module(dx).zeros_like(grads[prefix + "position_embeddings.weight"])
    dpos[:T] = dx.sum(axis=0)
    put(prefix + "position_embeddings.weight", dpos)
    put(prefix + "token_type_embeddings.weight",
        D.embedding_backward(dx, (caches["types"], (config.type_vocab_size, config.hidden_size))))
    D.embedding_backward(dx, caches["word"], padding_idx=config.pad_token_id,
                         out=grads[prefix + "word_embeddings.weight"])


# ------------------------------------------------------------------------- the layer
def gelu_kind(hidden_act):
    """HF's ``hidden_act`` as ``gelu_forward``'s ``approximate``: "gelu" exact, "gelu_new" tanh."""
    return "none" if hidden_act == "gelu" else "tanh"


def layer_forward(x, w: LayerWeights, mask_bias, config, uniform, train):
    """x: (B, T, H)  ->  y: (B, T, H), cache.  ``uniform(shape)``: dropout's random numbers."""
    B, T, _ = x.shape
    A, Dh, eps = config.num_attention_heads, config.head_dim, config.layer_norm_eps
    p_h, p_a = config.hidden_dropout_prob, config.attention_probs_dropout_prob
    xp = get_array_module(x)
    c = {}
    # self-attention: one product gives Q, K and V
    qkv, c["qkv"] = D.linear_forward(x, w.qkv.weight, w.qkv.bias)                  # (B, T, 3H)
    # (B, T, 3, A, D) -> (3, B, A, T, D), copied once so that each head's (T, D)
    # block is contiguous: the batched products of attention then run at full speed
    q, k, v = xp.ascontiguousarray(qkv.reshape(B, T, 3, A, Dh).transpose(2, 0, 3, 1, 4))
    ctx, c["attention"] = D.attention_forward(q, k, v, mask_bias, p_a, uniform, train)
    a, c["attn_out"] = D.linear_forward(D.merge_heads(ctx), w.attn_out.weight, w.attn_out.bias)
    a, c["drop1"] = D.dropout_forward(a, p_h, uniform, train)
    # post-LN residual: LayerNorm(x + sublayer(x))
    h, c["ln1"] = D.layernorm_forward(a + x, w.ln1.gamma, w.ln1.beta, eps)
    # feed-forward: H -> I -> H with GELU
    f, c["ffn_in"] = D.linear_forward(h, w.ffn_in.weight, w.ffn_in.bias)
    f, c["gelu"] = D.gelu_forward(f, gelu_kind(config.hidden_act))
    f, c["ffn_out"] = D.linear_forward(f, w.ffn_out.weight, w.ffn_out.bias)
    f, c["drop2"] = D.dropout_forward(f, p_h, uniform, train)
    y, c["ln2"] = D.layernorm_forward(f + h, w.ln2.gamma, w.ln2.beta, eps)
    return y, c


def layer_backward(dy, c, w: LayerWeights, put):
    """dy: (B, T, H)  ->  dx: (B, T, H).  ``put(buffer, g)`` stores each parameter gradient."""
    B, T, H = dy.shape
    xp = get_array_module(dy)
    dsum, dg, db = D.layernorm_backward(dy, c["ln2"])
    put(w.ln2.dgamma, dg)
    put(w.ln2.dbeta, db)
    df = D.dropout_backward(dsum, c["drop2"])
    df, dW, db = D.linear_backward(df, c["ffn_out"])
    put(w.ffn_out.dweight, dW)
    put(w.ffn_out.dbias, db)
    df = D.gelu_backward(df, c["gelu"])
    dh, dW, db = D.linear_backward(df, c["ffn_in"])
    put(w.ffn_in.dweight, dW)
    put(w.ffn_in.dbias, db)
    dh += dsum  # the residual path around the feed-forward block
    dsum, dg, db = D.layernorm_backward(dh, c["ln1"])
    put(w.ln1.dgamma, dg)
    put(w.ln1.dbeta, db)
    da = D.dropout_backward(dsum, c["drop1"])
    dctx, dW, db = D.linear_backward(da, c["attn_out"])
    put(w.attn_out.dweight, dW)
    put(w.attn_out.dbias, db)
    # dq, dk, dv written side by side into one (3, B, A, T, D) array, then
    # (3, B, A, T, D) -> (B, T, 3, A, D) -> (B, T, 3H): the inverse of the forward split
    q = c["attention"].q
    d3 = xp.empty((3,) + q.shape, dtype=q.dtype)
    D.attention_backward(D.split_heads(dctx, q.shape[1]), c["attention"], out=d3)
    dqkv = d3.transpose(1, 3, 0, 2, 4).reshape(B, T, 3 * H)
    dx, dW, db = D.linear_backward(dqkv, c["qkv"])
    put(w.qkv.dweight, dW)
    put(w.qkv.dbias, db)
    dx += dsum  # the residual path around the attention block
    return dx
