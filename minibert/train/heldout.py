"""What a model predicts for the masked tokens of held-out text, beside guessing by word frequency.

A model that ignores the context can do no better than ranking the vocabulary by
how often each token occurs in the training text: its top-1 guess is always the
most frequent token ("the", say), its top-5 the five most frequent.  ``predictions``
ranks the true token of every held-out masked position under the model and under
that frequency ranking; top-k accuracy is the share of positions whose true token
ranks k or better.  ``examples`` shows some of those positions, drawn at random
(by a seed, not chosen), with the text around them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..backend import to_numpy
from .metrics import token_counts


@dataclass
class Prediction:
    """One held-out masked position: where it is, the true token, and both rankings of it."""
    batch: int
    position: int                 # (row, column) flattened: row * seq_len + column
    true_id: int
    shown_id: int                 # what the model saw there: [MASK], a random token or the true one
    model_rank: int               # 1: the model's first choice
    frequency_rank: int           # 1: the most frequent token of the training text
    top_ids: np.ndarray           # the model's five best tokens, best first
    top_probs: np.ndarray         # and its probabilities for them


def frequency_ranks(counts: np.ndarray) -> np.ndarray:
    """``ranks[id]``: 1 for the most frequent token, 2 for the next, ... (ties by id: a fixed order)."""
    order = np.argsort(-counts, kind="stable")
    ranks = np.empty(len(counts), dtype=np.int64)
    ranks[order] = np.arange(1, len(counts) + 1)
    return ranks


def predictions(model, eval_batches, counts: np.ndarray, top: int = 5) -> list[Prediction]:
    """Every masked position of ``eval_batches``, ranked by the model (dropout off) and by ``counts``."""
    by_frequency = frequency_ranks(counts)
    found = []
    for b, batch in enumerate(eval_batches):
        out = model.forward(**batch, train=False)
        logits = to_numpy(out.mlm_logits).astype(np.float64)      # (M, V): the labelled positions only
        targets = to_numpy(out.mlm_targets)
        positions = to_numpy(out.mlm_positions)
        shown = batch["input_ids"].reshape(-1)[positions]
        true_logit = logits[np.arange(len(targets)), targets]
        # rank of the true token: 1 + the tokens the model scores strictly higher
        ranks = 1 + (logits > true_logit[:, None]).sum(axis=1)
        best = np.argsort(-logits, axis=1, kind="stable")[:, :top]
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        for i in range(len(targets)):
            found.append(Prediction(b, int(positions[i]), int(targets[i]), int(shown[i]), int(ranks[i]),
                                    int(by_frequency[targets[i]]), best[i], probs[i, best[i]]))
    model.release()   # nothing here is back-propagated
    return found


def top_k_accuracy(found: list[Prediction], k: int) -> tuple[float, float]:
    """(the model's, the frequency ranking's) share of positions whose true token ranks ``k`` or better."""
    if not found:
        return float("nan"), float("nan")
    model = np.mean([p.model_rank <= k for p in found])
    frequency = np.mean([p.frequency_rank <= k for p in found])
    return float(model), float(frequency)


def examples(found: list[Prediction], eval_batches, tokenizer, n: int = 4, seed: int = 0,
             context: int = 8) -> list[dict]:
    """``n`` positions drawn at random among those the model saw as [MASK] whose true token is a
    whole word; each with the text around it (``context`` tokens each side, within its segment)."""
    def shown(p: Prediction) -> bool:
        ids = eval_batches[p.batch]["input_ids"]
        row, col = divmod(p.position, ids.shape[1])
        labels = eval_batches[p.batch]["mlm_labels"][row]
        # the piece after it: a word goes on in a "##" piece (whose true token is its label if masked)
        after = labels[col + 1] if col + 1 < len(labels) and labels[col + 1] >= 0 else \
            ids[row, col + 1] if col + 1 < ids.shape[1] else tokenizer.pad_id
        return (p.shown_id == tokenizer.mask_id and tokenizer.vocab[p.true_id].isalpha()
                and not tokenizer.vocab[after].startswith("##"))
    candidates = [p for p in found if shown(p)]
    rng = np.random.default_rng(seed)
    picked = sorted(rng.choice(len(candidates), size=min(n, len(candidates)), replace=False))
    return [dict(text=_around(candidates[i], eval_batches, tokenizer, context), prediction=candidates[i],
                 true=tokenizer.vocab[candidates[i].true_id],
                 top=[(tokenizer.vocab[t], float(q)) for t, q in
                      zip(candidates[i].top_ids, candidates[i].top_probs)]) for i in picked]


def _around(p: Prediction, eval_batches, tokenizer, context: int) -> str:
    """The tokens near position ``p`` as the model saw them (other tokens masked or replaced too),
    within its segment, WordPieces joined; ``____`` where the word to guess is."""
    batch = eval_batches[p.batch]
    T = batch["input_ids"].shape[1]
    row, col = divmod(p.position, T)
    ids, segments = batch["input_ids"][row], batch["token_type_ids"][row]
    special = {tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id}
    lo, hi = col, col
    while lo > 0 and col - lo < context and segments[lo - 1] == segments[col] and ids[lo - 1] not in special:
        lo -= 1
    while hi < T - 1 and hi - col < context and segments[hi + 1] == segments[col] and ids[hi + 1] not in special:
        hi += 1
    words = []
    for j in range(lo, hi + 1):
        token = "____" if j == col else tokenizer.vocab[ids[j]]      # the word to guess
        if token.startswith("##") and words:
            words[-1] += token[2:]
        else:
            words.append(token)
    return " ".join(words)


