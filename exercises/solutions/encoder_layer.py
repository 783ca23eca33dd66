"""Solution: one post-LN encoder layer from the pieces, and the MLM decoder tied to the word embeddings."""
import numpy as np

from minibert import ops as L

EPS = 1e-12
QKV = ("query", "key", "value")


def _split(h, num_heads):
    """(B, T, H) -> (B, A, T, D)."""
    B, T, H = h.shape
    return h.reshape(B, T, num_heads, H // num_heads).transpose(0, 2, 1, 3)


def _merge(ctx):
    """(B, A, T, D) -> (B, T, H)."""
    B, A, T, D = ctx.shape
    return ctx.transpose(0, 2, 1, 3).reshape(B, T, A * D)


def encoder_layer_forward(x, params, attention_mask, num_heads):
    p, cache = params, {"num_heads": num_heads}

    def linear(h, name):
        out, cache[name] = L.linear_forward(h, p[name + ".weight"], p[name + ".bias"])
        return out

    def norm(h, name):
        out, cache[name] = L.layernorm_forward(h, p[name + ".weight"], p[name + ".bias"], EPS)
        return out

    # the attention block
    q, k, v = (_split(linear(x, f"attention.self.{n}"), num_heads) for n in QKV)
    ctx, cache["attention"] = L.attention_forward(q, k, v, L.attention_mask_bias(attention_mask, x.dtype))
    a = linear(_merge(ctx), "attention.output.dense")
    h = norm(x + a, "attention.output.LayerNorm")              # post-LN: normalise the residual sum
    # the feed-forward block
    f, cache["gelu"] = L.gelu_forward(linear(h, "intermediate.dense"))
    f = linear(f, "output.dense")
    y = norm(h + f, "output.LayerNorm")
    return y, cache


def encoder_layer_backward(dy, cache):
    grads = {}

    def linear(d, name):
        dx, grads[name + ".weight"], grads[name + ".bias"] = L.linear_backward(d, cache[name])
        return dx

    def norm(d, name):
        dx, grads[name + ".weight"], grads[name + ".bias"] = L.layernorm_backward(d, cache[name])
        return dx

    dsum = norm(dy, "output.LayerNorm")                          # the gradient of h + f
    dh = linear(L.gelu_backward(linear(dsum, "output.dense"), cache["gelu"]), "intermediate.dense")
    dh = dh + dsum                                               # h also went straight into the sum
    dsum = norm(dh, "attention.output.LayerNorm")                # the gradient of x + a
    dctx = _split(linear(dsum, "attention.output.dense"), cache["num_heads"])
    dq, dk, dv = L.attention_backward(dctx, cache["attention"])
    dx = dsum                                                    # x also went straight into the sum
    for d, n in zip((dq, dk, dv), QKV):
        dx = dx + linear(_merge(d), f"attention.self.{n}")
    return dx, grads


def tied_mlm_forward(ids, W_word, head):
    e = W_word[ids]
    t, c_dense = L.linear_forward(e, head["transform.dense.weight"], head["transform.dense.bias"])
    t, c_gelu = L.gelu_forward(t)
    t, c_norm = L.layernorm_forward(t, head["transform.LayerNorm.weight"], head["transform.LayerNorm.bias"], EPS)
    logits, c_decoder = L.linear_forward(t, W_word, head["bias"])
    return logits, (ids, W_word.shape, c_dense, c_gelu, c_norm, c_decoder)


def tied_mlm_backward(dlogits, cache):
    ids, shape, c_dense, c_gelu, c_norm, c_decoder = cache
    dt, dW_decoder, dbias = L.linear_backward(dlogits, c_decoder)
    dt, dgamma, dbeta = L.layernorm_backward(dt, c_norm)
    de, dW_dense, db_dense = L.linear_backward(L.gelu_backward(dt, c_gelu), c_dense)
    dW_word = dW_decoder.copy()
    np.add.at(dW_word, ids.reshape(-1), de.reshape(-1, shape[1]))     # the embedding's share, summed in
    return dW_word, {"transform.dense.weight": dW_dense, "transform.dense.bias": db_dense,
                     "transform.LayerNorm.weight": dgamma, "transform.LayerNorm.bias": dbeta, "bias": dbias}
