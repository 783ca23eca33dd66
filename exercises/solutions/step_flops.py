"""Solution: the FLOPs of one training step, and model FLOPs utilisation."""


def training_step_flops(L, H, I, V, B, T, n_labelled):
    tokens = B * T
    weights = 2 * tokens * (4 * H * H + 2 * H * I)      # Q, K, V, output; feed-forward up and down
    attention = 2 * (2 * B * T * T * H)                 # q k^T and P v, all heads together
    heads = 2 * B * H * H + 2 * n_labelled * (H * H + H * V)   # pooler; MLM transform and decoder
    return 3 * (L * (weights + attention) + heads)


def mfu(flops_per_step, seconds_per_step, peak_flops):
    return flops_per_step / seconds_per_step / peak_flops
