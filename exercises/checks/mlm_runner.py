"""Calling the student's mask_tokens on many sequences, and the sequences it is called on."""
from __future__ import annotations

import numpy as np

from ..calls import call_each
from ..report import Abort, Report
from .common import unpack

V = 1000
PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIAL = (PAD, UNK, CLS, SEP, MASK)


def expected_predictions(n_tokens, n_candidates, p=0.15, cap=20):
    return min(cap, max(1, int(round(n_tokens * p))), n_candidates)


def pair_sequence(rng, n_a, n_b):
    a = rng.integers(len(SPECIAL), V, n_a).tolist()
    b = rng.integers(len(SPECIAL), V, n_b).tolist()
    return [CLS] + a + [SEP] + b + [SEP]


class Masker:
    """The student's mask_tokens, called on many sequences, its results read as int arrays."""

    def __init__(self, r: Report):
        self.r = r

    def each(self, jobs, hint=None):
        """(masked, labels) for each (ids, seed, keyword arguments) of ``jobs``, in order."""
        calls = []
        for ids, seed, kw in jobs:
            kwargs = dict(vocab_size=V, mask_id=MASK, special_ids=list(SPECIAL))
            kwargs.update(kw)
            calls.append(((list(ids), np.random.default_rng(seed)), kwargs))
        for (ids, _, _), res in zip(jobs, call_each(self.r, "mask_tokens", calls, hint=hint)):
            yield self._read(ids, res)

    def one(self, ids, seed, hint=None, **kw):
        return next(self.each([(ids, seed, kw)], hint))

    def _read(self, ids, res):
        r = self.r
        masked, labels = unpack(r, "mask_tokens", res, 2, "masked_ids, labels")
        try:
            masked = [int(t) for t in masked]
            labels = [int(t) for t in labels]
        except (TypeError, ValueError):
            r.fail("masked_ids and labels must be sequences of ints")
            raise Abort
        if len(masked) != len(ids) or len(labels) != len(ids):
            r.fail(f"masked_ids and labels must have len(ids) = {len(ids)} entries, got {len(masked)} and "
                   f"{len(labels)}", "return one label per position: -100 where nothing is predicted")
            raise Abort
        return np.array(masked), np.array(labels)
