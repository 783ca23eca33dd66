"""A task's examples as model inputs, and the batches of an epoch.

Each example becomes ``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]`` (``WordPieceTokenizer.encode``), cut
to ``max_seq_length`` as google-research/bert's ``_truncate_seq_pair`` cuts: a token at a time from the end
of the longer segment.  A batch is padded to its longest sequence, not to ``max_seq_length``: the
attention mask hides the padding, so the numbers are the same and a batch of short sentences is cheaper.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Features:
    """A split's sequences (lists of token ids, unpadded), their segment ids and their labels."""
    input_ids: list
    token_type_ids: list
    labels: np.ndarray | None
    truncated: int                     # how many examples were cut to fit

    def __len__(self) -> int:
        return len(self.input_ids)


def encode(tokenizer, examples, max_seq_length: int) -> Features:
    """``examples`` (``glue.Examples``) as token ids, each at most ``max_seq_length`` long."""
    ids, types, cut = [], [], 0
    pairs = examples.text_b if examples.text_b is not None else [None] * len(examples.text_a)
    for a, b in zip(examples.text_a, pairs):
        enc = tokenizer.encode(a, b)
        if len(enc["input_ids"]) > max_seq_length:        # tokenized again, to be cut as BERT cuts a pair
            enc, cut = tokenizer.encode(a, b, max_length=max_seq_length), cut + 1
        ids.append(enc["input_ids"])
        types.append(enc["token_type_ids"])
    return Features(ids, types, examples.labels, cut)


def batch(features: Features, rows, pad_id: int) -> dict:
    """The rows ``rows`` of ``features`` as (B, T) arrays, T their longest length, padded with ``pad_id``."""
    T = max(len(features.input_ids[r]) for r in rows)
    B = len(rows)
    input_ids = np.full((B, T), pad_id, dtype=np.int64)
    token_type_ids = np.zeros((B, T), dtype=np.int64)
    attention_mask = np.zeros((B, T), dtype=np.int64)
    for i, r in enumerate(rows):
        n = len(features.input_ids[r])
        input_ids[i, :n] = features.input_ids[r]
        token_type_ids[i, :n] = features.token_type_ids[r]
        attention_mask[i, :n] = 1
    out = {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask}
    if features.labels is not None:
        out["labels"] = features.labels[np.asarray(rows)]
    return out


def epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """The order of an epoch's examples: a permutation fixed by the seed and the epoch alone, so a
    resumed run sees the same batches."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def batches_of(order: np.ndarray, batch_size: int) -> list:
    """``order`` cut into batches of ``batch_size`` rows, the last one shorter (no example is dropped)."""
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
