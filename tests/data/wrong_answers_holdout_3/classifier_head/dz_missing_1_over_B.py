# slip: the backward pass leaves out the 1/B of the mean: dz = dloss * (probs - onehot) without dividing by the batch size
# names it: B times | factor of B | 1/B & missing | 1/B & left out | 1/B & without
"""Exercise: the fine-tuning classifier head, forward and backward.

Fine-tuning BERT for sentence classification puts one linear layer on the
pooled [CLS] vector (notebook 8).  For a batch of B sentences with pooled
outputs pooled (B, H), a head W (C, H), b (C,) for C classes, and the labels
y (B,):

    z = pooled W^T + b                      the logits, (B, C)
    p = softmax(z)                          over the classes, (B, C)
    loss = -(1/B) sum_j log p[j, y_j]       the mean cross-entropy

The backward pass goes through the same chain in reverse: from dloss to the
logits (through the softmax and the mean), then through the linear layer to
W, b and the pooled vectors, which the encoder's backward pass takes next.

Two rules for every function here: work in float64 (the checker passes float64
arrays and wants float64 results back), and change no argument in place:
compute new arrays and return them.

Check your work with:   python -m exercises check classifier_head
"""
import numpy as np


def classifier_head_forward(pooled, W, b, labels):
    """Forward pass: logits, probabilities and the mean loss.

    Args:
        pooled: (B, H) the pooled [CLS] vectors
        W: (C, H) the head's weight, one row per class (PyTorch's layout)
        b: (C,) the head's bias
        labels: (B,) ints in [0, C)

    Returns:
        loss: a scalar (a Python float or a 0-d array), the mean over the batch
        probs: (B, C) softmax of the logits (the backward pass takes them)

    Hint: compute log-softmax stably (subtract each row's max): never log(softmax).
    """
    z = pooled @ W.T + b
    shifted = z - z.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    sumexp = e.sum(axis=1, keepdims=True)
    logp = shifted - np.log(sumexp)
    probs = e / sumexp
    B = z.shape[0]
    loss = -logp[np.arange(B), labels].mean()
    return float(loss), probs


def classifier_head_backward(dloss, pooled, W, probs, labels):
    """Backward pass.

    Args:
        dloss: the gradient of the final objective with respect to the loss (a scalar, often 1.0)
        pooled, W, labels: as in the forward pass
        probs: (B, C) the probabilities the forward pass returned

    Returns:
        dpooled: (B, H), dW: (C, H), db: (C,): the gradients of dloss * loss
    """
    B = probs.shape[0]
    dz = probs.copy()
    dz[np.arange(B), labels] -= 1.0
    dz = dz * dloss
    dpooled = dz @ W
    dW = dz.T @ pooled
    db = dz.sum(axis=0)
    return dpooled, dW, db
