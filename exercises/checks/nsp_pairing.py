"""A next-sentence-prediction example, checked by its rules on every example and its statistics over many.

The hints come from the cases of ``exercises/cases/nsp_pairing.py``: each
check names the case whose sign it measured.
"""
from __future__ import annotations

import numpy as np

from ..cases import nsp_pairing as cases
from ..report import Report
from .nsp_runner import Pairer, documents, is_run, parse
from .common import replayer
from .nsp_statistics import check_pairs, paired



def check(r: Report) -> None:
    rng = np.random.default_rng(8)
    docs, owner = documents(rng, [3, 5, 4, 8, 2, 6])
    run = Pairer(r)
    snapshot = [[list(s) for s in d] for d in docs]
    run.one(docs, 1, 2, 0, 64)
    r.expect(docs == snapshot, "the documents are left unchanged", cases.NO_COPY.hint)
    check_pairs(r, run, rng, docs, owner)
    _check_draws(r, run, docs, owner)
    _check_truncation(r, run)
    x = run.one(docs, 3, 2, 77, 64)
    np.random.seed(5)
    y = run.one(docs, 3, 2, 77, 64)
    r.expect(x == y, "the same rng seed gives the same example", "draw every random number from the rng argument")


def _check_draws(r: Report, run: Pairer, docs, owner) -> None:
    """The 50/50 is a draw for every example, not a rule of the indices; a NotNext B is uniform over
    the other documents, and over their sentences."""
    shares = []
    for d, s in ((0, 0), (1, 2), (3, 4), (5, 1)):
        labels = [ex[2] for ex in run.each(docs, [(d, s, 30000 + 997 * d + i, 64) for i in range(200)])]
        shares.append(labels.count(0) / len(labels))
    r.expect(all(0.35 < x < 0.65 for x in shares), "the same A gets IsNext about half the time over different seeds ("
             + ", ".join(f"{x:.2f}" for x in shares) + ")", cases.BY_INDEX.hint)
    seen_docs = np.zeros(len(docs))
    seen_sents = {d: set() for d in range(len(docs))}
    for ids, types, label in run.each(docs, [(0, len(docs[0]) - 1, 9000 + i, 64) for i in range(600)]):
        parsed = parse(ids, types)
        if isinstance(parsed, str) or owner.get(parsed[1][0]) is None:
            continue
        bd, bs = owner[parsed[1][0]]
        seen_docs[bd] += 1
        seen_sents[bd].add(bs)
    others = seen_docs[1:]
    r.expect(others.sum() > 0 and np.all(np.abs(others - others.mean()) < 0.4 * others.mean()),
             "the random document is drawn uniformly from the other documents",
             "draw the document uniformly among all documents but doc_index")
    r.expect(all(len(seen_sents[d]) == len(docs[d]) for d in range(1, len(docs))),
             "any sentence of the random document can be B",
             "draw B's sentence uniformly within the random document, not always its first")


TRUNCATION_REPLAYED = 240      # of the 900 truncated pairs, replayed (every mutant's, recorded for the student copy)


def _check_truncation(r: Report, run: Pairer) -> None:
    long_docs, long_owner = documents(np.random.default_rng(9), [4, 4, 4], lengths=(6, 14))
    long_snapshot = [[list(s) for s in d] for d in long_docs]
    trunc_bad = None

    def popped_empty(exc):
        return cases.POP_SHORTER.hint if isinstance(exc, IndexError) and "empty" in str(exc) else None
    jobs = [(i % 3, i % 4, 20000 + i, max_len) for i in range(300) for max_len in (8, 13, 20)]
    got = []
    for (d, s, _, max_len), (ids, types, label) in zip(jobs, run.each(long_docs, jobs, hint=popped_empty)):
        got.append([*ids, *types, label])
        parsed = parse(ids, types)
        if isinstance(parsed, str):
            trunc_bad = trunc_bad or parsed
            continue
        src = long_owner.get(parsed[1][0])
        full_b = long_docs[src[0]][src[1]] if src else []
        trunc_bad = trunc_bad or _truncation_problem(parsed, long_docs[d][s], full_b, len(ids), max_len)
    # the truncation replayed (the pairs above are too short to be cut), for this line alone: a slip in how
    # many tokens stay is named by the slip that gives the same pairs; which segment loses them, by the
    # hand-written hint (a mutant giving the same pairs may say it in code, not in words)
    truncation = replayer(cases.TABLE, got[:TRUNCATION_REPLAYED], lambda m, k: paired(m, long_docs, jobs[:k]))
    if trunc_bad is not None and trunc_bad != cases.KEEP_ONE.hint:
        trunc_bad = truncation() or trunc_bad
    r.expect(trunc_bad is None, "long pairs are truncated to max_len, from the longer segment", trunc_bad)
    r.expect(long_docs == long_snapshot, "truncation leaves the documents unchanged", cases.NO_COPY.hint)


def _truncation_problem(parsed, full_a, full_b, n, max_len):
    """What is wrong with one truncated pair, or None."""
    a, b = parsed
    if not is_run(a, full_a) or not is_run(b, full_b):
        return "truncation removes tokens from the ends of A or B, nothing else"
    if n != min(len(full_a) + len(full_b) + 3, max_len):
        return cases.NO_TRUNCATION.hint.format(n=n, max_len=max_len)
    cut_a, cut_b = len(a) < len(full_a), len(b) < len(full_b)
    if (cut_a and len(a) < len(b)) or (cut_b and len(b) < len(a) - 1):
        return cases.KEEP_ONE.hint
    return None
