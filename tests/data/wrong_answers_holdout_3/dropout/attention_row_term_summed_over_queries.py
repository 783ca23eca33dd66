# slip: in attention_dropout_backward the softmax backward's row term sum(dP * P) runs over the queries (axis -2) instead of over the keys (the last axis)
# names it: axis=-2 | axis -2 | over the queries | sum & wrong axis | sum_keys & not & queries
"""Exercise: inverted dropout, on an activation and on the attention weights.

During pre-training BERT zeroes entries at random: the output of the
embeddings and of every sublayer (hidden_dropout_prob = 0.1), and the
attention weights (attention_probs_dropout_prob = 0.1).  At evaluation
nothing is dropped.  minibert does the same (minibert/ops/dropout.py).

"Inverted" dropout does all of its scaling at training time:

    train:  mask = keep / (1 - p)      keep[i] = 1 with probability 1 - p, else 0
            out  = x * mask            so E[out] = x
    eval:   out  = x                   the identity: no mask, no scaling

p is the probability of DROPPING an entry.  The backward pass multiplies by
the SAME mask as the forward pass: keep it in the cache, do not draw another.

Two rules for every function here: work in float64 (the checker passes float64
arrays and wants float64 results back), and change no argument in place (x, q,
k, v, attention_mask, dout, the cache): compute new arrays and return them.
The caller still uses its arrays after the call: a residual connection sends
the same x, and the same gradient, into two branches.

Check your work with:   python -m exercises check dropout
"""
import math

import numpy as np


def dropout_forward(x, p, rng, *, train):
    """Forward pass.

    Args:
        x: an array of any shape
        p: the probability of dropping each entry, 0 <= p < 1
        rng: a numpy.random.Generator; draw every random number from it
        train: True in training (drop and scale), False at evaluation (identity)

    Returns:
        out: x's shape
        cache: what the backward pass needs (the mask; None at evaluation)

    Hints:
        * draw one uniform number per entry, u = rng.random(x.shape), and keep
          the entries where u >= p.
        * the same seed must give the same mask: the checker's gradient check
          calls your forward pass again with a generator of the same seed.
    """
    if not train:
        return x.copy(), None
    keep = rng.random(x.shape) >= p
    mask = keep / (1.0 - p)
    return x * mask, mask


def dropout_backward(dout, cache):
    """Backward pass.

    Args:
        dout: x's shape
        cache: from dropout_forward

    Returns:
        dx: x's shape.  out = x * mask, so dx = dout * mask (dout itself at evaluation).
    """
    if cache is None:
        return dout.copy()
    mask = cache
    return dout * mask


def attention_dropout_forward(q, k, v, attention_mask, p, rng, *, train):
    """Scaled dot-product attention with dropout on the attention weights.

    Args:
        q, k, v: (B, A, T, D)
        attention_mask: (B, T) of 0/1: 1 = a real token, 0 = padding
        p, rng, train: as for dropout_forward

    Returns:
        out: (B, A, T, D)
        cache: what the backward pass needs

    As in the attention exercise, then dropout between the softmax and v:

        S = q k^T / sqrt(D) + mask bias            (B, A, T, T)
        P = softmax(S) over the keys
        Pd = dropout(P)                            (your dropout_forward)
        out = Pd v

    The rows of Pd no longer sum to 1 in training: that is expected.
    """
    B, A, T, D = q.shape
    big_neg = np.finfo(q.dtype).min
    bias = np.where(attention_mask[:, None, None, :] > 0, 0.0, big_neg)
    S = q @ k.swapaxes(-1, -2) / math.sqrt(D) + bias
    S = S - S.max(axis=-1, keepdims=True)
    e = np.exp(S)
    P = e / e.sum(axis=-1, keepdims=True)
    Pd, dmask = dropout_forward(P, p, rng, train=train)
    out = Pd @ v
    cache = (q, k, v, P, Pd, dmask)
    return out, cache


def attention_dropout_backward(dout, cache):
    """Backward pass.

    Args:
        dout: (B, A, T, D)

    Returns:
        dq, dk, dv: (B, A, T, D) each

    Go back from out to q, k and v one line of the forward pass at a time;
    dropout's backward uses the forward's mask, and the softmax's backward
    needs the weights as they were BEFORE dropout.
    Stuck?  python -m exercises hint dropout   (then 2, then 3)
    """
    q, k, v, P, Pd, dmask = cache
    D = q.shape[-1]
    dv = Pd.swapaxes(-1, -2) @ dout
    dPd = dout @ v.swapaxes(-1, -2)
    dP = dropout_backward(dPd, dmask)
    dS = P * (dP - (dP * P).sum(axis=-2, keepdims=True))
    dq = dS @ k / math.sqrt(D)
    dk = dS.swapaxes(-1, -2) @ q / math.sqrt(D)
    return dq, dk, dv
