"""The usual mistakes in counting one training step's arithmetic, and in model FLOPs utilisation.

Only matrix products count, 2 m n k FLOPs for an (m, k) x (k, n) product; the
backward pass of a product is two products of the same size, so forward and
backward together are 3 times the forward.  For L layers of width H,
feed-forward size I, vocabulary V, a batch of B sequences of T tokens and
n_labelled masked-LM labels, the forward pass does:

    encoder weights   L * 2 B T (4 H^2 + 2 H I)    Q, K, V, output; feed-forward up and down
    attention         L * 2 * 2 B T^2 H            q k^T and P v, all heads together
    pooler            2 B H^2                       one [CLS] vector per sequence
    masked-LM head    2 n_labelled (H^2 + H V)      transform, then the decoder tied to the embeddings

(notebook 7's ``step_flops``).  The embedding lookups copy rows: no products.
MFU = (FLOPs per step / seconds per step) / the peak FLOP/s of the machine.
"""
from __future__ import annotations

from .table import Table


def _count(passes=3, attention="both", attention_passes=3, mlm_at="labelled", transform=True, pooler=True,
           embedding=False, decoder=True):
    """training_step_flops, or one of its usual mistakes.

    passes: forward + backward (3) or forward only (1); attention: "both" products or "one";
    attention_passes: how many times the attention products are counted; mlm_at: "labelled" or
    "all" positions; embedding=True: the word-embedding lookup counted as a one-hot product;
    decoder=False: the tied H x V decoder left out.
    """
    def training_step_flops(L, H, I, V, B, T, n_labelled):
        products = 2 if attention == "both" else 1
        weights = L * 2 * B * T * (4 * H * H + 2 * H * I)
        scores = L * products * 2 * B * T * T * H
        n = n_labelled if mlm_at == "labelled" else B * T
        heads = (2 * B * H * H if pooler else 0) + 2 * n * ((H * H if transform else 0) + (H * V if decoder else 0))
        lookup = 2 * B * T * V * H if embedding else 0
        return passes * (weights + heads + lookup) + attention_passes * scores
    return training_step_flops


def _six_n(L, H, I, V, B, T, n_labelled):
    """6 x (the parameters outside the embeddings) x the tokens: weights and biases of the layers
    (two LayerNorms each), the pooler, the MLM transform and its LayerNorm, the decoder's bias, NSP."""
    layer = 4 * H * H + 4 * H + 2 * H * I + I + H + 4 * H
    n_params = L * layer + (H * H + H) + (H * H + 3 * H) + V + (2 * H + 2)
    return 6 * n_params * B * T


def _mfu(flops_per_step, seconds_per_step, peak_flops):
    return flops_per_step / seconds_per_step / peak_flops


TABLE = Table("step_flops", training_step_flops=_count(), mfu=_mfu)
case = TABLE.case

# ---- the count
case("6 x parameters x tokens", "6 x (parameters - V H) x tokens is not this count: it leaves out attention's two "
                                "T x T products and the MLM decoder (its V x H matrix is the embedding table, tied), "
                                "and counts the pooler and the MLM transform at every token, not at their positions",
     training_step_flops=_six_n)
case("MLM head at every position", "the MLM head runs at the n_labelled labelled positions only (minibert gathers "
                                   "them first), not at all B T positions",
     training_step_flops=_count(mlm_at="all"))
case("forward only", "the backward pass of a product is two products of the same size: forward + backward is "
                     "3 x the forward count (2 m n k forward, 6 m n k in all)",
     training_step_flops=_count(passes=1, attention_passes=1))
case("attention products counted once", "the attention products have a backward pass too: count q k^T and P v "
                                        "3 times (forward + backward), like the weight products",
     training_step_flops=_count(attention_passes=1))
case("one attention product", "attention has two T x T products per layer, q k^T (the scores) and P v "
                              "(the weighted sum of v): 2 * 2 B T^2 H forward",
     training_step_flops=_count(attention="one"))
case("embedding lookup as a product", "an embedding lookup copies rows of the table: no multiplications (its "
                                      "backward adds rows back): leave the embeddings out",
     training_step_flops=_count(embedding=True))
case("MLM transform left out", "the MLM head is two products at each labelled position: the H x H transform, "
                               "then the H x V decoder: 2 n_labelled (H^2 + H V) forward",
     training_step_flops=_count(transform=False))
case("tied decoder left out", "the decoder is tied to the embedding table, but it is still a product: h W^T, "
                              "H x V at each labelled position, 2 n_labelled H V forward (only the lookup is free)",
     training_step_flops=_count(decoder=False))
case("pooler left out", "count the pooler too: one H x H product on each sequence's [CLS] vector, 2 B H^2 forward",
     training_step_flops=_count(pooler=False))

# ---- the utilisation
case("MFU in percent", "return MFU as a fraction of the peak (0.25), not in percent (25)",
     mfu=lambda flops_per_step, seconds_per_step, peak_flops: 100 * flops_per_step / seconds_per_step / peak_flops)
case("MFU times the seconds", "the rate is FLOPs per second: divide the FLOPs of a step by its seconds",
     mfu=lambda flops_per_step, seconds_per_step, peak_flops: flops_per_step * seconds_per_step / peak_flops)
case("MFU upside down", "MFU is the rate reached over the peak rate: (flops_per_step / seconds_per_step) / "
                        "peak_flops, a number below 1",
     mfu=lambda flops_per_step, seconds_per_step, peak_flops: peak_flops * seconds_per_step / flops_per_step)


def _by_token(L, H, I, V, B, T, n_labelled):
    """Per token, as notebook 6a counts: 6 N + 12 L T H, then the pooler and the head at their positions."""
    per_token = 6 * L * (4 * H * H + 2 * H * I) + 12 * L * T * H
    return per_token * B * T + 6 * B * H * H + 6 * n_labelled * (H * H + V * H)


TABLE.variant("per token, then the heads", training_step_flops=_by_token,
              mfu=lambda flops_per_step, seconds_per_step, peak_flops: (flops_per_step / peak_flops) / seconds_per_step)
