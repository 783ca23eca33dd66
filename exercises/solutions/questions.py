"""The graded questions' answers, each with the reason (the questions are in exercises/stubs/questions.py)."""
import math

from scipy import stats


def snowman():
    # the snowman is a symbol (category So), not punctuation: glued, it makes the whole word [UNK]
    return ["[UNK]"], ["token", "##ization", "[UNK]"]


def layernorm_sum():
    # y does not change when every x_i moves by the same amount: the gradient along (1, ..., 1) is 0
    return "a"


def unscaled_softmax():
    # a spread of 8 peaks the softmax (largest weight about 0.84) without saturating it: about 0.56 times
    return "b"


def masked_count():
    # round(1.5) = 2, round(10.5) = 10 (half to even), 30 capped at 20
    return 2, 10, 20


def isnext_share():
    # a chunk of one sentence has no split: its B is always random
    return "b"


def untrained_loss():
    # logits near 0: uniform guesses, cross-entropy ln V and ln 2
    return math.log(2000), math.log(2)


def longer_sequences():
    # the weights' work 4 times, the attention products 16 times: BERT-base at 512 is 4.31 times 128
    def step(T, L=12, H=768, I=3072, V=30522, B=1):
        n = 0.15 * B * T
        return 3 * (L * (2 * B * T * (4 * H * H + 2 * H * I) + 4 * B * T * T * H) + 2 * B * H * H
                    + 2 * n * (H * H + H * V))
    return step(512) / step(128)


def finetune_rows():
    # without the tied decoder, only the lookup reads the table
    return "a"


def pre_ln_growth():
    # 48 sub-blocks add vectors in nearly independent directions: the size grows like sqrt(depth), about 5
    return "b"


def nsp_prior():
    # p = 0.686: -p ln p - (1 - p) ln(1 - p) on the training pairs, -(ln p + ln(1 - p)) / 2 on balanced ones
    p = 0.6856
    return -(p * math.log(p) + (1 - p) * math.log(1 - p)), -(math.log(p) + math.log(1 - p)) / 2


def standard_errors():
    # chance's standard error on 238 pairs is sqrt(0.25 / 238) = 0.0324; 0.126 / 0.0324
    return (0.626 - 0.5) / math.sqrt(0.25 / 238)


def mixed_bound():
    # Amdahl: the products' share f = 0.63 of the time runs r = 12.3 times as fast, the rest as before
    f, r = 0.628, 12.3
    return 1 / ((1 - f) + f / r)


def attention_share():
    # per token and layer: 2 (4 H^2 + 2 H I) for the weights against 2 * 2 T H for q k^T and P v (the head adds
    # a little to the total): 2,048 / 20,480, about 10%
    H, I, T = 768, 3072, 512
    weights = 2 * (4 * H**2 + 2 * H * I)
    attention = 2 * 2 * T * H
    return 100 * attention / (weights + attention)


def float16_total():
    # at 0.25 the spacing is 2^-12 = 2.4e-4: 1e-4 is less than half of it and rounds away
    return 0.25


def ring_bytes():
    # 2 (N - 1) chunks of S / N = 2,000 bytes; the central worker receives (N - 1) S
    return 12_000, 24_000


def t_quantile():
    # two-sided 99%: the 0.995 quantile, n - 1 degrees of freedom
    return tuple(float(stats.t.ppf(0.995, n - 1)) for n in (3, 5))


def word_rows():
    # the tied decoder gives every row of the table a gradient
    return 31
