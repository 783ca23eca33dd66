"""A next-sentence-prediction example and its usual mistakes.

A is sentence sent_index of doc_index; with probability 0.5 (when there is a
next sentence) B is the sentence after it and the label 0 (IsNext), else B is
a sentence drawn uniformly from another document drawn uniformly, label 1
(NotNext).  The input is [CLS] A [SEP] B [SEP], cut to max_len by removing
tokens from the longer of A and B (B on a tie), on copies of the sentences.
"""
from __future__ import annotations

from .table import Table


def _other_document(rng, documents, doc_index, rule):
    """The document of a NotNext B: any other one, uniformly (or by one of the usual mistakes)."""
    if rule == "any":
        return int(rng.integers(0, len(documents)))
    if rule == "no_shift":      # one fewer document to draw from, but the shift is forgotten
        return int(rng.integers(0, len(documents) - 1))
    if rule == "reject":        # draw again until it is another document
        other = doc_index
        while other == doc_index:
            other = int(rng.integers(0, len(documents)))
        return other
    other = int(rng.integers(0, len(documents) - 1))
    return other + (other >= doc_index)


def _truncate(rng, a, b, max_len, shorter, either_end):
    """Pop tokens from the longer segment (B on a tie) until [CLS] A [SEP] B [SEP] fits."""
    while len(a) + len(b) > max_len - 3:
        longer, other = (a, b) if len(a) > len(b) else (b, a)
        if shorter == "pop" or (shorter == "keep1" and len(other) > 1):
            longer = other
        if either_end and rng.random() < 0.5:
            longer.pop(0)
        else:
            longer.pop()


def _nsp(flip=False, draw="shifted", truncate=True, is_next_prob=0.5, copy=True, alternate=False, shorter=None,
         either_end=False, last=1):
    """make_nsp_example with one usual mistake, or (draw="reject", either_end) written as google-research/bert does.

    shorter: "pop" pops the shorter segment (until it is empty), "keep1" pops the
    shorter one but never its last token; last: how many sentences at the end of a
    document are taken to have no next one.
    """
    def make_nsp_example(documents, doc_index, sent_index, rng, *, cls_id, sep_id, max_len):
        document = documents[doc_index]
        own = list if copy else (lambda sentence: sentence)
        a = own(document[sent_index])
        # the coin is drawn only when A has a next sentence, as the solution does
        if sent_index + last < len(document) and ((doc_index + sent_index) % 2 == 1 if alternate
                                                  else rng.random() < is_next_prob):
            b, label = own(document[sent_index + 1]), 0
        else:
            doc = documents[_other_document(rng, documents, doc_index, draw)]
            b, label = own(doc[int(rng.integers(0, len(doc)))]), 1
        if truncate:
            _truncate(rng, a, b, max_len, shorter, either_end)
        label = 1 - label if flip else label
        ids = [cls_id] + a + [sep_id] + b + [sep_id]
        return ids, [0] * (len(a) + 2) + [1] * (len(b) + 1), label
    return make_nsp_example


TABLE = Table("nsp_pairing", make_nsp_example=_nsp())


def case(name, hint, **flags):
    return TABLE.case(name, hint, make_nsp_example=_nsp(**flags))


SAME_DOC = ("a NotNext B must come from a DIFFERENT document: leave doc_index out of the draw (draw from "
            "len(documents) - 1 and add 1 when it is >= doc_index)")

FLIPPED = case("labels flipped (1 = IsNext)", "the labels are swapped: B is the sentence that follows A when the "
                                              "label is 0; the convention is 0 = IsNext, 1 = NotNext", flip=True)
ANY_DOC = case("random B from any document", SAME_DOC, draw="any")
NO_SHIFT = case("other document drawn without the shift", SAME_DOC, draw="no_shift")
NO_TRUNCATION = case("no truncation", "the input must have min(len(A) + len(B) + 3, max_len) tokens ([CLS] and two "
                                      "[SEP] take 3, so A and B together keep at most max_len - 3): got {n} with "
                                      "max_len={max_len}", truncate=False)
NEVER_NOT_NEXT = case("the coin never says NotNext",
                      "every A that has a next sentence got IsNext: the coin never came up NotNext. rng.integers(low, "
                      "high) never returns high: rng.integers(0, 2) gives 0 or 1 (or draw rng.random() < 0.5)",
                      is_next_prob=1.0)
SECOND_TO_LAST = case("the second-to-last sentence taken for the last",
                      "A = the second-to-last sentence of a document never got IsNext, though the last sentence "
                      "follows it: A has a next sentence when sent_index + 1 < len(document)", last=2)
RARE_IS_NEXT = case("IsNext too rare", "B is the true next sentence with probability 0.5", is_next_prob=0.15)
NO_COPY = case("truncation shortens the caller's sentences",
               "copy the sentences (list(...)) before truncating them: pop() on documents[d][s] itself shortens the "
               "caller's corpus for every later example", copy=False)
BY_INDEX = case("IsNext decided by the indices", "decide IsNext or NotNext with a random draw from rng for every "
                                                 "example (rng.random() < 0.5), not from doc_index or sent_index",
                alternate=True)
POP_SHORTER = case("truncation pops the shorter segment", "truncation emptied a segment and then popped from it: "
                                                          "remove tokens from the LONGER of A and B (B on a tie), "
                                                          "never from the shorter one", shorter="pop")
KEEP_ONE = case("truncation pops the shorter segment down to one token",
                "remove tokens one at a time from the LONGER of A and B (B on a tie), so neither is cut more than "
                "needed", shorter="keep1")

TABLE.variant("other document by drawing again (google-research/bert)", make_nsp_example=_nsp(draw="reject"))
TABLE.variant("truncation from either end at random (google-research/bert)", make_nsp_example=_nsp(either_end=True))
