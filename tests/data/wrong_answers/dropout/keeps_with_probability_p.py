# slip: keep = u < p: an entry is kept with probability p and dropped with probability 1 - p, the reverse of the rule
# names it: u >= p | u < p | reverse | kept with probability | about p | 1 - p of | 0.9 | share dropped | fraction
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


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


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
    if not train or p == 0.0:
        return x, None
    keep = rng.random(x.shape) < p
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
        return dout
    return dout * cache


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
    scale = 1.0 / math.sqrt(q.shape[-1])
    bias = np.where(attention_mask == 1, 0.0, np.finfo(q.dtype).min)
    scores = q @ k.swapaxes(-1, -2) * scale + bias[:, None, None, :]
    probs = _softmax(scores)
    dropped, mask = dropout_forward(probs, p, rng, train=train)
    out = dropped @ v
    cache = (q, k, v, probs, dropped, mask, scale)
    return out, cache


def attention_dropout_backward(dout, cache):
    """Backward pass.

    Args:
        dout: (B, A, T, D)

    Returns:
        dq, dk, dv: (B, A, T, D) each

    Derivation, from out back to q, k and v:
        dv  = Pd^T dout                            (the weights v was multiplied by)
        dPd = dout v^T
        dP  = dPd * mask                           (dropout's backward, the forward's mask)
        dS  = P * (dP - sum_keys(dP * P))          (the softmax backward, with P before dropout)
        dq  = dS k / sqrt(D)        dk = dS^T q / sqrt(D)
    """
    q, k, v, probs, dropped, mask, scale = cache
    dv = dropped.swapaxes(-1, -2) @ dout
    dprobs = dropout_backward(dout @ v.swapaxes(-1, -2), mask)
    dscores = probs * (dprobs - (dprobs * probs).sum(axis=-1, keepdims=True)) * scale
    dq = dscores @ k
    dk = dscores.swapaxes(-1, -2) @ q
    return dq, dk, dv
