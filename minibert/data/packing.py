"""Masked language modelling alone: whole sentences packed into one segment, no sentence pairs.

RoBERTa (Liu et al., 2019) dropped next sentence prediction and, with it, the
``[CLS] A [SEP] B [SEP]`` pairs.  Its "full sentences" inputs are sentences
taken in their order, as many whole ones as fit in the sequence, running on
into the next document when one ends (with a separator between the two):

    [CLS] s1 s2 s3 [SEP] t1 t2 [SEP]            (s: one document's sentences, t: the next one's)

One segment, so every ``token_type_id`` is 0, and no label but the masked
tokens.  Compared with NSP pairs, a sequence is nearly always full (a pair
ends where its B segment does), and the model reads one stretch of text
instead of two halves of which one may be unrelated.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..checks import check_count
from .instances import check_max_seq_length
from .memory_budget import check_instances_fit
from .vocab import CLS, SEP

__all__ = ["PackedInstance", "create_packed_instances"]


@dataclass
class PackedInstance:
    """One MLM-only input before masking: ``[CLS] body [SEP]``, a single segment.

    ``body`` holds whole sentences (a ``[SEP]`` between two documents); it has no NSP label.
    """

    body: list[str]

    @property
    def tokens(self) -> list[str]:
        return [CLS, *self.body, SEP]

    @property
    def segment_ids(self) -> list[int]:
        return [0] * (len(self.body) + 2)

    def __len__(self) -> int:
        return len(self.body) + 2

    def __str__(self) -> str:
        return " ".join(self.tokens)


def create_packed_instances(documents: Sequence[Sequence[list[str]]], max_seq_length: int = 128,
                            dupe_factor: int = 1, seed: int | np.random.Generator = 0) -> list[PackedInstance]:
    """The "full sentences" inputs of a tokenized corpus, shuffled.

    Args:
        documents: ``documents[d][s]`` is the token list of sentence ``s`` of document ``d``
            (empty sentences and documents are dropped).
        max_seq_length: the longest input, ``[CLS]`` and the final ``[SEP]`` included (at least 5,
            as for NSP pairs).
        dupe_factor: how many times the corpus is packed, each time with the documents in another
            order, so that the cuts between sequences fall elsewhere.
        seed: an int seed, or a ``numpy.random.Generator`` to draw from.
    """
    check_max_seq_length(max_seq_length)
    check_count("dupe_factor", dupe_factor, 1)
    if not isinstance(seed, np.random.Generator):
        check_count("seed", seed)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    docs = [d for d in ([s for s in doc if len(s) > 0] for doc in documents) if d]
    if not docs:
        raise ValueError("the corpus has no non-empty document: there is no text to pack into sequences")
    check_instances_fit(sum(len(s) for d in docs for s in d), dupe_factor)
    instances: list[PackedInstance] = []
    for _ in range(dupe_factor):
        instances.extend(_pack([docs[j] for j in rng.permutation(len(docs))], max_seq_length - 2))
    return [instances[j] for j in rng.permutation(len(instances))]


def _pack(docs, room: int) -> list[PackedInstance]:
    """Sentences in order, greedily: a sentence that does not fit in what is left starts the next
    sequence. A sentence longer than a whole sequence is cut to it (its end dropped)."""
    packed, body = [], []
    for doc in docs:
        for i, sentence in enumerate(doc):
            piece = list(sentence[:room])
            # the first sentence of a document that follows another in the same sequence: a [SEP] first
            joint = [SEP] if i == 0 and body else []
            if len(body) + len(joint) + len(piece) > room:
                packed.append(PackedInstance(body))
                body, joint = [], []
            body += joint + piece
    if body:
        packed.append(PackedInstance(body))
    return packed
