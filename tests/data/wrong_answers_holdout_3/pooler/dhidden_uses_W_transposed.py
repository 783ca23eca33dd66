# slip: pooler_backward computes dhidden[:, 0] as dz W^T instead of dz W (the square W fits either way)
# names it: dz @ W.T | dz W^T | W transposed & dhidden | transposed & dhidden | dhidden & not transposed
"""Exercise: BERT's pooler and its next-sentence-prediction (NSP) head, forward and backward.

The NSP head does not read the whole sequence.  The pooler takes the final
hidden state of ONE position, [CLS] (position 0), through a dense layer and
tanh; a 2-way linear layer turns that into the NSP scores:

    pooled = tanh(h[:, 0] W_p^T + b_p)      (B, H)   W_p: (H, H), b_p: (H,)
    logits = pooled W_n^T + b_n             (B, 2)   W_n: (2, H), b_n: (2,)

Weights are stored as (out, in), as in the linear exercise (and Hugging
Face).  The logits are raw scores: the softmax belongs to the loss.

The backward pass of the pooler is the lesson: only h[:, 0] was read, so
only position 0 of dhidden receives a gradient; every other position gets
exactly 0 from this head (it learns from the masked-LM loss instead).

Two rules for every function here: work in float64 (the checker passes float64
arrays and wants float64 results back), and change no argument in place
(hidden, W, b, pooled, dpooled, dlogits, the cache): compute new arrays and
return them.  The caller still uses its arrays after the call.

Check your work with:   python -m exercises check pooler
"""
import numpy as np


def pooler_forward(hidden, W, b):
    """Forward pass of the pooler.

    Args:
        hidden: (B, T, H) the encoder's final hidden states; position 0 is [CLS]
        W: (H, H) stored as (out, in)
        b: (H,)

    Returns:
        pooled: (B, H) = tanh(hidden[:, 0] W^T + b)
        cache: what the backward pass needs
    """
    h0 = hidden[:, 0].copy()
    pooled = np.tanh(h0 @ W.T + b)
    cache = (hidden.shape, h0, W, pooled)
    return pooled, cache


def pooler_backward(dpooled, cache):
    """Backward pass of the pooler.

    Args:
        dpooled: (B, H)

    Returns:
        dhidden: (B, T, H), zero at every position but 0
        dW: (H, H)
        db: (H,)

    Derivation, with z = hidden[:, 0] W^T + b and pooled = tanh(z):
        dz = dpooled * tanh'(z)          tanh' = 1 - tanh^2: reuse pooled
        dhidden[:, 0] = dz W             dW = dz^T hidden[:, 0]     db = sum of dz over the batch
    """
    shape, h0, W, pooled = cache
    dz = dpooled * (1.0 - pooled ** 2)
    dhidden = np.zeros(shape, dtype=dpooled.dtype)
    dhidden[:, 0] = dz @ W.T
    dW = dz.T @ h0
    db = dz.sum(axis=0)
    return dhidden, dW, db


def nsp_head_forward(pooled, W, b):
    """Forward pass of the NSP classifier.

    Args:
        pooled: (B, H)
        W: (2, H) stored as (out, in): row 0 scores IsNext, row 1 NotNext
        b: (2,)

    Returns:
        logits: (B, 2) = pooled W^T + b, no softmax
        cache: what the backward pass needs
    """
    logits = pooled @ W.T + b
    cache = (pooled.copy(), W)
    return logits, cache


def nsp_head_backward(dlogits, cache):
    """Backward pass of the NSP classifier.

    Args:
        dlogits: (B, 2)

    Returns:
        dpooled: (B, H)
        dW: (2, H)
        db: (2,)
    """
    pooled, W = cache
    dpooled = dlogits @ W
    dW = dlogits.T @ pooled
    db = dlogits.sum(axis=0)
    return dpooled, dW, db
