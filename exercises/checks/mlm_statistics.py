"""The masked-LM rules over many sequences: on every one (labels, specials, the count), and in their
statistics (the 80/10/10 shares, one draw per position, uniform choices)."""
from __future__ import annotations

import numpy as np

from ..cases import mlm_masking as cases
from ..report import Report
from .common import replay
from .mlm_runner import MASK, PAD, SEP, CLS, SPECIAL, UNK, V, Masker, expected_predictions, pair_sequence

N_SEQ = 600
# (21 tokens: round gives 3 predictions, ceil 4; 12 tokens: round 2, floor 1)
SMALL_V = 40       # the vocabulary of the sequence run under many seeds
LENGTHS = [(4, 5), (8, 10), (18, 19), (30, 31), (48, 49), (60, 61)]


class Tally:
    """What the student's masking did over many sequences, counted."""

    def __init__(self):
        self.bad = {k: 0 for k in ("label", "unchosen", "special", "count", "value")}
        self.n_more = 0                   # sequences with more predictions than n
        self.counts_by_len: dict[int, set] = {}
        self.fates = {"mask": 0, "random": 0, "keep": 0}
        self.randoms = []
        self.n_many = self.n_mixed = 0    # sequences with 5+ predictions; those whose fates differ
        self.n_two_random = self.n_same_random = 0
        self.n_all_labelled = 0           # sequences where every position has a label
        # where the corruption and the labels disagree: changed positions without a label, by what they
        # show, and labelled positions that do not show [MASK]
        self.unlabelled_changed = {"mask": 0, "other": 0}
        self.labelled = {"mask": 0, "other": 0}

    def add(self, ids, masked, labels) -> None:
        chosen = labels != -100
        self.n_all_labelled += int(chosen.all())
        special = np.isin(ids, SPECIAL)
        self.bad["label"] += int((labels[chosen] != ids[chosen]).any())
        self.bad["unchosen"] += int((masked[~chosen] != ids[~chosen]).any())
        changed = ~chosen & (masked != ids)
        self.unlabelled_changed["mask"] += int((changed & (masked == MASK)).sum())
        self.unlabelled_changed["other"] += int((changed & (masked != MASK)).sum())
        self.labelled["mask"] += int((chosen & (masked == MASK)).sum())
        self.labelled["other"] += int((chosen & (masked != MASK)).sum())
        self.bad["special"] += int((chosen & special).any())
        n_expected = expected_predictions(len(ids), int((~special).sum()))
        self.bad["count"] += int(chosen.sum() != n_expected)
        self.n_more += int(chosen.sum() > n_expected)
        self.counts_by_len.setdefault(len(ids), set()).add(int(chosen.sum()))
        new, orig = masked[chosen], ids[chosen]
        is_mask, is_keep = new == MASK, new == orig
        is_rand = ~is_mask & ~is_keep
        self.bad["value"] += int((np.isin(new[is_rand], SPECIAL) | (new[is_rand] < 0) | (new[is_rand] >= V)).any())
        for fate, which in (("mask", is_mask), ("keep", is_keep), ("random", is_rand)):
            self.fates[fate] += int(which.sum())
        self.randoms.extend(new[is_rand].tolist())
        if chosen.sum() >= 5:
            self.n_many += 1
            self.n_mixed += int(len({bool(a) for a in is_mask}) > 1 or len({bool(a) for a in is_keep}) > 1)
        if is_rand.sum() >= 2:
            self.n_two_random += 1
            self.n_same_random += int(len(set(new[is_rand].tolist())) == 1)

    def unlabelled_hint(self) -> str:
        """Locate the positions changed without a label: what they show says which step lost the label."""
        changed, labelled = self.unlabelled_changed, self.labelled
        if changed["other"] and not changed["mask"] and not labelled["other"]:
            return (f"{changed['other']} positions were given a random token but the label -100, and "
                    "every labelled position shows [MASK]: the label goes on EVERY chosen position, whatever it "
                    "shows ([MASK], a random token, or its own token), not only where [MASK] went in")
        if changed["mask"] and not changed["other"]:
            return (f"{changed['mask']} positions show [MASK] but have the label -100: set labels[pos] = ids[pos] "
                    "at every position you corrupt")
        return "only the chosen positions are corrupted; every position whose label is -100 keeps its id"

    @property
    def all_mask(self) -> bool:
        return self.fates["mask"] > 0.95 * max(sum(self.fates.values()), 1)

    def count_hint(self) -> str:
        """Which case's count of predictions the counts per length show."""
        counts = self.counts_by_len.values()
        if all(c == {n} for n, c in self.counts_by_len.items()):
            return cases.LABEL_ALL.hint               # every position labelled: the count is the length
        if any(len(c) > 1 for c in counts):           # never more than n, sometimes fewer: drawn twice
            return cases.WITH_REPLACEMENT.hint if not self.n_more else cases.COIN_FLIP.hint
        if max(max(c) for c in counts) > 20:
            return cases.NO_CAP.hint
        return cases.CEIL.hint


def _sequences(rng):
    out = []
    for i in range(N_SEQ):
        na, nb = LENGTHS[i % len(LENGTHS)]
        ids = np.array(pair_sequence(rng, na, nb))
        if i % 4 == 3:            # [UNK] and [MASK] inside, [PAD] after: special ids, never chosen
            ids[rng.integers(1, na)] = UNK
            ids[na + 2] = MASK
            ids = np.concatenate([ids, np.full(int(rng.integers(1, 6)), PAD)])
        out.append(ids)
    return out


def check_statistics(r: Report, run: Masker, rng) -> None:
    sequences = _sequences(rng)
    tally = Tally()
    jobs = [(s.tolist(), 1000 + i) for i, s in enumerate(sequences)]
    got = []
    for ids, (masked, labels) in zip(sequences, run.each([(s, seed, {}) for s, seed in jobs])):
        tally.add(ids, masked, labels)
        got.append(np.concatenate([masked, labels]))
    # one sequence under 400 seeds: how often each position is chosen, and what it shows, whatever the draws
    # (a small vocabulary: the slips are run on these calls too)
    one = [CLS] + rng.integers(len(SPECIAL), SMALL_V, 18).tolist() + [SEP] + \
        rng.integers(len(SPECIAL), SMALL_V, 19).tolist() + [SEP]
    small = {"vocab_size": SMALL_V}
    spread_jobs = [(one, 5000 + i) for i in range(400)]
    spread = [np.concatenate(res) for res in run.each([(s, seed, small) for s, seed in spread_jobs])]
    replay(r, cases.TABLE, got, lambda m, k: _masked(m, jobs[:k]),
           many=(spread, lambda m, k: _masked(m, spread_jobs[:k], SMALL_V)))
    _rules(r, tally)
    _fates(r, tally)
    _uniform(r, one, spread, tally)
    _original_included(r, run, rng)


def _masked(module, jobs, vocab_size=V):
    """``module``'s mask_tokens on each (ids, seed) with the check's arguments: masked then labels,
    for each call."""
    out = []
    for ids, seed in jobs:
        masked, labels = module.mask_tokens(list(ids), np.random.default_rng(seed), vocab_size=vocab_size,
                                            mask_id=MASK, special_ids=list(SPECIAL))
        out.append(np.concatenate([np.asarray(masked, dtype=np.float64), np.asarray(labels, dtype=np.float64)]))
    return out


def _rules(r: Report, tally: Tally) -> None:
    bad = tally.bad
    r.expect(bad["label"] == 0, "labels hold the ORIGINAL id at predicted positions",
             "the label is the token that was there before masking (ids[pos]), not [MASK]")
    r.expect(bad["unchosen"] == 0, "positions not predicted are left unchanged", tally.unlabelled_hint())
    r.expect(bad["special"] == 0, "[CLS] and [SEP] are never chosen",
             cases.LABEL_ALL.hint if tally.n_all_labelled == N_SEQ else cases.SPECIALS.hint)
    if bad["count"]:
        r.fail(f"the number of predicted positions is wrong in {bad['count']} of {N_SEQ} sequences",
               tally.count_hint())
    else:
        r.ok("round(15% of the tokens) chosen in every sequence")
    r.expect(bad["value"] == 0, "random replacements are ordinary ids in [0, vocab_size)",
             "draw random replacements from range(vocab_size) without special_ids")


def _fates(r: Report, tally: Tally) -> None:
    """Each chosen position's own 80/10/10 draw, and its own random token."""
    # 5+ predictions all with the same fate: 0.8^5 = 33% at most if each position draws its own
    r.expect(tally.n_many and tally.n_mixed >= 0.5 * tally.n_many,
             f"each predicted position draws its own fate ({tally.n_mixed} of {tally.n_many} sequences with 5+ "
             f"predictions mix [MASK], random and unchanged)",
             cases.ALL_MASK.hint if tally.all_mask else cases.ONE_FATE.hint)
    r.expect(tally.n_two_random == 0 or tally.n_same_random <= 0.2 * tally.n_two_random,
             f"each random replacement is a fresh draw ({tally.n_same_random} of {tally.n_two_random} sequences "
             f"with 2+ random replacements used one token for all)", cases.ONE_TOKEN.hint)
    total = sum(tally.fates.values())
    if not total:
        return
    hint = (cases.ALL_MASK.hint if tally.all_mask else
            "each chosen position becomes [MASK] with probability 0.8, a random token with 0.1 and stays unchanged "
            "with 0.1")
    for what, fate, t, tol in (("[MASK]", "mask", 0.8, 0.025), ("random", "random", 0.1, 0.02),
                               ("unchanged", "keep", 0.1, 0.02)):
        share = tally.fates[fate] / total
        r.expect(abs(share - t) < tol, f"{what:>9s}: {share:.3f} of the predicted positions (BERT: {t:.1f})", hint)


def _uniform(r: Report, ids, spread, tally: Tally) -> None:
    """Uniform choice of positions (``spread``: masked then labels, on ``ids`` under 400 seeds); random
    replacements spread over the vocabulary."""
    hits = np.zeros(len(ids))
    for res in spread:
        hits += res[len(ids):] != -100
    cand = hits[~np.isin(ids, SPECIAL)]
    # chi-square test of "every candidate equally likely", failing only at p < 1e-6
    from scipy.special import chdtri          # chdtri(df, p): the chi-square quantile of 1 - p
    stat = float(((cand - cand.mean()) ** 2 / max(cand.mean(), 1e-12)).sum())
    r.expect(cand.sum() > 0 and stat < chdtri(len(cand) - 1, 1e-6),
             "every candidate position is chosen about equally often",
             "choose the positions uniformly at random, e.g. rng.choice(candidates, n, replace=False)")
    n_distinct = len(set(tally.randoms))
    r.expect(n_distinct >= 100, f"random replacements spread over the vocabulary ({n_distinct} distinct ids)",
             "a random replacement is drawn uniformly from the ordinary ids, anew for each position")


def _original_included(r: Report, run: Masker, rng) -> None:
    """A random replacement may be the original token itself, as in BERT (its draw is uniform over all
    ordinary ids).  With only two ordinary ids, half the random draws give the original back: a chosen
    position keeps its token 0.1 + 0.1/2 = 15% of the time, not 10%."""
    same = total = 0
    small = [[CLS] + rng.integers(5, 7, 19).tolist() + [SEP] + rng.integers(5, 7, 18).tolist() + [SEP]
             for _ in range(600)]
    for ids, (masked, labels) in zip(small, run.each([(s, 9000 + i, {"vocab_size": 7}) for i, s in enumerate(small)])):
        chosen = labels != -100
        same += int((masked[chosen] == np.array(ids)[chosen]).sum())
        total += int(chosen.sum())
    kept = same / max(total, 1)
    r.expect(abs(kept - 0.15) < 0.025,
             f"with 2 ordinary ids, {kept:.3f} of the predicted positions keep their token (BERT: 0.15)",
             cases.AVOIDS_ORIGINAL.hint if kept < 0.125 else
             "each chosen position becomes [MASK] with probability 0.8, a random token with 0.1 and stays unchanged "
             "with 0.1")
