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
    # TODO
    raise NotImplementedError


def encoder_layer_backward(dy, cache):
    """Backward pass of the layer.

    Args:
        dy: (B, T, H)

    Returns:
        dx: (B, T, H)
        grads: dict with the keys of params, each gradient of its parameter's shape

    The backward of a merge is a split, and the backward of a split a merge.
    """
    # TODO
    raise NotImplementedError


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
    # TODO
    raise NotImplementedError


def tied_mlm_backward(dlogits, cache):
    """Backward pass of the tiny tied model.

    Args:
        dlogits: (B, T, V)

    Returns:
        dW_word: (V, H), the sum of the decoder's share and the embedding's (every row alike,
                 no [PAD] row is special here)
        dhead: dict with the keys of head, each gradient of its parameter's shape
    """
    # TODO
    raise NotImplementedError
