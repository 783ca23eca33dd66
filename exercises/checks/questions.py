"""The graded questions: one answer each, compared with what minibert's own code computes.

A question's function returns the student's prediction: a number, several
numbers, a letter among the options its docstring lists, or tokens.  The
right answer is never written here: each ``_truth_*`` works it out with
minibert (its tokenizer, layers, masking, pairing, FLOP count, model) or with
NumPy and SciPy, when the check runs.  A wrong answer that is one of the usual
slips gets that slip's hint; any other gets the question's first hint.  The
report never prints the right answer.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..calls import call
from ..hints import HINTS
from ..report import Abort, Report

ROOT = Path(__file__).resolve().parents[2]      # the repository: the committed runs some questions are about
H200 = ROOT / "benchmarks/results/h200_step_2026-11-27.json"         # notebook 10b's step times


@dataclass(frozen=True)
class Question:
    kind: str                 # "number", "numbers", "choice" or "tokens"
    truth: object             # () -> the right answer, computed
    tol: float = 0.0          # relative tolerance of a number
    size: int = 1             # how many numbers ("numbers") or token lists ("tokens")
    options: str = ""         # the letters of a choice
    mistakes: tuple = ()      # (a usual wrong answer, its hint)


# ------------------------------------------------------------------------------ the truths
def _truth_snowman():
    from minibert.data.tokenizer import WordPieceTokenizer
    tok = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "token", "##ization", "to", "##ken"])
    return [tok.tokenize("tokenization\u2603"), tok.tokenize("tokenization \u2603")]


def _truth_layernorm_sum():
    """The option whose value equals the sum of minibert's LayerNorm input gradient on random rows."""
    from minibert.ops.layernorm import layernorm_backward, layernorm_forward
    rng = np.random.default_rng(0)
    x, gamma, beta, dy = (rng.standard_normal((5, 8)) * 3 + 1 for _ in range(4))
    dx = layernorm_backward(dy, layernorm_forward(x, gamma[0], beta[0], 1e-12)[1])[0]
    candidates = {"a": np.zeros(5), "b": (gamma[0] * dy).sum(-1), "c": dy.sum(-1)}
    scale = np.abs(dx).max()
    return next((k for k, v in candidates.items() if np.allclose(dx.sum(-1), v, rtol=0, atol=1e-9 * scale)), "d")


def _truth_unscaled_softmax():
    """The band of the ratio of the softmax Jacobian's size, unscaled / scaled, at head size 64."""
    from minibert.ops.attention import softmax_forward
    rng = np.random.default_rng(0)
    D, T, n = 64, 16, 2000
    s = np.einsum("nd,ntd->nt", rng.standard_normal((n, D)), rng.standard_normal((n, T, D)))

    def size(scores):
        p = softmax_forward(scores)[0]
        jac = p[:, :, None] * np.eye(T) - p[:, :, None] * p[:, None, :]
        return np.sqrt((jac ** 2).sum((1, 2))).mean()
    ratio = size(s) / size(s / math.sqrt(D))
    return "a" if ratio > 0.8 else "b" if ratio > 0.2 else "c"


def _truth_masked_count():
    from minibert.data.masking import mask_tokens
    rng = np.random.default_rng(0)
    return [len(mask_tokens(["[CLS]"] + ["word"] * (n - 2) + ["[SEP]"], ["word"], rng,
                            masked_lm_prob=0.15, max_predictions_per_seq=20).positions) for n in (10, 70, 200)]


def _truth_isnext_share():
    """The band of the IsNext share of minibert's pairing (Google's rule) on documents of 1 to 6 sentences."""
    from minibert.data.instances import create_training_instances
    rng = np.random.default_rng(0)
    docs = [[[f"w{rng.integers(50)}" for _ in range(rng.integers(4, 12))] for _ in range(rng.integers(1, 7))]
            for _ in range(300)]
    share = np.mean([not i.is_random_next for i in create_training_instances(docs, max_seq_length=32, seed=0)])
    return "a" if abs(share - 0.5) < 0.03 else "b" if share < 0.5 else "c"


def _truth_untrained_loss():
    import minibert as mb
    V, B, T = 2000, 16, 32
    model = mb.BertForPreTraining(mb.BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2,
                                                num_attention_heads=2, intermediate_size=64), dtype="float64")
    rng = np.random.default_rng(0)
    ids = rng.integers(5, V, (B, T))
    labels = np.where(rng.random((B, T)) < 0.15, rng.integers(5, V, (B, T)), -100)
    out = model.forward(ids, np.zeros_like(ids), np.ones_like(ids), mlm_labels=labels,
                        nsp_labels=rng.integers(0, 2, B), train=False)
    return [float(out.mlm_loss), float(out.nsp_loss)]


def _truth_nsp_prior():
    from minibert.data import build_pretraining_dataset, load_corpus
    from minibert.data.tokenizer import WordPieceTokenizer
    from minibert.train import split_documents
    tok = WordPieceTokenizer.from_vocab_file(ROOT / "notebooks/pretrained/docs-bert-h64/vocab.txt")
    docs, _ = split_documents(load_corpus("builtin"), 0.1, 0)
    p = build_pretraining_dataset(docs, tok, max_seq_length=32, dupe_factor=2, seed=0).not_next_share()
    return [-(p * math.log(p) + (1 - p) * math.log(1 - p)), -(math.log(p) + math.log(1 - p)) / 2]   # the prior's


def _truth_standard_errors():
    path = ROOT / "notebooks/pretrained/docs-bert-h64/metrics.jsonl"
    last = [r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines()) if r["kind"] == "eval"][-1]
    return (last["nsp_acc"] - 0.5) / math.sqrt(0.25 / last["n_pairs"])      # in standard errors of chance


def _truth_mixed_bound():
    """Amdahl's law on the H200's float32 base step at 512: its products (its MFU) at the float16 ceiling."""
    h = json.loads(H200.read_text(encoding="utf-8"))["step"]
    row = next(r for r in h["float32"]["512"] if r["form"] == "minibert" and r["preset"] == "base")
    ceiling = {p: np.median([r["gemm_peak"] for rows in h[p].values() for r in rows]) for p in h}
    f = row["gflops"] / row["gemm_peak"]
    return float(1 / ((1 - f) + f * ceiling["float32"] / ceiling["mixed"]))


def _truth_attention_share():
    import minibert as mb
    from minibert.model.flops import step_flops
    c, B, T = mb.BertConfig.from_preset("base", vocab_size=30522), 32, 512
    n = next(r["n_masked"] for r in json.loads(H200.read_text(encoding="utf-8"))["step"]["mixed"]["512"]
             if r["preset"] == "base")
    return 100 * 3 * c.num_hidden_layers * 2 * 2 * B * T * T * c.hidden_size / step_flops(c, B, T, n)


def _truth_longer_sequences():
    import minibert as mb
    from minibert.model.flops import step_flops
    base, B = mb.BertConfig(), 32
    return step_flops(base, B, 512, round(0.15 * B * 512)) / step_flops(base, B, 128, round(0.15 * B * 128))


def _truth_finetune_rows():
    """Which rows of the word table get a gradient when only the pooled output's gradient comes back."""
    import minibert as mb
    V = 40
    model = mb.BertModel(mb.BertConfig(vocab_size=V, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=32), dtype="float64")
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 20, (4, 6))
    out = model.forward(ids, np.zeros_like(ids), np.ones_like(ids), train=False)
    model.backward(np.zeros_like(out.last_hidden_state), rng.standard_normal(out.pooler_output.shape))
    rows = np.abs(model.grad_state_dict()["embeddings.word_embeddings.weight"]).sum(1) > 0
    used = np.isin(np.arange(V), ids)
    return "a" if (rows == used).all() else "b" if rows.all() else "c" if not rows.any() else "d"


def _truth_pre_ln_growth():
    """The option nearest (in ratio) the RMS size after 24 random pre-LN layers, as notebook 9 builds them."""
    from minibert import ops as L
    rng = np.random.default_rng(0)
    H, I, A = 64, 256, 2

    def lin(h, n_out):
        return L.linear_forward(h, rng.standard_normal((n_out, h.shape[-1])) / math.sqrt(h.shape[-1]),
                                np.zeros(n_out))[0]

    def ln(h):
        return L.layernorm_forward(h, np.ones(H), np.zeros(H), 1e-12)[0]
    x = ln(rng.standard_normal((1, 16, H)))
    for _ in range(24):
        h = ln(x)
        q, k, v = (L.split_heads(lin(h, H), A) for _ in range(3))
        x = x + lin(L.merge_heads(L.attention_forward(q, k, v, None)[0]), H)
        x = x + lin(L.gelu_forward(lin(ln(x), I))[0], H)
    size = np.sqrt((x ** 2).mean())
    options = {"a": 1.0, "b": 5.0, "c": 24.0, "d": 600.0}
    return min(options, key=lambda o: abs(math.log(size / options[o])))


def _truth_float16_total():
    return float(np.cumsum(np.full(10_000, 1e-4, dtype=np.float16), dtype=np.float16)[-1])


def _truth_ring_bytes():
    N, S = 4, 1000 * np.dtype(np.float64).itemsize
    chunk = S // N
    return [2 * (N - 1) * chunk, (N - 1) * S]      # reduce-scatter and all-gather: N - 1 chunks each


def _truth_t_quantile():
    from scipy import stats
    return [float(stats.t.ppf(1 - 0.01 / 2, n - 1)) for n in (3, 5)]


def _truth_word_rows():
    from .bert_model import minibert_model, small_case
    config, params, batch = small_case()
    model = minibert_model(config, params)
    model.forward(**batch, train=False)
    model.backward()
    return int((np.abs(model.grad_state_dict()["bert.embeddings.word_embeddings.weight"]).sum(1) > 0).sum())


# ------------------------------------------------------------------------------ the questions
TIED = ("the MLM decoder is tied to the word table: its logits are h W^T over the whole vocabulary, so the "
        "softmax sends a gradient to every row of W, whichever tokens the batch holds")
QUESTIONS = {
    "snowman": Question("tokens", _truth_snowman, size=2, mistakes=(
        ([["token", "##ization", "[UNK]"], ["token", "##ization", "[UNK]"]],
         "the basic split cuts a word at whitespace and punctuation only, and the snowman is a symbol "
         "(unicodedata.category 'So'), so 'tokenization\u2603' reaches WordPiece as ONE word; and one position "
         "where no piece matches makes the whole word [UNK]"),
        ([["[UNK]"], ["[UNK]"]], "with a space, the snowman is a word of its own: only that word is unknown"),
        ([["token", "##ization", "##[UNK]"], ["token", "##ization", "[UNK]"]],
         "WordPiece never emits a piece for the unknown part: the whole word becomes [UNK], and nothing else"),
        ([["token", "##ization"], ["token", "##ization"]],
         "nothing is dropped silently: a word WordPiece cannot cut, or a word of its own, becomes [UNK]"))),
    "layernorm_sum": Question("choice", _truth_layernorm_sum, options="abcd", mistakes=(
        ("b", "that is the sum of the gradient that reaches x-hat; the mean subtraction takes it out again"),
        ("c", "that would be true of y = x + b; LayerNorm's output does not change when every input moves by "
              "the same amount"),
        ("d", "ask what happens to y when you add the same number to every x_i of the row"))),
    "unscaled_softmax": Question("choice", _truth_unscaled_softmax, options="abc", mistakes=(
        ("c", "at head size 64 the raw scores have a spread of 8, large but not yet saturating: the largest "
              "weight is near 0.84, not 1; the gradient vanishes only at much larger head sizes"),
        ("a", "the raw scores spread over about +-16 at head size 64; a softmax that peaked passes less"))),
    "masked_count": Question("numbers", _truth_masked_count, tol=0.0, size=3, mistakes=(
        ([2, 11, 20], "Python 3's round sends an exact half to the EVEN neighbour: round(10.5) is 10"),
        ([1, 10, 20], "round, not floor: round(1.5) is 2"),
        ([2, 10, 30], "k is capped at max_predictions_per_seq"),
        ([2, 11, 30], "two rules: round half to even (round(10.5) is 10), and the cap max_predictions_per_seq"),
        ([1, 10, 30], "round(1.5) is 2, and k is capped at max_predictions_per_seq"))),
    "isnext_share": Question("choice", _truth_isnext_share, options="abc", mistakes=(
        ("a", "the coin is fair, but not every chunk can be split: a chunk of ONE sentence always gets a random "
              "B"),
        ("c", "which pairs can never be IsNext? A chunk of one sentence has nothing to split"))),
    "untrained_loss": Question("numbers", _truth_untrained_loss, tol=0.02, size=2, mistakes=(
        ([0.0, 0.0], "an untrained model knows nothing: its loss is that of a guess, not zero"),
        ([2000.0, 2.0], "a cross-entropy is -log p of the right class: the log of the number of classes"),
        ([math.log(2000), 0.0], "the NSP head guesses too: it has 2 classes"),
        ([math.log10(2000), math.log10(2)], "the natural log: cross-entropy is measured in nats"),
        ([math.log2(2000), 1.0], "the natural log: cross-entropy is measured in nats, not bits"),
        ([math.log(30522), math.log(2)], "this model's vocabulary has V = 2,000 tokens, not BERT's 30,522"),
        ([1 / 2000, 0.5], "those are the probabilities of the right class; the loss is -log of them"))),
    "nsp_prior": Question("numbers", _truth_nsp_prior, tol=2e-3, size=2, mistakes=(
        ([0.693, 0.693], "that is a coin flip's loss; this model answers P(NotNext) = p for every pair"),
        ([0.767, 0.623], "the other way round: the prior fits the training pairs best, not the balanced ones"),
        ([0.623, 0.623], "the held-out pairs are balanced: half of them cost -ln p, half -ln(1 - p)"),
        ([0.898, 1.107], "in nats (natural logarithms), as every loss of the course; those are bits"))),
    "standard_errors": Question("number", _truth_standard_errors, tol=0.01, mistakes=(
        (4.019, "the noise of a model that learned nothing, p = 1/2: the standard error is sqrt(0.25 / n)"),
        (120.0, "the standard error is the square root of the variance 0.25 / n"),
        (389.0, "keep both in the same units: 0.126 against 0.032, or 12.6 points against 3.2"))),
    "mixed_bound": Question("number", _truth_mixed_bound, tol=0.01, mistakes=(
        (12.0, "only the products get faster; the rest of the step (a share 1 - f of its time) takes as long"),
        (2.69, "the products do not vanish: they still take f / 12 of the float32 step's time"),
        (1.52, "f is the share of the time in the products, the MFU; 1 - f is the rest"))),
    "attention_share": Question("number", _truth_attention_share, tol=0.06, mistakes=(
        (25.0, "the feed-forward's two matrices, 2 H I per token each, are the largest part of the work"),
        (2.7, "at 512 tokens: T is the sequence length, the attention products grow with it"),
        (5.3, "two products: q k^T and P v, each 2 T H FLOPs per token and layer"),
        (57.0, "the heads share H between them: A heads of size H / A cost what one head of size H would"))),
    "longer_sequences": Question("number", _truth_longer_sequences, tol=0.01, mistakes=(
        (4.0, "the weight matrices' work grows with the tokens, 4 times; the attention products QK^T and PV grow "
              "with the square of the sequence length"),
        (16.0, "only the two attention products grow with T^2; the weight matrices' work grows with T"))),
    "finetune_rows": Question("choice", _truth_finetune_rows, options="abcd", mistakes=(
        ("b", "fine-tuning drops the MLM head: no decoder is tied to the table, only the lookup at the bottom "
              "reads it"),
        ("c", "the lookup reads the rows of the batch's tokens: those rows get the gradient back"))),
    "pre_ln_growth": Question("choice", _truth_pre_ln_growth, options="abcd", mistakes=(
        ("a", "in pre-LN nothing normalises the residual stream: each sub-block ADDS a vector to it"),
        ("c", "the sub-blocks add vectors in nearly independent directions: sizes add like a random walk, not "
              "in a line"),
        ("d", "the sub-blocks add vectors in nearly independent directions: the square of the size grows "
              "linearly"))),
    "float16_total": Question("number", _truth_float16_total, tol=1e-3, mistakes=(
        (1.0, "every partial sum is rounded to float16: once half the spacing of the total exceeds the term, "
              "adding the term changes nothing"),
        (0.125, "between 0.125 and 0.25 the spacing is 2^-13, about 1.2e-4: half of it is below 1e-4, so each "
                "term still moves the total (rounded up to a whole spacing)"),
        (0.5, "at 0.25 the spacing is 2^-12, about 2.4e-4: half of it is above 1e-4"))),
    "ring_bytes": Question("numbers", _truth_ring_bytes, tol=0.0, size=2, mistakes=(
        ([6000, 24000], "the reduce-scatter alone leaves each worker with one summed chunk; the all-gather sends "
                        "as many chunks again"),
        ([8000, 24000], "each of the 2 (N - 1) steps sends ONE chunk of S / N bytes"),
        ([12000, 32000], "worker 0 of the central scheme has its own vector: it receives from N - 1 workers"),
        ([16000, 32000], "2 (N - 1) steps of S / N bytes; the central worker receives from the N - 1 others"),
        ([48000, 24000], "each step of the ring sends ONE chunk of S / N bytes, not the whole vector"))),
    "t_quantile": Question("numbers", _truth_t_quantile, tol=1e-3, size=2, mistakes=(
        ([2.576, 2.576], "that is the normal quantile: with the spread estimated from n seeds, Student's t with "
                         "n - 1 degrees of freedom"),
        ([5.841, 4.032], "n - 1 degrees of freedom: one is spent on the mean"),
        ([4.303, 2.776], "99%, not 95%: the notebook holds each of five flags to 1%"),
        ([6.965, 3.747], "two-sided: 0.5% in each tail, the quantile at 0.995"))),
    "word_rows": Question("number", _truth_word_rows, tol=0.0, mistakes=(
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
