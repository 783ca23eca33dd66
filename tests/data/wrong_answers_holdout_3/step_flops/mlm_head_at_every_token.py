# slip: the masked-LM head (transform and decoder) is counted at all B T tokens instead of the n_labelled labelled positions only
# names it: labelled positions only | mlm & every token | mlm & all tokens | mlm & b t & n_labelled | only at the labelled
"""Exercise: the arithmetic of one training step, and how much of the machine it uses.

Almost all of BERT's work is matrix products, so a training step's cost is
counted in their floating-point operations: an (m, k) x (k, n) product is
2 m n k FLOPs (a multiply and an add for each of m n k terms).  Its backward
pass is two products of the same size (the gradients of both factors), so a
product costs 3 times its forward count in a training step.

Count the products of one step of minibert's BertForPreTraining (notebook 7):
the encoder's weight matrices at every token, the two attention products of
every layer, the pooler on each [CLS] vector, and the masked-LM head (its
H x H transform and the H x V decoder tied to the embeddings) at the labelled
positions only, as minibert runs it.  The embedding lookups copy rows: no
products.  Leave out the NSP classifier (2 x H per sequence) and everything
that is not a product (softmax, GELU, LayerNorm, AdamW).

Model FLOPs utilisation (MFU) is the rate at which a step does this useful
arithmetic, as a fraction of the fastest rate the machine reaches.

Check your work with:   python -m exercises check step_flops
"""


def training_step_flops(L, H, I, V, B, T, n_labelled):
    """The FLOPs of the matrix products of one training step (forward + backward).

    Args:
        L: layers; H: hidden size; I: feed-forward (intermediate) size; V: vocabulary size
        B: sequences in the batch; T: tokens per sequence
        n_labelled: masked-LM labels in the batch (positions whose label is not -100)

    Returns:
        one number (an int is best: it is a count)
    """
    # TODO
    tokens = B * T
    # per layer: Q, K, V, output (H x H each) and the feed-forward (H x I, I x H) at every token
    weights = 2 * tokens * (4 * H * H + 2 * H * I)
    # attention: q k^T and P v, (T, H) x (H, T) and (T, T) x (T, H) per sequence
    attention = 2 * (2 * B * T * T * H)
    encoder = L * (weights + attention)
    pooler = 2 * B * H * H                      # once per sequence, on [CLS]
    mlm = 2 * tokens * (H * H + H * V)          # transform and tied decoder
    forward = encoder + pooler + mlm
    return 3 * forward                          # backward = two more products of each size


def mfu(flops_per_step, seconds_per_step, peak_flops):
    """Model FLOPs utilisation: the FLOP/s a training step reaches, as a fraction of peak_flops (FLOP/s).

    Returns:
        a number, 0.25 for a quarter of the peak
    """
    # TODO
    return flops_per_step / seconds_per_step / peak_flops
