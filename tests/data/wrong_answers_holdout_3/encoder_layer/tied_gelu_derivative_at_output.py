# slip: tied_mlm_backward evaluates GELU's derivative at the GELU output instead of at its input (the transform dense layer's output)
# names it: gelu & its output | gelu & at the output | gelu & pre-activation | gelu & evaluated at | gelu & instead of its input
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
from scipy.special import erf


# my own pieces (from the earlier exercises)
def _linear_forward(x, W, b):
    return x @ W.T + b


def _linear_backward(dy, x, W):
    X = x.reshape(-1, x.shape[-1])
    G = dy.reshape(-1, dy.shape[-1])
    dx = (G @ W).reshape(x.shape)
    return dx, G.T @ X, G.sum(axis=0)


def _layernorm_forward(x, gamma, beta, eps=1e-12):
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    r = 1.0 / np.sqrt(var + eps)
    xhat = (x - mu) * r
    return xhat * gamma + beta, (xhat, r)


def _layernorm_backward(dy, cache, gamma):
    xhat, r = cache
    g = dy * gamma
    dx = r * (g - g.mean(axis=-1, keepdims=True) - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    axes = tuple(range(dy.ndim - 1))
    return dx, (dy * xhat).sum(axis=axes), dy.sum(axis=axes)


def _gelu_forward(x):
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def _gelu_backward(dout, x):
    cdf = 0.5 * (1.0 + erf(x / np.sqrt(2.0)))
    pdf = np.exp(-0.5 * x ** 2) / np.sqrt(2.0 * np.pi)
    return dout * (cdf + x * pdf)


def _split(x, A):
    B, T, H = x.shape
    return x.reshape(B, T, A, H // A).swapaxes(1, 2)


def _merge(x):
    B, A, T, D = x.shape
    return x.swapaxes(1, 2).reshape(B, T, A * D)


def _attention_forward(q, k, v, bias):
    D = q.shape[-1]
    S = q @ k.swapaxes(-1, -2) / np.sqrt(D) + bias
    S = S - S.max(axis=-1, keepdims=True)
    e = np.exp(S)
    P = e / e.sum(axis=-1, keepdims=True)
    return P @ v, (q, k, v, P)


def _attention_backward(dout, cache):
    q, k, v, P = cache
    D = q.shape[-1]
    dv = P.swapaxes(-1, -2) @ dout
    dP = dout @ v.swapaxes(-1, -2)
    dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True))
    dq = dS @ k / np.sqrt(D)
    dk = dS.swapaxes(-1, -2) @ q / np.sqrt(D)
    return dq, dk, dv


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
    p = params
    A = num_heads
    bias = L.attention_mask_bias(attention_mask, x.dtype)
    q = _linear_forward(x, p["attention.self.query.weight"], p["attention.self.query.bias"])
    k = _linear_forward(x, p["attention.self.key.weight"], p["attention.self.key.bias"])
    v = _linear_forward(x, p["attention.self.value.weight"], p["attention.self.value.bias"])
    ctx, att = _attention_forward(_split(q, A), _split(k, A), _split(v, A), bias)
    m = _merge(ctx)
    a = _linear_forward(m, p["attention.output.dense.weight"], p["attention.output.dense.bias"])
    h, ln1 = _layernorm_forward(x + a, p["attention.output.LayerNorm.weight"],
                                p["attention.output.LayerNorm.bias"])
    u = _linear_forward(h, p["intermediate.dense.weight"], p["intermediate.dense.bias"])
    g = _gelu_forward(u)
    f = _linear_forward(g, p["output.dense.weight"], p["output.dense.bias"])
    y, ln2 = _layernorm_forward(h + f, p["output.LayerNorm.weight"], p["output.LayerNorm.bias"])
    cache = dict(x=x, p=p, A=A, att=att, m=m, h=h, u=u, g=g, ln1=ln1, ln2=ln2)
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
    c = cache
    p, x, A = c["p"], c["x"], c["A"]
    grads = {}
    # second sublayer: y = LN_2(h + f)
    ds2, grads["output.LayerNorm.weight"], grads["output.LayerNorm.bias"] = _layernorm_backward(
        dy, c["ln2"], p["output.LayerNorm.weight"])
    dg, grads["output.dense.weight"], grads["output.dense.bias"] = _linear_backward(
        ds2, c["g"], p["output.dense.weight"])
    du = _gelu_backward(dg, c["u"])
    dh_ffn, grads["intermediate.dense.weight"], grads["intermediate.dense.bias"] = _linear_backward(
        du, c["h"], p["intermediate.dense.weight"])
    dh = dh_ffn + ds2          # h is used twice
    # first sublayer: h = LN_1(x + a)
    ds1, grads["attention.output.LayerNorm.weight"], grads["attention.output.LayerNorm.bias"] = _layernorm_backward(
        dh, c["ln1"], p["attention.output.LayerNorm.weight"])
    dm, grads["attention.output.dense.weight"], grads["attention.output.dense.bias"] = _linear_backward(
        ds1, c["m"], p["attention.output.dense.weight"])
    dq, dk, dv = _attention_backward(_split(dm, A), c["att"])
    dxq, grads["attention.self.query.weight"], grads["attention.self.query.bias"] = _linear_backward(
        _merge(dq), x, p["attention.self.query.weight"])
    dxk, grads["attention.self.key.weight"], grads["attention.self.key.bias"] = _linear_backward(
        _merge(dk), x, p["attention.self.key.weight"])
    dxv, grads["attention.self.value.weight"], grads["attention.self.value.bias"] = _linear_backward(
        _merge(dv), x, p["attention.self.value.weight"])
    dx = ds1 + dxq + dxk + dxv  # x is used four times
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
    u = _linear_forward(e, head["transform.dense.weight"], head["transform.dense.bias"])
    g = _gelu_forward(u)
    t, ln = _layernorm_forward(g, head["transform.LayerNorm.weight"], head["transform.LayerNorm.bias"])
    logits = t @ W_word.T + head["bias"]
    cache = dict(ids=ids, W_word=W_word, head=head, e=e, u=u, g=g, t=t, ln=ln)
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
    c = cache
    W_word, head, ids = c["W_word"], c["head"], c["ids"]
    V, H = W_word.shape
    D2 = dlogits.reshape(-1, V)
    dW_dec = D2.T @ c["t"].reshape(-1, H)      # the decoder's share
    dbias = D2.sum(axis=0)
    dt = dlogits @ W_word
    dg, dgamma, dbeta = _layernorm_backward(dt, c["ln"], head["transform.LayerNorm.weight"])
    du = _gelu_backward(dg, c["g"])
    de, dWd, dbd = _linear_backward(du, c["e"], head["transform.dense.weight"])
    dW_emb = np.zeros_like(W_word)            # the embedding's share
    np.add.at(dW_emb, ids.reshape(-1), de.reshape(-1, H))
    dW_word = dW_dec + dW_emb
    dhead = {
        "transform.dense.weight": dWd,
        "transform.dense.bias": dbd,
        "transform.LayerNorm.weight": dgamma,
        "transform.LayerNorm.bias": dbeta,
        "bias": dbias,
    }
    return dW_word, dhead
