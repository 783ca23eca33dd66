"""The usual mistakes of putting BERT together from its pieces: one encoder layer, and the tied decoder.

One post-LN layer, with Hugging Face's names below ``encoder.layer.<i>.``:

    q, k, v = x W^T + b      attention.self.{query,key,value}, each split (B, T, H) -> (B, A, T, D)
    a = merge(attention(q, k, v, mask)) W_o^T + b_o     attention.output.dense
    h = LN_1(x + a)                                      attention.output.LayerNorm
    f = GELU(h W_in^T + b_in) W_out^T + b_out            intermediate.dense, output.dense
    y = LN_2(h + f)                                      output.LayerNorm

In the backward pass a value that feeds two branches gets the SUM of their
gradients: h feeds the FFN and the skip path to LN_2's sum; x feeds the
three projections and the skip path to LN_1's sum.

The tied model: e = W_word[ids], t = LN(GELU(e W_d^T + b_d)) (the MLM head's
transform), logits = t W_word^T + b.  W_word is used twice, so dW_word is
the decoder's dlogits^T t plus the embedding's scatter-add of de.
"""
from __future__ import annotations

import numpy as np

from minibert import ops as L

from .layer_names import DENSE, LN1, LN2, NORM, QKV, head_shapes, layer_shapes  # noqa: F401
from .table import Table

EPS = 1e-12                     # BERT's layer_norm_eps
def split(h, A, transpose=True):
    """(B, T, H) -> (B, A, T, D): each token's H features cut into A heads of D, heads to the front."""
    B, T, H = h.shape
    if not transpose:                       # a reshape alone: a "head" then holds pieces of several tokens
        return h.reshape(B, A, T, H // A)
    return h.reshape(B, T, A, H // A).transpose(0, 2, 1, 3)


def merge(ctx, transpose=True):
    """(B, A, T, D) -> (B, T, H), the inverse of ``split``."""
    B, A, T, D = ctx.shape
    return (ctx.transpose(0, 2, 1, 3) if transpose else ctx).reshape(B, T, A * D)


def _layer_forward(order="post", split_t=True, merge_t=True, query_mask=False, gelu="none", eps=EPS):
    """encoder_layer_forward, or one of its usual mistakes.

    order: "post" (BERT: LN(x + sublayer(x))), "pre" (x + sublayer(LN(x))), "norm_first"
    (x + LN(sublayer(x))).
    """
    def encoder_layer_forward(x, params, attention_mask, num_heads):
        p, c = params, {"num_heads": num_heads}

        def lin(h, name, key):
            out, c[key] = L.linear_forward(h, p[name + ".weight"], p[name + ".bias"])
            return out

        def norm(h, name, key):
            out, c[key] = L.layernorm_forward(h, p[name + ".weight"], p[name + ".bias"], eps)
            return out

        def attention(h):
            q, k, v = (split(lin(h, f"attention.self.{n}", n), num_heads, split_t) for n in QKV)
            bias = L.attention_mask_bias(attention_mask, x.dtype)          # (B, 1, 1, T): the keys
            ctx, c["attention"] = L.attention_forward(q, k, v, bias.swapaxes(-1, -2) if query_mask else bias)
            return lin(merge(ctx, merge_t), "attention.output.dense", "attn_out")

        def ffn(h):
            f, c["gelu"] = L.gelu_forward(lin(h, "intermediate.dense", "ffn_in"), gelu)
            return lin(f, "output.dense", "ffn_out")

        if order == "pre":
            h = x + attention(norm(x, LN1, "ln1"))
            return h + ffn(norm(h, LN2, "ln2")), c
        if order == "norm_first":
            h = x + norm(attention(x), LN1, "ln1")
            return h + norm(ffn(h), LN2, "ln2"), c
        h = norm(x + attention(x), LN1, "ln1")
        return norm(h + ffn(h), LN2, "ln2"), c
    return encoder_layer_forward


def _layer_backward(skip_attention=True, skip_ffn=True, qkv_paths=3, split_t=True):
    """encoder_layer_backward, or one of its usual mistakes (a skip path left out, a path through
    the projections left out, the heads split back without the transpose)."""
    def encoder_layer_backward(dy, cache):
        c, grads = cache, {}

        def lin(d, name, key):
            dx, grads[name + ".weight"], grads[name + ".bias"] = L.linear_backward(d, c[key])
            return dx

        def norm(d, name, key):
            dx, grads[name + ".weight"], grads[name + ".bias"] = L.layernorm_backward(d, c[key])
            return dx

        ds = norm(dy, LN2, "ln2")                                           # d(h + f)
        dh = lin(L.gelu_backward(lin(ds, "output.dense", "ffn_out"), c["gelu"]), "intermediate.dense", "ffn_in")
        if skip_ffn:
            dh = dh + ds                                                    # the skip path around the FFN
        ds = norm(dh, LN1, "ln1")                                           # d(x + a)
        dctx = split(lin(ds, "attention.output.dense", "attn_out"), c["num_heads"], split_t)
        dqkv = L.attention_backward(dctx, c["attention"])
        paths = [lin(merge(d), f"attention.self.{n}", n) for d, n in zip(dqkv, QKV)]
        dx = sum(paths[:qkv_paths])
        if skip_attention:
            dx = dx + ds                                                    # the skip path around attention
        return dx, grads
    return encoder_layer_backward


def _tied_forward(ids, W_word, head):
    e = W_word[ids]                                                         # the word embeddings
    t, c_dense = L.linear_forward(e, head[DENSE + ".weight"], head[DENSE + ".bias"])
    t, c_gelu = L.gelu_forward(t)
    t, c_norm = L.layernorm_forward(t, head[NORM + ".weight"], head[NORM + ".bias"], EPS)
    logits, c_dec = L.linear_forward(t, W_word, head["bias"])              # the decoder: the same table
    return logits, (ids, W_word.shape, c_dense, c_gelu, c_norm, c_dec)


def _tied_backward(decoder=True, embedding=True, scatter=np.add.at):
    """tied_mlm_backward, with either share of dW_word left out, or the embedding's share scattered by
    ``scatter(dW, rows, values)``."""
    def tied_mlm_backward(dlogits, cache):
        ids, shape, c_dense, c_gelu, c_norm, c_dec = cache
        dt, dW_dec, db = L.linear_backward(dlogits, c_dec)
        dt, dgamma, dbeta = L.layernorm_backward(dt, c_norm)
        de, dW_d, db_d = L.linear_backward(L.gelu_backward(dt, c_gelu), c_dense)
        dW_emb = np.zeros(shape)
        scatter(dW_emb, ids.reshape(-1), de.reshape(-1, shape[1]))
        dW = (dW_dec if decoder else 0.0) + (dW_emb if embedding else 0.0)
        return dW, {DENSE + ".weight": dW_d, DENSE + ".bias": db_d, NORM + ".weight": dgamma,
                    NORM + ".bias": dbeta, "bias": db}
    return tied_mlm_backward


def _assign(dW, rows, values):
    """dW[rows] = values: a repeated row keeps one of its gradients (NumPy writes each index once)."""
    dW[rows] = values


TABLE = Table("encoder_layer", encoder_layer_forward=_layer_forward(), encoder_layer_backward=_layer_backward(),
              tied_mlm_forward=_tied_forward, tied_mlm_backward=_tied_backward())
case = TABLE.case

SKIP = ("the gradient of a value that feeds two branches is the SUM of theirs: {what} goes through the {block} "
        "AND straight to the residual sum, so add the gradient of that sum ({sum}) to what comes back through "
        "the {block}")

# ---- the layer's forward pass
case("pre-LN order", "BERT is post-LN: h = LN_1(x + Attention(x)), y = LN_2(h + FFN(h)). Your layer normalises "
                     "the sublayers' INPUT (x + Attention(LN_1(x))), which is GPT-2's pre-LN order (notebook 9)",
     encoder_layer_forward=_layer_forward(order="pre"))
case("LayerNorm before the residual add", "LayerNorm normalises the residual SUM: h = LN_1(x + a), not x + LN_1(a); "
                                          "likewise y = LN_2(h + f)",
     encoder_layer_forward=_layer_forward(order="norm_first"))
case("mask on the queries", "the padding mask hides KEYS, the last axis of the scores (B, A, T_query, T_key): its "
                            "bias is (B, 1, 1, T). On the queries' axis it adds the same number to a whole row, "
                            "which the softmax ignores, so padded keys still get weight",
     encoder_layer_forward=_layer_forward(query_mask=True))
case("heads merged by a reshape alone", "merge the heads back with the transpose: (B, A, T, D) -> "
                                        "swapaxes(1, 2) -> (B, T, A, D) -> reshape (B, T, H). A reshape alone "
                                        "reads the heads' numbers in memory order and mixes tokens",
     encoder_layer_forward=_layer_forward(merge_t=False))
case("heads split by a reshape alone", "split the heads with a transpose: (B, T, H) -> reshape (B, T, A, D) -> "
                                       "swapaxes(1, 2) -> (B, A, T, D). A reshape straight to (B, A, T, D) puts "
                                       "pieces of different tokens into one head's row",
     encoder_layer_forward=_layer_forward(split_t=False))
case("GELU's tanh form", "BERT's feed-forward uses the exact GELU, x * Phi(x) with erf (hidden_act \"gelu\", "
                         "gelu_forward's default), not the tanh approximation (\"gelu_new\"), which differs by up "
                         "to 5e-4", encoder_layer_forward=_layer_forward(gelu="tanh"))
case("LayerNorm eps 1e-5", "BERT's LayerNorms use eps = 1e-12 (layer_norm_eps), not PyTorch's default 1e-5",
     encoder_layer_forward=_layer_forward(eps=1e-5))

# ---- the layer's backward pass
case("residual gradient dropped around the FFN", SKIP.format(what="h", block="feed-forward block", sum="dsum_2"),
     encoder_layer_backward=_layer_backward(skip_ffn=False))
case("residual gradient dropped around attention", SKIP.format(what="x", block="attention block", sum="dsum_1"),
     encoder_layer_backward=_layer_backward(skip_attention=False))
case("dx through the query projection only", "x feeds three projections, query, key AND value (and the skip "
                                             "path): dx is the sum of the three projections' dx plus the "
                                             "residual's gradient",
     encoder_layer_backward=_layer_backward(qkv_paths=1))
case("heads split by a reshape alone in the backward", "the backward of the merge is the split: the gradient "
                                                       "of the merged context (B, T, H) goes back to "
                                                       "(B, A, T, D) by reshape (B, T, A, D) then swapaxes(1, 2), "
                                                       "not by a reshape alone",
     encoder_layer_backward=_layer_backward(split_t=False))

# ---- the tied decoder
case("tied table: the decoder's gradient only", "W_word is used twice, by the embedding lookup and by the decoder: "
                                                "dW_word is the SUM of both shares. Add the embedding's (de "
                                                "scattered back into the rows of ids, np.add.at) to the "
                                                "decoder's dlogits^T t",
     tied_mlm_backward=_tied_backward(embedding=False))
case("tied table: the embedding's gradient only", "W_word is used twice, by the embedding lookup and by the "
                                                  "decoder: dW_word is the SUM of both shares. Add the decoder's "
                                                  "(dlogits^T t, summed over the positions) to the embedding's",
     tied_mlm_backward=_tied_backward(decoder=False))
case("embedding's share by assignment", "a token that occurs twice was looked up twice: its row gets both "
                                        "gradients. dW[ids] = de (or +=) writes a repeated row once; use "
                                        "np.add.at(dW, ids.ravel(), de.reshape(-1, H))",
     tied_mlm_backward=_tied_backward(scatter=_assign))


# ---- right answers written otherwise
def _fused_forward(x, params, attention_mask, num_heads):
    """Q, K and V from one (3H, H) product as minibert computes them, the heads moved with np.einsum,
    the mask google-research/bert's -10000; a cache of its own."""
    p, (B, T, H), A = params, x.shape, num_heads
    lin = lambda h, n: L.linear_forward(h, p[n + ".weight"], p[n + ".bias"])
    norm = lambda h, n: L.layernorm_forward(h, p[n + ".weight"], p[n + ".bias"], EPS)
    W = np.concatenate([p[f"attention.self.{n}.weight"] for n in QKV])
    b = np.concatenate([p[f"attention.self.{n}.bias"] for n in QKV])
    qkv, c_qkv = L.linear_forward(x, W, b)                                 # (B, T, 3H)
    q, k, v = np.einsum("btsad->sbatd", qkv.reshape(B, T, 3, A, H // A))
    ctx, c_att = L.attention_forward(q, k, v, ((1.0 - attention_mask) * -10000.0)[:, None, None, :])
    a, c_out = lin(np.einsum("batd->btad", ctx).reshape(B, T, H), "attention.output.dense")
    h, c_ln1 = norm(x + a, LN1)
    f, c_in = lin(h, "intermediate.dense")
    f, c_gelu = L.gelu_forward(f)
    f, c_ffo = lin(f, "output.dense")
    y, c_ln2 = norm(h + f, LN2)
    return y, (A, c_qkv, c_att, c_out, c_ln1, c_in, c_gelu, c_ffo, c_ln2)


def _fused_backward(dy, cache):
    A, c_qkv, c_att, c_out, c_ln1, c_in, c_gelu, c_ffo, c_ln2 = cache
    g = {}

    def put(name, d, dW, db):
        g[name + ".weight"], g[name + ".bias"] = dW, db
        return d
    ds2 = put(LN2, *L.layernorm_backward(dy, c_ln2))
    df = put("output.dense", *L.linear_backward(ds2, c_ffo))
    dh = put("intermediate.dense", *L.linear_backward(L.gelu_backward(df, c_gelu), c_in))
    ds1 = put(LN1, *L.layernorm_backward(dh + ds2, c_ln1))
    dctx = put("attention.output.dense", *L.linear_backward(ds1, c_out))
    B, T, H = dctx.shape
    dq, dk, dv = L.attention_backward(np.einsum("btad->batd", dctx.reshape(B, T, A, H // A)), c_att)
    dqkv = np.einsum("sbatd->btsad", np.stack([dq, dk, dv])).reshape(B, T, 3 * H)
    dx, dW, db = L.linear_backward(dqkv, c_qkv)
    for i, n in enumerate(QKV):
        put(f"attention.self.{n}", None, dW[i * H:(i + 1) * H], db[i * H:(i + 1) * H])
    return dx + ds1, g


def _one_hot_backward(dlogits, cache):
    """The embedding's share of dW_word as a matrix product: onehot(ids)^T de."""
    ids, shape, c_dense, c_gelu, c_norm, c_dec = cache
    dt, dW, db = L.linear_backward(dlogits, c_dec)
    dt, dgamma, dbeta = L.layernorm_backward(dt, c_norm)
    de, dW_d, db_d = L.linear_backward(L.gelu_backward(dt, c_gelu), c_dense)
    onehot = (ids.reshape(-1)[:, None] == np.arange(shape[0])).astype(np.float64)      # (B*T, V)
    return dW + onehot.T @ de.reshape(-1, shape[1]), {DENSE + ".weight": dW_d, DENSE + ".bias": db_d,
                                                      NORM + ".weight": dgamma, NORM + ".bias": dbeta, "bias": db}


TABLE.variant("Q, K, V from one fused product, heads moved with einsum, mask -10000",
              encoder_layer_forward=_fused_forward, encoder_layer_backward=_fused_backward)
TABLE.variant("the embedding's share of dW_word as onehot(ids)^T de", tied_mlm_backward=_one_hot_backward)
