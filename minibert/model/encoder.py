"""One transformer layer of BERT's encoder, forward and backward, and its weights by role.

Shapes: B (batch), T (sequence length), H (hidden size), A (heads), D = H / A
(head size), I (intermediate size).  A layer is post-LayerNorm, as in BERT (``pre_ln``:
the pre-LayerNorm order instead, ``pre_ln_layer_forward``):

    a = Dropout(attention(x) W_o^T + b_o)           attention: softmax(q k^T / sqrt(D) + mask) v
    h = LayerNorm(x + a)
    f = Dropout(GELU(h W_in^T + b_in) W_out^T + b_out)
    y = LayerNorm(h + f)

Each function takes ``ops``, the set of ops the model runs (``minibert.ops``,
or the accelerated ``accel.cpu`` or ``accel.cuda``: ``minibert.kernels``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
class Table:
    """An embedding table (HF: ``..._embeddings.weight``) and its gradient."""
    weight: object    # (rows, H)
    dweight: object


@dataclass
class EmbeddingWeights:
    """The embeddings by role; the Hugging Face names below ``(bert.)embeddings.``."""
    word: Table        # word_embeddings (V, H); the MLM decoder reuses it (tied)
    position: Table    # position_embeddings (max_position, H)
    segment: Table     # token_type_embeddings (type_vocab, H)
    norm: Norm         # LayerNorm


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


def linear_weights(store, name, half=False) -> Linear:
    """The ``Linear`` named ``name`` (``name.weight``, ``name.bias``): views into ``store``, made once."""
    matrices = store.halves if half else store.params
    return Linear(matrices[name + ".weight"], store.params[name + ".bias"],
                  store.grads[name + ".weight"], store.grads[name + ".bias"])


def norm_weights(store, name) -> Norm:
    return Norm(store.params[name + ".weight"], store.params[name + ".bias"],
                store.grads[name + ".weight"], store.grads[name + ".bias"])


def layer_weights(store, prefix, half=False) -> LayerWeights:
    """The ``LayerWeights`` of the layer named ``prefix``: views into ``store``, made once."""
    qkv = [f"{prefix}attention.self.{n}" for n in QKV]
    weights, biases = [n + ".weight" for n in qkv], [n + ".bias" for n in qkv]
    return LayerWeights(
        qkv=Linear(store.fused(weights, "half" if half else "data"), store.fused(biases),
                   store.fused(weights, "grad"), store.fused(biases, "grad")),
        attn_out=linear_weights(store, prefix + "attention.output.dense", half),
        ln1=norm_weights(store, prefix + "attention.output.LayerNorm"),
        ffn_in=linear_weights(store, prefix + "intermediate.dense", half),
        ffn_out=linear_weights(store, prefix + "output.dense", half),
        ln2=norm_weights(store, prefix + "output.LayerNorm"))


def embedding_weights(store, prefix) -> EmbeddingWeights:
    def table(name):
        return Table(store.params[prefix + name + ".weight"], store.grads[prefix + name + ".weight"])
    return EmbeddingWeights(word=table("word_embeddings"), position=table("position_embeddings"),
                            segment=table("token_type_embeddings"), norm=norm_weights(store, prefix + "LayerNorm"))


# ------------------------------------------------------------------- backward helpers
def backward_linear(ops, d, cache, w: Linear, add, half_dx=False):
    """A linear layer's backward: returns dx; dW and db are added to ``w``'s gradient buffers.
    ``half_dx``: in mixed precision dx stays float16 (``ops.linear_backward``)."""
    dx, dW, db = ops.linear_backward(d, cache, half_dx=half_dx)
    add(w.dweight, dW)
    add(w.dbias, db)
    return dx


def backward_norm(ops, d, cache, w: Norm, add):
    """A LayerNorm's backward: returns dx; dgamma and dbeta are added to ``w``'s gradient buffers."""
    dx, dg, db = ops.layernorm_backward(d, cache)
    add(w.dgamma, dg)
    add(w.dbeta, db)
    return dx


def backward_residual(ops, d, cache, w: Norm, add, d_skip=None):
    """The post-LN residual connection's backward (of d + d_skip): returns the gradients of the
    sublayer's output and of the residual stream; dgamma and dbeta are added to ``w``'s buffers."""
    da, dx, dg, db = ops.dropout_add_layernorm_backward(d, cache, d_skip)
    add(w.dgamma, dg)
    add(w.dbeta, db)
    return da, dx


# ------------------------------------------------------------------------ embeddings
def embeddings_specs(prefix, config):
    """The word, position and segment tables and their LayerNorm, named from ``prefix``."""
    c, H = config, config.hidden_size
    return [ParamSpec(prefix + "word_embeddings.weight", (c.vocab_size, H), "normal", True),
            ParamSpec(prefix + "position_embeddings.weight", (c.max_position_embeddings, H), "normal", True),
            ParamSpec(prefix + "token_type_embeddings.weight", (c.type_vocab_size, H), "normal", True),
            *layernorm_specs(prefix + "LayerNorm", H)]


def embeddings_forward(ops, ids, types, w: EmbeddingWeights, config, uniform, train):
    """ids, types: (B, T) int  ->  (B, T, H): word + position + segment, then LayerNorm and dropout; cache."""
    T = ids.shape[1]
    c = {"types": types}
    x_word, c["word"] = ops.embedding_forward(ids, w.word.weight)
    x = x_word + w.position.weight[:T] + w.segment.weight[types]
    x, c["ln"] = ops.layernorm_forward(x, w.norm.gamma, w.norm.beta, config.layer_norm_eps)
    x, c["drop"] = ops.dropout_forward(x, config.hidden_dropout_prob, uniform, train)
    return x, c


def embeddings_backward(ops, dx, c, w: EmbeddingWeights, config, add):
    """dx: (B, T, H) -> the gradients of the three tables and the LayerNorm, added with ``add(buffer, g)``
    (the word table's buffer also takes the tied MLM decoder's share)."""
    dx = backward_norm(ops, ops.dropout_backward(dx, c["drop"]), c["ln"], w.norm, add)
    # the position embedding of position t receives the gradient of every sequence at t: (T, H),
    # the first T rows of the table's gradient
    add(w.position.dweight, dx.sum(axis=0))
    add(w.segment.dweight, ops.embedding_backward(dx, (c["types"], w.segment.weight.shape)))
    add(w.word.dweight, ops.embedding_backward(dx, c["word"], padding_idx=config.pad_token_id))


# ------------------------------------------------------------------------- the layers
def encoder_forward(ops, x, layers, final_norm, mask_bias, config, uniform, train):
    """x: (B, T, H) through every layer in turn  ->  (B, T, H), cache.

    ``final_norm``: None for BERT's post-LN layers; the ``Norm`` a pre-LN model applies after its
    last layer (its layers never normalise the residual stream they pass on).
    """
    c = {"layers": []}
    for w in layers:
        x, cache = layer_forward(ops, x, w, mask_bias, config, uniform, train, pre_ln=final_norm is not None)
        c["layers"].append(cache)
    if final_norm is not None:
        x, c["final_norm"] = ops.layernorm_forward(x, final_norm.gamma, final_norm.beta, config.layer_norm_eps)
    return x, c


def encoder_backward(ops, dx, c, layers, final_norm, add):
    """dx: (B, T, H), the gradient of ``encoder_forward``'s output  ->  that of its input."""
    if final_norm is not None:
        dx = backward_norm(ops, dx, c["final_norm"], final_norm, add)
    skip = None
    for w, cache in zip(reversed(layers), reversed(c["layers"])):
        dx, skip = layer_backward(ops, dx, cache, w, add, skip)
    return dx if skip is None else dx + skip


def gelu_kind(hidden_act):
    """HF's ``hidden_act`` as ``gelu_forward``'s ``approximate``: "gelu" exact, "gelu_new" tanh."""
    return "none" if hidden_act == "gelu" else "tanh"


def layer_forward(ops, x, w: LayerWeights, mask_bias, config, uniform, train, pre_ln=False):
    """x: (B, T, H)  ->  y: (B, T, H), cache.  ``uniform(shape)``: dropout's random numbers.

    ``pre_ln``: the pre-LayerNorm order instead of BERT's (see ``pre_ln_layer_forward``).
    """
    if pre_ln:
        return pre_ln_layer_forward(ops, x, w, mask_bias, config, uniform, train)
    eps, p, c = config.layer_norm_eps, config.hidden_dropout_prob, {}
    a = _attention_block(ops, x, w, mask_bias, config, uniform, train, c)
    # post-LN residual: LayerNorm(x + Dropout(sublayer(x))), the sublayer's last bias added there
    h, c["res1"] = ops.dropout_add_layernorm_forward(a, x, w.ln1.gamma, w.ln1.beta, eps, p, uniform, train,
                                                     bias=w.attn_out.bias)
    f = _ffn_block(ops, h, w, config, c)
    y, c["res2"] = ops.dropout_add_layernorm_forward(f, h, w.ln2.gamma, w.ln2.beta, eps, p, uniform, train,
                                                     bias=w.ffn_out.bias)
    return y, c


def layer_backward(ops, dy, c, w: LayerWeights, add, dy_skip=None):
    """dy (B, T, H), the gradient of the layer's output, plus dy_skip where it comes in two parts
    (None: in one)  ->  dx, dx_skip: that of its input, in two parts (dx_skip None: in one).
    ``add(buffer, g)`` adds each parameter gradient to its buffer.

    x feeds the attention block and, around it, the residual sum: its gradient is the sum of the
    two paths'.  The post-LN layer leaves that sum to the residual connection it feeds (the one
    below, or the caller), whose kernels make it on the way (``dy_skip``)."""
    if c.get("pre_ln"):
        return pre_ln_layer_backward(ops, dy if dy_skip is None else dy + dy_skip, c, w, add), None
    df, dsum = backward_residual(ops, dy, c["res2"], w.ln2, add, dy_skip)
    dh = _ffn_block_backward(ops, df, c, w, add)
    # h's gradient: through the feed-forward block, and around it (the residual path)
    da, dsum = backward_residual(ops, dh, c["res1"], w.ln1, add, dsum)
    return _attention_block_backward(ops, da, c, w, add), dsum


def pre_ln_layer_forward(ops, x, w: LayerWeights, mask_bias, config, uniform, train):
    """The pre-LN layer (GPT-2's order, notebook 9), x: (B, T, H) -> y: (B, T, H), cache:

        h = x + Dropout(attention(LN_1(x)))
        y = h + Dropout(FFN(LN_2(h)))

    The same parameters as BERT's layer (LN_1 is ``attention.output.LayerNorm``, LN_2
    ``output.LayerNorm``) in another order: the residual stream x -> h -> y is never
    normalised, so the model needs one last LayerNorm after its last layer.
    """
    eps, p, c = config.layer_norm_eps, config.hidden_dropout_prob, {"pre_ln": True}
    n, c["ln1"] = ops.layernorm_forward(x, w.ln1.gamma, w.ln1.beta, eps)
    a = _attention_block(ops, n, w, mask_bias, config, uniform, train, c) + w.attn_out.bias
    a, c["drop1"] = ops.dropout_forward(a, p, uniform, train)
    h = x + a
    n, c["ln2"] = ops.layernorm_forward(h, w.ln2.gamma, w.ln2.beta, eps)
    f, c["drop2"] = ops.dropout_forward(_ffn_block(ops, n, w, config, c) + w.ffn_out.bias, p, uniform, train)
    return h + f, c


def pre_ln_layer_backward(ops, dy, c, w: LayerWeights, add):
    """dy -> dx through ``pre_ln_layer_forward``: each residual sum passes its gradient on unchanged
    (dy/dh = 1 on the skip path) and adds the gradient through its normalised branch."""
    df = _ffn_block_backward(ops, ops.dropout_backward(dy, c["drop2"]), c, w, add)
    dh = dy + backward_norm(ops, df, c["ln2"], w.ln2, add)
    da = _attention_block_backward(ops, ops.dropout_backward(dh, c["drop1"]), c, w, add)
    return dh + backward_norm(ops, da, c["ln1"], w.ln1, add)


def _attention_block(ops, x, w: LayerWeights, mask_bias, config, uniform, train, c):
    """self-attention(x) W_o^T: (B, T, H) -> (B, T, H), without the bias b_o, which the op that reads
    it adds (the residual connection's kernel; its dropout is the residual connection's too); its
    caches go into ``c``.  Float16 in mixed precision, the product as it is."""
    # self-attention: one product gives Q, K and V, (B, T, 3H); split_qkv adds its bias and copies it
    # into heads, (B, A, T, D) each.  In mixed precision they are float16, as attention's products
    # take them (and give back its output, and take and give back its gradients, in float16: the
    # output projection's products take them so)
    qkv, c["qkv"] = ops.linear_forward(x, w.qkv.weight, None)
    q, k, v = ops.split_qkv(qkv, w.qkv.bias, config.num_attention_heads,
                            half_out=w.qkv.weight.dtype == np.float16)
    ctx, c["attention"] = ops.attention_forward(q, k, v, mask_bias, config.attention_probs_dropout_prob,
                                                uniform, train)
    a, c["attn_out"] = ops.linear_forward(ops.merge_heads(ctx), w.attn_out.weight, None)
    return a


def _attention_block_backward(ops, da, c, w: LayerWeights, add):
    """da: (B, T, H), the gradient of the attention block's output  ->  that of its input."""
    dctx = backward_linear(ops, da, c["attn_out"], w.attn_out, add, half_dx=True)
    # dq, dk, dv: (B, A, T, D) each -> (B, T, 3H), split_qkv's backward
    grads = ops.attention_backward(ops.split_heads(dctx, c["attention"].q.shape[1]), c["attention"])
    dqkv = ops.merge_qkv(*grads)
    return backward_linear(ops, dqkv, c["qkv"], w.qkv, add, half_dx=True)     # LayerNorm's kernels widen it


def _ffn_block(ops, h, w: LayerWeights, config, c):
    """GELU(h W_in^T + b_in) W_out^T: H -> I -> H, without b_out, which the op that reads it adds, as
    the attention block leaves b_o; its caches go into ``c``.  The GELU adds b_in as it reads the
    product, and in mixed precision gives the float16 operand of the next product (and takes its
    gradient so)."""
    f, c["ffn_in"] = ops.linear_forward(h, w.ffn_in.weight, None)
    f, c["gelu"] = ops.gelu_forward(f, gelu_kind(config.hidden_act), bias=w.ffn_in.bias,
                                    half_out=w.ffn_out.weight.dtype == np.float16)
    f, c["ffn_out"] = ops.linear_forward(f, w.ffn_out.weight, None)
    return f


def _ffn_block_backward(ops, df, c, w: LayerWeights, add):
    """df: (B, T, H), the gradient of the feed-forward block's output  ->  that of its input."""
    df = backward_linear(ops, df, c["ffn_out"], w.ffn_out, add, half_dx=True)
    return backward_linear(ops, ops.gelu_backward(df, c["gelu"]), c["ffn_in"], w.ffn_in, add, half_dx=True)
