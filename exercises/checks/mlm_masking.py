"""BERT's masked-LM corruption, checked by its rules on every sequence and by its statistics over many.

The hints come from the cases of ``exercises/cases/mlm_masking.py``: a random
masking cannot be matched value for value, so each check names the case whose
sign it measured (the count of predictions, the 80/10/10 shares...).
"""
from __future__ import annotations

import numpy as np

from ..calls import call
from ..cases import mlm_masking as cases
from ..harness import named, touch
from ..report import Report
from .mlm_runner import CLS, MASK, PAD, SEP, SPECIAL, V, Masker, pair_sequence
from .mlm_statistics import check_statistics

def check(r: Report) -> None:
    rng = np.random.default_rng(7)
    run = Masker(r)
    ids = pair_sequence(rng, 18, 19)
    before = list(ids)
    call(r, "mask_tokens", ids, np.random.default_rng(0), vocab_size=V, mask_id=MASK, special_ids=list(SPECIAL))
    r.expect(ids == before, "the input list is left unchanged", cases.IN_PLACE.hint)
    run.one(ids, 0)
    r.ok("returns masked_ids and labels, one entry per position")
    check_statistics(r, run, rng)
    _check_counts(r, run, rng)
    _check_arguments(r, run, rng)


def _check_counts(r: Report, run: Masker, rng) -> None:
    """The cap, the minimum of one prediction, fewer candidates than n."""
    long_ids = pair_sequence(rng, 100, 97)
    for cap in (20, 5):
        _, labels = run.one(long_ids, 11, max_predictions=cap)
        got = int((labels != -100).sum())
        # each case's and mutant's labels on this call (the same draws as the student's only if it draws alike)
        known = cases.TABLE.known(lambda m, cap=cap: m.mask_tokens(
            list(long_ids), np.random.default_rng(11), vocab_size=V, mask_id=MASK, special_ids=list(SPECIAL),
            max_predictions=cap)[1])
        if got == cap:
            touch(known)
        r.expect(got == cap, f"a 200-token sequence gets exactly max_predictions={cap} predictions",
                 None if got == cap else cases.NO_CAP.hint if got > cap else named(labels, known) or
                 f"{got} predictions: with 197 candidates there is room for all {cap}, so choose exactly "
                 f"max_predictions={cap} different positions (replace=False)")
    _, labels = run.one([CLS, 77, SEP], 3)
    r.expect(int((labels != -100).sum()) == 1, "a 3-token sequence still gets 1 prediction",
             "n = max(1, round(...)): at least one prediction")
    few = cases.FEW_CANDIDATES.hint
    masked, labels = run.one([CLS, SEP], 4, hint=few)
    r.expect(masked.tolist() == [CLS, SEP] and (labels == -100).all(),
             "[CLS] [SEP] alone: nothing to predict, nothing changed", few)
    padded = [CLS, 77, SEP] + [PAD] * 10         # n = round(13 * 0.15) = 2, one candidate
    _, labels = run.one(padded, 5, hint=few)
    r.expect(labels.tolist() == [-100, 77] + [-100] * 11,
             "[CLS] x [SEP] + 10 [PAD]: the one candidate is predicted, no [PAD]", few)


def _check_arguments(r: Report, run: Masker, rng) -> None:
    """Another mlm_probability; special ids that are not the smallest ids; rng alone for randomness."""
    ids = pair_sequence(rng, 18, 19)
    _, labels = run.one(ids, 6, mlm_probability=0.3)
    r.expect(int((labels != -100).sum()) == 12, "mlm_probability=0.3 on 40 tokens: 12 predictions",
             cases.FIXED_P.hint)
    special = [0, 100, 101, 102, 103]                 # BERT's own: [PAD] 0, [UNK] 100, ..., [MASK] 103
    ordinary = np.array([t for t in range(110) if t not in special])
    wrong = 0
    bert_ids = [[101] + rng.choice(ordinary, 18).tolist() + [102] + rng.choice(ordinary, 19).tolist() + [102]
                for _ in range(400)]
    kw = dict(vocab_size=110, mask_id=103, special_ids=special)
    for seq, (masked, labels) in zip(bert_ids, run.each([(s, 7000 + i, kw) for i, s in enumerate(bert_ids)])):
        chosen = labels != -100
        new_ids, old_ids = masked[chosen], np.array(seq)[chosen]
        wrong += int(np.isin(new_ids[(new_ids != old_ids) & (new_ids != 103)], special).any()
                     or np.isin(old_ids, special).any())
    r.expect(wrong == 0, "with BERT's special ids (0, 100-103) no special token is chosen or drawn",
             cases.SMALLEST_SPECIALS.hint)
    a = run.one(ids, 123)
    np.random.seed(1)
    b = run.one(ids, 123)
    r.expect(all(np.array_equal(x, y) for x, y in zip(a, b)), "the same rng seed gives the same masking",
             "draw every random number from the rng argument (not np.random.* or the random module)")
