"""Many next-sentence examples, none truncated: the layout, A, B and the label of every one, and the
share of IsNext over all."""
from __future__ import annotations

import numpy as np

from ..cases import nsp_pairing as cases
from ..report import Report
from .common import replay
from .nsp_runner import CLS_ID, SEP_ID, Pairer, parse

N_PAIRS = 1500


class Problems:
    """How many examples got each thing wrong, and the hint of the first that did."""

    def __init__(self):
        self.count: dict[str, int] = {}
        self.hint: dict[str, str] = {}
        self.n_with_next = self.n_is_next = 0
        self.n_last = self.n_last_not_next = 0
        self.n_second_last = self.n_second_last_is_next = 0
        self.n_own_next = self.n_own_other = 0      # NotNext examples whose B comes from A's own document

    def add(self, key, hint, n=1):
        self.count[key] = self.count.get(key, 0) + n
        self.hint.setdefault(key, hint)

    def example(self, docs, owner, d, s, ids, types, label) -> None:
        parsed = parse(ids, types)
        if isinstance(parsed, str):
            return self.add("layout", parsed)
        a, b = parsed
        if label not in (0, 1):
            return self.add("label", "nsp_label is 0 (IsNext) or 1 (NotNext)")
        if a != docs[d][s]:
            self.add("A", "A is the whole sentence documents[doc_index][sent_index] (it fits: no truncation)")
        src = owner.get(b[0])
        if src is None or b != docs[src[0]][src[1]]:
            return self.add("B", "B is one whole sentence of a document (it fits: no truncation)")
        true_next = src == (d, s + 1)
        if s == len(docs[d]) - 1:
            self.n_last += 1
            self.n_last_not_next += label == 1
        else:
            self.n_with_next += 1
            self.n_is_next += label == 0
        if s == len(docs[d]) - 2:
            self.n_second_last += 1
            self.n_second_last_is_next += label == 0
        if label == 0 and not true_next:
            self.add("flip", cases.FLIPPED.hint if src[0] != d else
                     "IsNext: B is the sentence right after A (sent_index + 1)")
        if label == 1 and src[0] == d:
            self.n_own_next += true_next
            self.n_own_other += not true_next

    def share_hint(self) -> str:
        """What the share of IsNext says: never NotNext, never IsNext after the second-to-last sentence..."""
        if self.n_is_next == self.n_with_next:
            return cases.NEVER_NOT_NEXT.hint
        others = (self.n_is_next - self.n_second_last_is_next) / max(self.n_with_next - self.n_second_last, 1)
        if self.n_second_last >= 20 and not self.n_second_last_is_next and abs(others - 0.5) < 0.05:
            return cases.SECOND_TO_LAST.hint
        return cases.RARE_IS_NEXT.hint

    def own_document(self) -> None:
        """A NotNext B from A's own document: if some are other sentences than the next one, the random
        document can be A's own (and now and then its draw lands on the next sentence: the same
        mistake, not a label convention).  If every one is the next sentence, the labels are swapped."""
        if self.n_own_other:
            self.count["same_doc"] = self.n_own_other + self.n_own_next
            self.hint["same_doc"] = cases.SAME_DOC
        elif self.n_own_next:
            self.add("flip", cases.FLIPPED.hint, self.n_own_next)


def paired(module, docs, jobs):
    """``module``'s make_nsp_example on each (d, s, seed, max_len): ids, types and label, for each call.
    Each call gets its own copy of the documents: a slip that pops from them in place must not change
    the check's."""
    out = []
    for d, s, seed, max_len in jobs:
        own = [[list(sentence) for sentence in doc] for doc in docs]
        ids, types, label = module.make_nsp_example(own, d, s, np.random.default_rng(seed), cls_id=CLS_ID,
                                                    sep_id=SEP_ID, max_len=max_len)
        out.append([*ids, *types, label])
    return out


def check_pairs(r: Report, run: Pairer, rng, docs, owner) -> None:
    jobs = []
    for i in range(N_PAIRS):
        d = int(rng.integers(len(docs)))
        jobs.append((d, int(rng.integers(len(docs[d]))), 100 + i, 64))
    problems = Problems()
    got = []
    for (d, s, _, _), (ids, types, label) in zip(jobs, run.each(docs, jobs)):
        problems.example(docs, owner, d, s, ids, types, label)
        got.append([*ids, *types, label])
    replay(r, cases.TABLE, got, lambda m, k: paired(m, docs, jobs[:k]))
    problems.own_document()
    # the layout and the labels first: when they are wrong, nothing after them can be read
    for key, what, verdict in [("layout", "[CLS] A [SEP] B [SEP] layout and token_type_ids", r.require),
                               ("label", "labels are 0 or 1", r.require),
                               ("A", "A is sentence sent_index of doc_index", r.expect),
                               ("B", "B is a whole sentence", r.expect),
                               ("same_doc", "a NotNext B comes from another document", r.expect),
                               ("flip", "label 0 exactly when B is the true next sentence", r.expect)]:
        n_bad = problems.count.get(key, 0)
        verdict(n_bad == 0, what + (f" (wrong in {n_bad} of {N_PAIRS})" if n_bad else ""), problems.hint.get(key))
    if problems.n_with_next:
        share = problems.n_is_next / problems.n_with_next
        r.expect(abs(share - 0.5) < 0.05, f"IsNext in {share:.3f} of the examples that have a next sentence "
                                          f"(BERT: 0.5)", problems.share_hint())
    if problems.n_last:
        r.expect(problems.n_last_not_next == problems.n_last,
                 "A = the last sentence of a document always gives NotNext",
                 "when sent_index is the last sentence there is no true next one: make it NotNext")
