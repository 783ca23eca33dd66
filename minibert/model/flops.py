"""The FLOPs of one training step of ``BertForPreTraining``: the count MFU divides by.

Only the matrix products count (the elementwise work is a few percent at BERT's sizes), and a
product of an (m, k) by a (k, n) matrix is 2 m k n FLOPs.  The backward pass takes two products
for each product of the forward (the gradient of each operand), so a step is 3 x its forward.
"""
from __future__ import annotations


def step_flops(cfg, B: int, T: int, n_labelled: int) -> int:
    """FLOPs of the matrix products of one training step (forward + backward) for config ``cfg``:
    B sequences of T tokens, n_labelled of them with an MLM label (the decoder runs there alone)."""
    H, I, L, V = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.vocab_size
    weights = 2 * B * T * (4 * H * H + 2 * H * I)             # Q, K, V, output; feed-forward up and down
    attention = 2 * 2 * B * T * T * H                         # q k^T and P v, all heads together
    heads = 2 * B * H * H + 2 * n_labelled * (H * H + H * V)  # pooler; MLM transform and tied decoder
    return 3 * (L * (weights + attention) + heads)
