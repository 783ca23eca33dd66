# slip: dq uses the transpose of dS (dS^T k), which belongs to dk; dq = dS k / sqrt(D)
# names it: dq & transposed | dq & swapaxes | dq & ds^t k | dq & without transpos | dq & not ds^t
"""Exercise: scaled dot-product attention with a padding mask.

For every head, each query attends to every key of its sequence:

    S = q k^T / sqrt(D)                (B, A, T, T): one score per (query, key)
    S[..., key] = -big   where the key is padding (attention_mask == 0)
    P = softmax(S) over the keys       (each row sums to 1)
    out = P v                          (B, A, T, D)

Shapes: B batch, A heads, T sequence length, D head size (H / A).

Two rules for every function here: work in float64 (the checker passes float64
arrays and wants float64 results back), and change no argument in place (q, k,
v, attention_mask, dout, the cache): compute new arrays and return them.  The
caller still uses its arrays after the call: a residual connection sends the
same x, and the same gradient, into two branches.

Check your work with:   python -m exercises check attention
"""
import math

import numpy as np


def attention_forward(q, k, v, attention_mask):
    """Forward pass.

    Args:
        q, k, v: (B, A, T, D)
        attention_mask: (B, T) of 0/1: 1 = a real token, 0 = padding

    Returns:
        out: (B, A, T, D)
        cache: what the backward pass needs

    Hints:
        * the mask hides *keys* (the last axis of S), for every query and head:
          reshape it to (B, 1, 1, T) so it broadcasts.
        * mask *before* the softmax, by adding a very negative number to the
          scores of padded keys (np.finfo(q.dtype).min, as Hugging Face does).
          Zeroing probabilities after the softmax leaves rows that no longer
          sum to 1.
        * do not forget the 1 / sqrt(D).
        * scores can be large: subtract each row's maximum before exp, as in
          the softmax exercise.
    """
    B, A, T, D = q.shape
    S = q @ k.swapaxes(-1, -2) / math.sqrt(D)           # (B, A, T, T)
    big_neg = np.finfo(q.dtype).min
    mask = (1.0 - attention_mask.reshape(B, 1, 1, T)) * big_neg
    S = S + mask                                        # hide padded keys
    S = S - S.max(axis=-1, keepdims=True)
    e = np.exp(S)
    P = e / e.sum(axis=-1, keepdims=True)               # softmax over the keys
    out = P @ v
    cache = (q, k, v, P)
    return out, cache


def attention_backward(dout, cache):
    """Backward pass.

    Args:
        dout: (B, A, T, D)

    Returns:
        dq, dk, dv: (B, A, T, D) each

    Derive it by going back through the forward pass one line at a time
    (out = P v, P = softmax(S), S = q k^T / sqrt(D) + mask); the mask is a
    constant.  Your softmax exercise's backward pass is one of the steps.
    Stuck?  python -m exercises hint attention   (then 2, then 3)
    """
    q, k, v, P = cache
    D = q.shape[-1]
    dv = P.swapaxes(-1, -2) @ dout                      # out = P v
    dP = dout @ v.swapaxes(-1, -2)                      # (B, A, T, T)
    dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True))  # softmax backward
    dq = dS.swapaxes(-1, -2) @ k / math.sqrt(D)
    dk = dS.swapaxes(-1, -2) @ q / math.sqrt(D)
    return dq, dk, dv
