# slip: the backward pass of the head merge reshapes d(merged) (B, T, H) straight to (B, A, T, D) without going through (B, T, A, D) and swapping axes 1 and 2, so the gradients land on the wrong heads and tokens
# names it: swapaxes | transpose | (B, T, A, D) | split & reshape | merge & backward & split
"""Exercise: put BERT together from its pieces: one encoder layer, and the decoder tied to the word embeddings.

You have written the pieces; this exercise is about joining them.  You may
call minibert's own ops for the pieces (``from minibert import ops as L``:
linear_forward, layernorm_forward, gelu_forward, attention_forward,
attention_mask_bias and their backwards; read minibert/ops/), or your own.
Write the head split and merge yourself (not L.split_heads / L.merge_heads):
they, and the two residual branches, are the lesson.  No dropout.

1. One post-LN encoder layer (BERT's order):

    q, k, v = x W_q^T + b_q, x W_k^T + b_k, x W_v^T + b_v     (B, T, H) each
    split each into heads:  (B, T, H) -> (B, T, A, D) -> (B, A, T, D)     D = H / A
    ctx = attention(q, k, v, padding mask)                    (B, A, T, D)
    a = merge(ctx) W_o^T + b_o:  (B, A, T, D) -> (B, T, A, D) -> (B, T, H)
    h = LayerNorm_1(x + a)
    f = GELU(h W_in^T + b_in) W_out^T + b_out                 H -> I -> H, the exact GELU
    y = LayerNorm_2(h + f)                                    eps = 1e-12 in both LayerNorms

   The LayerNorm comes AFTER the residual sum ("post-LN").  In the backward
   pass a value used twice gets the sum of both gradients: h feeds the
   feed-forward block and the sum h + f; x feeds the three projections and
   the sum x + a.

2. The tied decoder, in a model with no layers between the embedding and the
   masked-LM head:

    e = W_word[ids]                           (B, T, H)   the word embeddings
    t = LayerNorm(GELU(e W_d^T + b_d))        (B, T, H)   the MLM head's transform
    logits = t W_word^T + b                   (B, T, V)   the decoder: the SAME table W_word

   W_word is used twice, so its gradient is the sum of two shares.

The parameters come in dicts named as in Hugging Face's BERT (and minibert),
below ``bert.encoder.layer.<i>.`` for the layer and ``cls.predictions.`` for
the head; the gradients go back in dicts with the same keys.

Two rules for every function here: work in float64 (the checker passes float64
arrays and wants float64 results back), and change no argument in place (x,
the parameter dicts and their arrays, dy, the cache): compute new arrays and
return them.

Check your work with:   python -m exercises check encoder_layer
"""
import numpy as np

from minibert import ops as L


import math

from scipy.special import erf

EPS = 1e-12
SELF = "attention.self."


# My own pieces, as in the earlier exercises.

def _linear_forward(x, W, b):
    return x @ W.T + b, (x, W)


def _linear_backward(dy, cache):
    x, W = cache
    dx = dy @ W
    dy2 = dy.reshape(-1, dy.shape[-1])
    dW = dy2.T @ x.reshape(-1, x.shape[-1])
    db = dy2.sum(axis=0)
    return dx, dW, db


def _layernorm_forward(x, gamma, beta, eps=EPS):
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = (x - mu) * rstd
    return xhat * gamma + beta, (xhat, rstd, gamma)


def _layernorm_backward(dy, cache):
    xhat, rstd, gamma = cache
    H = xhat.shape[-1]
    dgamma = (dy * xhat).reshape(-1, H).sum(axis=0)
    dbeta = dy.reshape(-1, H).sum(axis=0)
    g = dy * gamma
    dx = rstd * (g - g.mean(axis=-1, keepdims=True)
                 - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    return dx, dgamma, dbeta


def _gelu_forward(x):
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0))), x


def _gelu_backward(dy, x):
    cdf = 0.5 * (1.0 + erf(x / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * x ** 2) / math.sqrt(2.0 * math.pi)
    return dy * (cdf + x * pdf)


def _attention_forward(q, k, v, attention_mask):
    D = q.shape[-1]
    bias = np.where(attention_mask[:, None, None, :] == 0, -10000.0, 0.0)
    S = q @ k.swapaxes(-1, -2) / math.sqrt(D) + bias
    S = S - S.max(axis=-1, keepdims=True)
    E = np.exp(S)
    P = E / E.sum(axis=-1, keepdims=True)
    return P @ v, (q, k, v, P)


def _attention_backward(dout, cache):
    q, k, v, P = cache
    D = q.shape[-1]
    dv = P.swapaxes(-1, -2) @ dout
    dP = dout @ v.swapaxes(-1, -2)
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
    dq = dS @ k / math.sqrt(D)
    dk = dS.swapaxes(-1, -2) @ q / math.sqrt(D)
    return dq, dk, dv


def _split_heads(x, num_heads):
    B, T, H = x.shape
    return x.reshape(B, T, num_heads, H // num_heads).swapaxes(1, 2)


def _merge_heads(x):
    B, A, T, D = x.shape
    return x.swapaxes(1, 2).reshape(B, T, A * D)


def encoder_layer_forward(x, params, attention_mask, num_heads):
    """Forward pass of one post-LN layer.

    Args:
        x: (B, T, H)
        params: dict of the layer's parameters (I = 4H, the intermediate size):
            "attention.self.query.weight" (H, H), "attention.self.query.bias" (H,),
            the same for "attention.self.key" and "attention.self.value",
            "attention.output.dense.weight" (H, H), ".bias" (H,),
            "attention.output.LayerNorm.weight" (H,), ".bias" (H,)      LayerNorm_1's gamma, beta
            "intermediate.dense.weight" (I, H), ".bias" (I,),
            "output.dense.weight" (H, I), ".bias" (H,),
            "output.LayerNorm.weight" (H,), ".bias" (H,)                LayerNorm_2's gamma, beta
        attention_mask: (B, T) of 0/1: 1 = a real token, 0 = padding (hide it as a KEY)
        num_heads: A

    Returns:
        y: (B, T, H)
        cache: what the backward pass needs
    """
    A = num_heads
    q, c_q = _linear_forward(x, params[SELF + "query.weight"], params[SELF + "query.bias"])
    k, c_k = _linear_forward(x, params[SELF + "key.weight"], params[SELF + "key.bias"])
    v, c_v = _linear_forward(x, params[SELF + "value.weight"], params[SELF + "value.bias"])
    ctx, c_att = _attention_forward(_split_heads(q, A), _split_heads(k, A), _split_heads(v, A),
                                    attention_mask)
    a, c_o = _linear_forward(_merge_heads(ctx), params["attention.output.dense.weight"],
                             params["attention.output.dense.bias"])
    h, c_ln1 = _layernorm_forward(x + a, params["attention.output.LayerNorm.weight"],
                                  params["attention.output.LayerNorm.bias"])
    u, c_in = _linear_forward(h, params["intermediate.dense.weight"], params["intermediate.dense.bias"])
    g, c_gelu = _gelu_forward(u)
    f, c_out = _linear_forward(g, params["output.dense.weight"], params["output.dense.bias"])
    y, c_ln2 = _layernorm_forward(h + f, params["output.LayerNorm.weight"], params["output.LayerNorm.bias"])
    cache = {"A": A, "q": c_q, "k": c_k, "v": c_v, "att": c_att, "o": c_o, "ln1": c_ln1,
             "in": c_in, "gelu": c_gelu, "out": c_out, "ln2": c_ln2}
    return y, cache


def encoder_layer_backward(dy, cache):
    """Backward pass of the layer.

    Args:
        dy: (B, T, H)

    Returns:
        dx: (B, T, H)
        grads: dict with the keys of params, each gradient of its parameter's shape

    The backward of a merge is a split, and the backward of a split a merge.
    """
    A = cache["A"]
    grads = {}
    ds2, grads["output.LayerNorm.weight"], grads["output.LayerNorm.bias"] = \
        _layernorm_backward(dy, cache["ln2"])
    dg, grads["output.dense.weight"], grads["output.dense.bias"] = _linear_backward(ds2, cache["out"])
    du = _gelu_backward(dg, cache["gelu"])
    dh_ffn, grads["intermediate.dense.weight"], grads["intermediate.dense.bias"] = \
        _linear_backward(du, cache["in"])
    dh = dh_ffn + ds2                       # h feeds the FFN and the sum h + f
    ds1, grads["attention.output.LayerNorm.weight"], grads["attention.output.LayerNorm.bias"] = \
        _layernorm_backward(dh, cache["ln1"])
    dmerged, grads["attention.output.dense.weight"], grads["attention.output.dense.bias"] = \
        _linear_backward(ds1, cache["o"])
    B, T, H = dmerged.shape
    dctx = dmerged.reshape(B, A, T, H // A)  # back to the heads' shape
    dqh, dkh, dvh = _attention_backward(dctx, cache["att"])
    dx = ds1.copy()                         # x feeds the sum x + a ...
    for name, d in (("query", dqh), ("key", dkh), ("value", dvh)):
        dxi, grads[SELF + name + ".weight"], grads[SELF + name + ".bias"] = \
            _linear_backward(_merge_heads(d), cache[name[0]])
        dx = dx + dxi                       # ... and the three projections
    return dx, grads


def tied_mlm_forward(ids, W_word, head):
    """Forward pass of the tiny tied model.

    Args:
        ids: (B, T) ints in [0, V)
        W_word: (V, H), the word-embedding table, also the decoder's weight
        head: dict of the head's parameters:
            "transform.dense.weight" (H, H), "transform.dense.bias" (H,),
            "transform.LayerNorm.weight" (H,), "transform.LayerNorm.bias" (H,)   eps = 1e-12
            "bias" (V,), the decoder's own bias

    Returns:
        logits: (B, T, V)
        cache: what the backward pass needs
    """
    e = W_word[ids]
    u, c_dense = _linear_forward(e, head["transform.dense.weight"], head["transform.dense.bias"])
    g, c_gelu = _gelu_forward(u)
    t, c_ln = _layernorm_forward(g, head["transform.LayerNorm.weight"], head["transform.LayerNorm.bias"])
    logits = t @ W_word.T + head["bias"]
    cache = {"ids": ids, "W_word": W_word, "t": t, "dense": c_dense, "gelu": c_gelu, "ln": c_ln}
    return logits, cache


def tied_mlm_backward(dlogits, cache):
    """Backward pass of the tiny tied model.

    Args:
        dlogits: (B, T, V)

    Returns:
        dW_word: (V, H), the sum of the decoder's share and the embedding's (every row alike,
                 no [PAD] row is special here)
        dhead: dict with the keys of head, each gradient of its parameter's shape
    """
    ids, W_word, t = cache["ids"], cache["W_word"], cache["t"]
    V, H = W_word.shape
    dhead = {}
    dl2 = dlogits.reshape(-1, V)
    dhead["bias"] = dl2.sum(axis=0)
    dW_decoder = dl2.T @ t.reshape(-1, H)
    dt = dlogits @ W_word
    dg, dhead["transform.LayerNorm.weight"], dhead["transform.LayerNorm.bias"] = \
        _layernorm_backward(dt, cache["ln"])
    du = _gelu_backward(dg, cache["gelu"])
    de, dhead["transform.dense.weight"], dhead["transform.dense.bias"] = \
        _linear_backward(du, cache["dense"])
    dW_embedding = np.zeros_like(W_word)
    np.add.at(dW_embedding, ids.ravel(), de.reshape(-1, H))
    dW_word = dW_decoder + dW_embedding
    return dW_word, dhead
