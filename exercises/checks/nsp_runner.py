"""Calling the student's make_nsp_example, reading its examples, and documents that say where a token is from."""
from __future__ import annotations

import numpy as np

from ..calls import call_each
from ..report import Abort, Report
from .common import unpack

CLS_ID, SEP_ID = 1, 2


def documents(rng, sentence_counts, lengths=(2, 9)):
    """Documents whose every token id is unique, so a token tells where it comes from: (docs, owner)."""
    docs, owner, next_id = [], {}, 10
    for d, n_sent in enumerate(sentence_counts):
        doc = []
        for s in range(n_sent):
            n = int(rng.integers(lengths[0], lengths[1] + 1))
            sent = list(range(next_id, next_id + n))
            for t in sent:
                owner[t] = (d, s)
            next_id += n
            doc.append(sent)
        docs.append(doc)
    return docs, owner


def is_run(part, whole):
    """Is ``part`` a contiguous run of ``whole``?"""
    n = len(part)
    return any(whole[i:i + n] == part for i in range(len(whole) - n + 1))


def parse(ids, types):
    """(A, B) or a description of what is wrong with the layout."""
    if len(types) != len(ids):
        return "token_type_ids must have one entry per token"
    seps = [i for i, t in enumerate(ids) if t == SEP_ID]
    if not ids or ids[0] != CLS_ID or len(seps) != 2 or seps[-1] != len(ids) - 1:
        return "the layout is [CLS] A [SEP] B [SEP]: [CLS] first, exactly two [SEP], the last at the end"
    first = seps[0]
    if types != [0] * (first + 1) + [1] * (len(ids) - first - 1):
        return "token_type_ids are 0 for [CLS] A [SEP] and 1 for B [SEP]"
    a, b = ids[1:first], ids[first + 1:-1]
    if not a or not b:
        return "A and B must both be non-empty"
    return a, b


class Pairer:
    """The student's make_nsp_example, its results read as (ids, types, label) of ints."""

    def __init__(self, r: Report):
        self.r = r

    def each(self, docs, jobs, hint=None):
        """(ids, types, label) for each (d, s, seed, max_len) of ``jobs``, in order."""
        calls = [((docs, d, s, np.random.default_rng(seed)), dict(cls_id=CLS_ID, sep_id=SEP_ID, max_len=max_len))
                 for d, s, seed, max_len in jobs]
        for res in call_each(self.r, "make_nsp_example", calls, hint=hint):
            ids, types, label = unpack(self.r, "make_nsp_example", res, 3, "input_ids, token_type_ids, nsp_label")
            try:
                ids, types, label = [int(t) for t in ids], [int(t) for t in types], int(label)
            except (TypeError, ValueError):
                self.r.fail("input_ids and token_type_ids must be lists of ints and nsp_label an int")
                raise Abort
            yield ids, types, label

    def one(self, docs, d, s, seed, max_len, hint=None):
        return next(self.each(docs, [(d, s, seed, max_len)], hint))
