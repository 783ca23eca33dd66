"""The right answers of the graded questions (questions.py), each worked out when the check runs.

Nothing here is a stored answer: each function computes its question's truth with minibert's own code
(the tokenizer, LayerNorm's backward, softmax, mask_tokens, the pairing, step_flops, the model at its
initialisation) or with NumPy and SciPy, or reads it from a committed run (docs-bert-h64's metrics, the
H200's step times).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]      # the repository: the committed runs some questions are about
H200 = ROOT / "benchmarks/results/h200_step_2026-11-27.json"         # notebook 10b's step times
# the committed run notebooks 06b and 09 read: beside the notebooks, in notebooks/ of the repository or
# of a student copy, or in the folder of an nbgrader assignment (nbgrader_export.py)
RUN = next((p for p in (ROOT / "notebooks/pretrained/docs-bert-h64", ROOT / "pretrained/docs-bert-h64")
            if p.is_dir()), ROOT / "notebooks/pretrained/docs-bert-h64")


def snowman():
    from minibert.data.tokenizer import WordPieceTokenizer
    tok = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "token", "##ization", "to", "##ken"])
    return [tok.tokenize("tokenization\u2603"), tok.tokenize("tokenization \u2603")]


def layernorm_sum():
    """The option whose value equals the sum of minibert's LayerNorm input gradient on random rows."""
    from minibert.ops.layernorm import layernorm_backward, layernorm_forward
    rng = np.random.default_rng(0)
    x, gamma, beta, dy = (rng.standard_normal((5, 8)) * 3 + 1 for _ in range(4))
    dx = layernorm_backward(dy, layernorm_forward(x, gamma[0], beta[0], 1e-12)[1])[0]
    candidates = {"a": np.zeros(5), "b": (gamma[0] * dy).sum(-1), "c": dy.sum(-1)}
    scale = np.abs(dx).max()
    return next((k for k, v in candidates.items() if np.allclose(dx.sum(-1), v, rtol=0, atol=1e-9 * scale)), "d")


def unscaled_softmax():
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


def masked_count():
    from minibert.data.masking import mask_tokens
    rng = np.random.default_rng(0)
    return [len(mask_tokens(["[CLS]"] + ["word"] * (n - 2) + ["[SEP]"], ["word"], rng,
                            masked_lm_prob=0.15, max_predictions_per_seq=20).positions) for n in (10, 70, 200)]


def isnext_share():
    """The band of the IsNext share of minibert's pairing (Google's rule) on documents of 1 to 6 sentences."""
    from minibert.data.instances import create_training_instances
    rng = np.random.default_rng(0)
    docs = [[[f"w{rng.integers(50)}" for _ in range(rng.integers(4, 12))] for _ in range(rng.integers(1, 7))]
            for _ in range(300)]
    share = np.mean([not i.is_random_next for i in create_training_instances(docs, max_seq_length=32, seed=0)])
    return "a" if abs(share - 0.5) < 0.03 else "b" if share < 0.5 else "c"


def untrained_loss():
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


def nsp_prior():
    from minibert.data import build_pretraining_dataset, load_corpus
    from minibert.data.tokenizer import WordPieceTokenizer
    from minibert.train import split_documents
    tok = WordPieceTokenizer.from_vocab_file(RUN / "vocab.txt")
    docs, _ = split_documents(load_corpus("builtin"), 0.1, 0)
    p = build_pretraining_dataset(docs, tok, max_seq_length=32, dupe_factor=2, seed=0).not_next_share()
    return [-(p * math.log(p) + (1 - p) * math.log(1 - p)), -(math.log(p) + math.log(1 - p)) / 2]   # the prior's


def standard_errors():
    path = RUN / "metrics.jsonl"
    last = [r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines()) if r["kind"] == "eval"][-1]
    return (last["nsp_acc"] - 0.5) / math.sqrt(0.25 / last["n_pairs"])      # in standard errors of chance


def _h200_steps():
    """The H200's step table: {precision: {seq_len: [a row per form and preset]}}."""
    return json.loads(H200.read_text(encoding="utf-8"))["step"]


def mixed_bound():
    """Amdahl's law on the H200's float32 base step at 512: its products (its MFU) at the float16 ceiling."""
    h = _h200_steps()
    row = next(r for r in h["float32"]["512"] if r["form"] == "minibert" and r["preset"] == "base")
    ceiling = {p: np.median([r["gemm_peak"] for rows in h[p].values() for r in rows]) for p in h}
    f = row["gflops"] / row["gemm_peak"]
    return float(1 / ((1 - f) + f * ceiling["float32"] / ceiling["mixed"]))


def attention_share():
    import minibert as mb
    from minibert.model.flops import step_flops
    c, B, T = mb.BertConfig.from_preset("base", vocab_size=30522), 32, 512
    n = next(r["n_masked"] for r in _h200_steps()["mixed"]["512"] if r["preset"] == "base")
    return 100 * 3 * c.num_hidden_layers * 2 * 2 * B * T * T * c.hidden_size / step_flops(c, B, T, n)


def longer_sequences():
    import minibert as mb
    from minibert.model.flops import step_flops
    base, B = mb.BertConfig(), 32
    return step_flops(base, B, 512, round(0.15 * B * 512)) / step_flops(base, B, 128, round(0.15 * B * 128))


def finetune_rows():
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


def pre_ln_growth():
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


def float16_total():
    return float(np.cumsum(np.full(10_000, 1e-4, dtype=np.float16), dtype=np.float16)[-1])


def ring_bytes():
    N, S = 4, 1000 * np.dtype(np.float64).itemsize
    chunk = S // N
    return [2 * (N - 1) * chunk, (N - 1) * S]      # reduce-scatter and all-gather: N - 1 chunks each


def t_quantile():
    from scipy import stats
    return [float(stats.t.ppf(1 - 0.01 / 2, n - 1)) for n in (3, 5)]


def word_rows():
    from .bert_model import minibert_model, small_case
    config, params, batch = small_case()
    model = minibert_model(config, params)
    model.forward(**batch, train=False)
    model.backward()
    return int((np.abs(model.grad_state_dict()["bert.embeddings.word_embeddings.weight"]).sum(1) > 0).sum())
