# slip: the backward pass takes exp of the max-shifted logits z as the softmax, without dividing by the row sum of exp(z)
# names it: normali | sum to 1 | sums to 1 | denominator | partition
"""Exercise: softmax cross-entropy with ignored labels.

BERT's MLM loss is computed only at the ~15% of positions chosen for
prediction; every other position carries the label -100 ("ignore").  The
loss is the mean over the labelled rows only:

    loss = -(1 / n_valid) * sum over rows n with labels[n] != ignore_index of log p[n, labels[n]]
    log p = log softmax(logits) = z - log(sum(exp(z))),  z = logits - max(logits)

Two rules for every function here: work in float64 (the checker passes float64
arrays and wants float64 results back), and change no argument in place
(logits, labels, the cache): compute new arrays and return them.  The caller
still uses its arrays after the call: a residual connection sends the same x,
and the same gradient, into two branches.

Check your work with:   python -m exercises check cross_entropy
"""
import numpy as np


def softmax_cross_entropy_forward(logits, labels, ignore_index=-100):
    """Forward pass.

    Args:
        logits: (N, C) floats
        labels: (N,) ints, each a class in [0, C) or ignore_index
        ignore_index: the label of rows that do not count

    Returns:
        loss: a scalar (a Python float or a 0-d array); 0 when no row is labelled
        cache: what the backward pass needs

    Hints:
        * divide by the number of labelled rows, not by N.
        * use the ignore_index argument, not the constant -100: the checker
          also tries other values (-1, or C, which is not a class either).
        * ignore_index is not a class: ``logp[np.arange(N), labels]`` would
          read column -100 (or fail).  Replace ignored labels by 0 before
          indexing, then multiply by a 0/1 mask.
        * compute log-softmax stably (subtract the row max): never log(softmax).
    """
    logits = np.asarray(logits, dtype=np.float64)
    labels = np.asarray(labels)
    N = logits.shape[0]
    mask = labels != ignore_index
    n_valid = int(mask.sum())
    # stable log-softmax
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    safe = np.where(mask, labels, 0)
    picked = logp[np.arange(N), safe]
    if n_valid == 0:
        loss = 0.0
    else:
        loss = -float((picked * mask).sum()) / n_valid
    cache = (z, safe, mask, n_valid)
    return loss, cache


def softmax_cross_entropy_backward(dloss, cache):
    """Backward pass.

    Args:
        dloss: the gradient of the final objective with respect to the loss (a scalar, often 1.0)

    Returns:
        dlogits: (N, C) = dloss * (softmax(logits) - onehot(labels)) / n_valid on labelled rows,
        exactly 0 on ignored rows.  Compute softmax(logits) stably here too
        (exp of the cached log-probabilities, or subtract the row max).
    """
    z, safe, mask, n_valid = cache
    N = z.shape[0]
    if n_valid == 0:
        return np.zeros_like(z)
    dlogits = np.exp(z)  # softmax, stable: the row max is already subtracted
    dlogits[np.arange(N), safe] -= 1.0
    dlogits = dlogits * mask[:, None] * (dloss / n_valid)
    return dlogits
