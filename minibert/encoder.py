"""One transformer layer of BERT's encoder, forward and backward, and its weights by role.

Shapes: B (batch), T (sequence length), H (hidden size), A (heads), D = H / A
(head size), I (intermediate size).  A layer is post-LayerNorm, as in BERT:

    a = Dropout(attention(x) W_o^T + b_o)           attention: softmax(q k^T / sqrt(D) + mask) v
    h = LayerNorm(x + a)
    f = Dropout(GELU(h W_in^T + b_in) W_out^T + b_out)
    y = LayerNorm(h + f)

Each function takes ``ops``, the set of ops the model runs (``minibert.ops``,
or the accelerated ``accel.cpu`` or ``accel.cuda``: ``minibert.kernels``).
"""
from __future__ import annotations

from dataclasses import dataclass

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


def embeddings_forward(ops, ids, types, P, prefix, config, uniform, train, caches):
    """ids, types: (B, T) int  ->  (B, T, H): word + position + segment, then LayerNorm and dropout.

    P: the parameters by name, ``prefix`` that of the embeddings' names; ``caches`` gets what the
    backward needs.
    """
    T = ids.shape[1]
    x_word, caches["word"] = ops.embedding_forward(ids, P[prefix + "word_embeddings.weight"])
    x = x_word + P[prefix + "position_embeddings.weight"][:T] + P[prefix + "token_type_embeddings.weight"][types]
    x, caches["emb_ln"] = ops.layernorm_forward(x, P[prefix + "LayerNorm.weight"], P[prefix + "LayerNorm.bias"],
                                                config.layer_norm_eps)
    caches["types"] = types
    x, caches["emb_drop"] = ops.dropout_forward(x, config.hidden_dropout_prob, uniform, train)
    return x


def embeddings_backward(ops, dx, caches, prefix, config, add):
    """dx: (B, T, H) -> the gradients of the three tables and the LayerNorm, added with ``add(name, g)``
    (the word embedding's buffer may already hold the tied MLM decoder's share)."""
    dx = ops.dropout_backward(dx, caches["emb_drop"])
    dx, dg, db = ops.layernorm_backward(dx, caches["emb_ln"])
    add(prefix + "LayerNorm.weight", dg)
    add(prefix + "LayerNorm.bias", db)
    # the position embedding of position t receives the gradient of every sequence at t: (T, H),
    # the first T rows of the table's gradient
    add(prefix + "position_embeddings.weight", dx.sum(axis=0))
    add(prefix + "token_type_embeddings.weight",
        ops.embedding_backward(dx, (caches["types"], (config.type_vocab_size, config.hidden_size))))
    add(prefix + "word_embeddings.weight",
        ops.embedding_backward(dx, caches["word"], padding_idx=config.pad_token_id))


# ------------------------------------------------------------------------- the layer
def gelu_kind(hidden_act):
    """HF's ``hidden_act`` as ``gelu_forward``'s ``approximate``: "gelu" exact, "gelu_new" tanh."""
    return "none" if hidden_act == "gelu" else "tanh"


def layer_forward(ops, x, w: LayerWeights, mask_bias, config, uniform, train):
    """x: (B, T, H)  ->  y: (B, T, H), cache.  ``uniform(shape)``: dropout's random numbers."""
    B, T, _ = x.shape
    A, Dh, eps = config.num_attention_heads, config.head_dim, config.layer_norm_eps
    p_h, p_a = config.hidden_dropout_prob, config.attention_probs_dropout_prob
    xp = get_array_module(x)
    c = {}
    # self-attention: one product gives Q, K and V
    qkv, c["qkv"] = ops.linear_forward(x, w.qkv.weight, w.qkv.bias)                  # (B, T, 3H)
    # (B, T, 3, A, D) -> (3, B, A, T, D), copied once so that each head's (T, D)
    # block is contiguous: the batched products of attention then run at full speed
    q, k, v = xp.ascontiguousarray(qkv.reshape(B, T, 3, A, Dh).transpose(2, 0, 3, 1, 4))
    ctx, c["attention"] = ops.attention_forward(q, k, v, mask_bias, p_a, uniform, train)
    a, c["attn_out"] = ops.linear_forward(ops.merge_heads(ctx), w.attn_out.weight, w.attn_out.bias)
    a, c["drop1"] = ops.dropout_forward(a, p_h, uniform, train)
    # post-LN residual: LayerNorm(x + sublayer(x))
    h, c["ln1"] = ops.layernorm_forward(a + x, w.ln1.gamma, w.ln1.beta, eps)
    # feed-forward: H -> I -> H with GELU
    f, c["ffn_in"] = ops.linear_forward(h, w.ffn_in.weight, w.ffn_in.bias)
    f, c["gelu"] = ops.gelu_forward(f, gelu_kind(config.hidden_act))
    f, c["ffn_out"] = ops.linear_forward(f, w.ffn_out.weight, w.ffn_out.bias)
    f, c["drop2"] = ops.dropout_forward(f, p_h, uniform, train)
    y, c["ln2"] = ops.layernorm_forward(f + h, w.ln2.gamma, w.ln2.beta, eps)
    return y, c


def layer_backward(ops, dy, c, w: LayerWeights, add):
    """dy: (B, T, H)  ->  dx: (B, T, H).  ``add(buffer, g)`` adds each parameter gradient to its buffer."""
    B, T, H = dy.shape
    xp = get_array_module(dy)

    def linear(d, name, lin: Linear):          # a linear layer's backward: dx, its dW and db added
        d, dW, db = ops.linear_backward(d, c[name])
        add(lin.dweight, dW)
        add(lin.dbias, db)
        return d

    def norm(d, name, ln: Norm):
        d, dg, db = ops.layernorm_backward(d, c[name])
        add(ln.dgamma, dg)
        add(ln.dbeta, db)
        return d

    dsum = norm(dy, "ln2", w.ln2)
    df = linear(ops.dropout_backward(dsum, c["drop2"]), "ffn_out", w.ffn_out)
    dh = linear(ops.gelu_backward(df, c["gelu"]), "ffn_in", w.ffn_in)
    dh += dsum  # the residual path around the feed-forward block
    dsum = norm(dh, "ln1", w.ln1)
    dctx = linear(ops.dropout_backward(dsum, c["drop1"]), "attn_out", w.attn_out)
    # dq, dk, dv: (B, A, T, D) each -> (B, T, 3, A, D) -> (B, T, 3H), the inverse of the forward split
    grads = ops.attention_backward(ops.split_heads(dctx, c["attention"].q.shape[1]), c["attention"])
    dx = linear(xp.stack([g.transpose(0, 2, 1, 3) for g in grads], axis=2).reshape(B, T, 3 * H), "qkv", w.qkv)
    dx += dsum  # the residual path around the attention block
    return dx
