"""The graded questions: one answer each, compared with what minibert's own code computes.

A question's function returns the student's prediction: a number, several
numbers, a letter among the options its docstring lists, or tokens.  The
right answer is never written here: each function of ``question_truths``
works it out with minibert (its tokenizer, layers, masking, pairing, FLOP
count, model), with NumPy and SciPy, or from a committed run, when the check
runs.  A wrong answer that is one of the usual
slips gets that slip's hint; any other gets the question's first hint.  The
report never prints the right answer.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..calls import call
from ..hints import HINTS
from ..report import Abort, Report
from . import question_truths as T


@dataclass(frozen=True)
class Question:
    kind: str                 # "number", "numbers", "choice" or "tokens"
    truth: object             # () -> the right answer, computed
    tol: float = 0.0          # relative tolerance of a number
    size: int = 1             # how many numbers ("numbers") or token lists ("tokens")
    options: str = ""         # the letters of a choice
    mistakes: tuple = ()      # (a usual wrong answer, its hint)


# ------------------------------------------------------------------------------ the questions
TIED = ("the MLM decoder is tied to the word table: its logits are h W^T over the whole vocabulary, so the "
        "softmax sends a gradient to every row of W, whichever tokens the batch holds")
QUESTIONS = {
    "snowman": Question("tokens", T.snowman, size=2, mistakes=(
        ([["token", "##ization", "[UNK]"], ["token", "##ization", "[UNK]"]],
         "the basic split cuts a word at whitespace and punctuation only, and the snowman is a symbol "
         "(unicodedata.category 'So'), so 'tokenization\u2603' reaches WordPiece as ONE word; and one position "
         "where no piece matches makes the whole word [UNK]"),
        ([["[UNK]"], ["[UNK]"]], "with a space, the snowman is a word of its own: only that word is unknown"),
        ([["token", "##ization", "##[UNK]"], ["token", "##ization", "[UNK]"]],
         "WordPiece never emits a piece for the unknown part: the whole word becomes [UNK], and nothing else"),
        ([["token", "##ization"], ["token", "##ization"]],
         "nothing is dropped silently: a word WordPiece cannot cut, or a word of its own, becomes [UNK]"))),
    "layernorm_sum": Question("choice", T.layernorm_sum, options="abcd", mistakes=(
        ("b", "that is the sum of the gradient that reaches x-hat; the mean subtraction takes it out again"),
        ("c", "that would be true of y = x + b; LayerNorm's output does not change when every input moves by "
              "the same amount"),
        ("d", "ask what happens to y when you add the same number to every x_i of the row"))),
    "unscaled_softmax": Question("choice", T.unscaled_softmax, options="abc", mistakes=(
        ("c", "at head size 64 the raw scores have a spread of 8, large but not yet saturating: the largest "
              "weight is near 0.84, not 1; the gradient vanishes only at much larger head sizes"),
        ("a", "the raw scores spread over about +-16 at head size 64; a softmax that peaked passes less"))),
    "masked_count": Question("numbers", T.masked_count, tol=0.0, size=3, mistakes=(
        ([2, 11, 20], "Python 3's round sends an exact half to the EVEN neighbour: round(10.5) is 10"),
        ([1, 10, 20], "round, not floor: round(1.5) is 2"),
        ([2, 10, 30], "k is capped at max_predictions_per_seq"),
        ([2, 11, 30], "two rules: round half to even (round(10.5) is 10), and the cap max_predictions_per_seq"),
        ([1, 10, 30], "round(1.5) is 2, and k is capped at max_predictions_per_seq"))),
    "isnext_share": Question("choice", T.isnext_share, options="abc", mistakes=(
        ("a", "the coin is fair, but not every chunk can be split: a chunk of ONE sentence always gets a random "
              "B"),
        ("c", "which pairs can never be IsNext? A chunk of one sentence has nothing to split"))),
    "untrained_loss": Question("numbers", T.untrained_loss, tol=0.02, size=2, mistakes=(
        ([0.0, 0.0], "an untrained model knows nothing: its loss is that of a guess, not zero"),
        ([2000.0, 2.0], "a cross-entropy is -log p of the right class: the log of the number of classes"),
        ([math.log(2000), 0.0], "the NSP head guesses too: it has 2 classes"),
        ([math.log10(2000), math.log10(2)], "the natural log: cross-entropy is measured in nats"),
        ([math.log2(2000), 1.0], "the natural log: cross-entropy is measured in nats, not bits"),
        ([math.log(30522), math.log(2)], "this model's vocabulary has V = 2,000 tokens, not BERT's 30,522"),
        ([1 / 2000, 0.5], "those are the probabilities of the right class; the loss is -log of them"))),
    "nsp_prior": Question("numbers", T.nsp_prior, tol=2e-3, size=2, mistakes=(
        ([0.693, 0.693], "that is a coin flip's loss; this model answers P(NotNext) = p for every pair"),
        ([0.767, 0.623], "the other way round: the prior fits the training pairs best, not the balanced ones"),
        ([0.623, 0.623], "the held-out pairs are balanced: half of them cost -ln p, half -ln(1 - p)"),
        ([0.898, 1.107], "in nats (natural logarithms), as every loss of the course; those are bits"),
        ([0.270, 0.333], "in nats (natural logarithms), as every loss of the course, not base 10"),
        ([0.623, 0.693], "on the held-out pairs the model still answers p, not 1/2: half cost -ln p, half -ln(1 - p)"),
        ([0.913, 0.767], "a NotNext pair costs -ln p (the model gave NotNext probability p), an IsNext pair -ln(1 - p)"))),
    "standard_errors": Question("number", T.standard_errors, tol=0.01, mistakes=(
        (4.019, "the noise of a model that learned nothing, p = 1/2: the standard error is sqrt(0.25 / n)"),
        (120.0, "the standard error is the square root of the variance 0.25 / n"),
        (389.0, "keep both in the same units: 0.126 against 0.032, or 12.6 points against 3.2"),
        (0.252, "0.5 is one coin flip's standard deviation; the mean of n of them has 0.5 / sqrt(n)"),
        (60.0, "the standard error of a mean of n coin flips is 0.5 / sqrt(n), not 0.5 / n"))),
    "mixed_bound": Question("number", T.mixed_bound, tol=0.01, mistakes=(
        (12.0, "only the products get faster; the rest of the step (a share 1 - f of its time) takes as long"),
        (2.69, "the products do not vanish: they still take f / 12 of the float32 step's time"),
        (1.52, "f is the share of the time in the products, the MFU; 1 - f is the rest"),
        (7.93, "times add, not speeds: the new step takes (1 - f) + f / r of the old one's time"),
        (0.4225, "that is the new step's time as a share of the old; the speed-up is its inverse"))),
    "attention_share": Question("number", T.attention_share, tol=0.06, mistakes=(
        (25.0, "the feed-forward's two matrices, 2 H I per token each, are the largest part of the work"),
        (2.7, "at 512 tokens: T is the sequence length, the attention products grow with it"),
        (5.3, "two products: q k^T and P v, each 2 T H FLOPs per token and layer"),
        (57.0, "the heads share H between them: A heads of size H / A cost what one head of size H would"),
        (0.1, "in percent: a share of 0.1 is 10"),
        (14.3, "the feed-forward has two matrices, H to I and I to H: 2 H I FLOPs per token each"),
        (40.0, "only q k^T and P v are attention's products; the Q, K, V and output projections are weight "
               "matrices like the feed-forward's"))),
    "longer_sequences": Question("number", T.longer_sequences, tol=0.01, mistakes=(
        (4.0, "the weight matrices' work grows with the tokens, 4 times; the attention products QK^T and PV grow "
              "with the square of the sequence length"),
        (16.0, "only the two attention products grow with T^2; the weight matrices' work grows with T"))),
    "finetune_rows": Question("choice", T.finetune_rows, options="abcd", mistakes=(
        ("b", "fine-tuning drops the MLM head: no decoder is tied to the table, only the lookup at the bottom "
              "reads it"),
        ("c", "the lookup reads the rows of the batch's tokens: those rows get the gradient back"))),
    "pre_ln_growth": Question("choice", T.pre_ln_growth, options="abcd", mistakes=(
        ("a", "in pre-LN nothing normalises the residual stream: each sub-block ADDS a vector to it"),
        ("c", "the sub-blocks add vectors in nearly independent directions: sizes add like a random walk, not "
              "in a line"),
        ("d", "the sub-blocks add vectors in nearly independent directions: the square of the size grows "
              "linearly"))),
    "float16_total": Question("number", T.float16_total, tol=1e-3, mistakes=(
        (1.0, "every partial sum is rounded to float16: once half the spacing of the total exceeds the term, "
              "adding the term changes nothing"),
        (0.125, "between 0.125 and 0.25 the spacing is 2^-13, about 1.2e-4: half of it is below 1e-4, so each "
                "term still moves the total (rounded up to a whole spacing)"),
        (0.5, "at 0.25 the spacing is 2^-12, about 2.4e-4: half of it is above 1e-4"))),
    "ring_bytes": Question("numbers", T.ring_bytes, tol=0.0, size=2, mistakes=(
        ([6000, 24000], "the reduce-scatter alone leaves each worker with one summed chunk; the all-gather sends "
                        "as many chunks again"),
        ([8000, 24000], "each of the 2 (N - 1) steps sends ONE chunk of S / N bytes"),
        ([12000, 32000], "worker 0 of the central scheme has its own vector: it receives from N - 1 workers"),
        ([16000, 32000], "2 (N - 1) steps of S / N bytes; the central worker receives from the N - 1 others"),
        ([48000, 24000], "each step of the ring sends ONE chunk of S / N bytes, not the whole vector"))),
    "t_quantile": Question("numbers", T.t_quantile, tol=1e-3, size=2, mistakes=(
        ([2.576, 2.576], "that is the normal quantile: with the spread estimated from n seeds, Student's t with "
                         "n - 1 degrees of freedom"),
        ([5.841, 4.032], "n - 1 degrees of freedom: one is spent on the mean"),
        ([4.303, 2.776], "99%, not 95%: the notebook holds each of five flags to 1%"),
        ([6.965, 3.747], "two-sided: 0.5% in each tail, the quantile at 0.995"))),
    "word_rows": Question("number", T.word_rows, tol=0.0, mistakes=(
        (12.0, TIED), (11.0, TIED), (13.0, TIED),
        (30.0, "[PAD]'s row is zeroed in the lookup's share only: the decoder's softmax reaches it like any other"))),
}


# ------------------------------------------------------------------------------ reading an answer
def _number(value) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"a number, not {type(value).__name__} {value!r}")
    if not math.isfinite(float(value)):
        raise ValueError(f"a finite number, not {value!r}")
    return float(value)


def read(q: Question, value):
    """The answer in the form the truth has; ValueError saying what was expected."""
    if q.kind == "number":
        return _number(value)
    if q.kind == "choice":
        letter = value.strip().lower() if isinstance(value, str) else None
        if letter is None or len(letter) != 1 or letter not in q.options:
            raise ValueError(f"one of the letters {', '.join(repr(o) for o in q.options)}, not {value!r}")
        return letter
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__") or len(value) != q.size:
        raise ValueError(f"{q.size} {'numbers' if q.kind == 'numbers' else 'lists of tokens'} in a tuple or a "
                         f"list, not {value!r}")
    if q.kind == "numbers":
        return [_number(v) for v in value]
    if any(isinstance(t, str) or not all(isinstance(p, str) for p in t) for t in value):
        raise ValueError(f"two lists of str, the pieces, not {value!r}")
    return [list(t) for t in value]


def same(q: Question, got, want) -> bool:
    if q.kind == "number":
        got, want = [got], [want]
    if q.kind in ("number", "numbers"):
        return all(abs(g - w) <= q.tol * max(abs(w), 1e-300) for g, w in zip(got, want))
    return got == want


def check(r: Report, name: str) -> None:
    q = QUESTIONS[name]
    value = call(r, name, hint="the function takes no argument and returns your answer")
    try:
        got = read(q, value)
    except ValueError as exc:
        r.fail(f"{name} should return {exc}", f"see the docstring of {name} for the form of the answer")
        raise Abort from None
    if same(q, got, q.truth()):
        r.ok(f"{name}: your answer {value!r} is right")
        return
    slip = next((hint for wrong, hint in q.mistakes if same(q, got, read(q, wrong))), None)
    r.fail(f"{name}: {value!r} is not the answer", slip or HINTS[name][0])
