# slip: the truncation loop runs while len(A) + len(B) >= max_len - 3, so a pair that exactly fits loses a token and every cut pair ends one token short of max_len
# names it: >= max_len - 3 | while & strict | one token too many | exactly fits | pair that fits & cut
"""Exercise: one next-sentence-prediction (NSP) example.

BERT's second pre-training task: given [CLS] A [SEP] B [SEP], predict from
[CLS] whether B is the text that really follows A.

* A is sentence ``sent_index`` of document ``doc_index``.
* With probability 0.5, B is the sentence that follows A in the same document:
  label 0 (IsNext).
* Otherwise B is a random sentence of a random OTHER document (first the
  document, uniformly among all documents except doc_index, then a sentence of
  it, uniformly): label 1 (NotNext).
* When A is the last sentence of its document there is no true next sentence:
  the example is always NotNext.
* The input has at most ``max_len`` tokens.  While A and B together have more
  than max_len - 3 tokens (room for [CLS] and two [SEP]), remove one token
  from the longer of the two (from B on a tie), from its end.  (BERT removes
  from the front or the end at random; the checker accepts either.)
* token_type_ids (segment ids): 0 for [CLS], A and the first [SEP];
  1 for B and the last [SEP].

Label convention (Hugging Face and google-research/bert): 0 = IsNext, 1 = NotNext.

Check your work with:   python -m exercises check nsp_pairing
"""


def make_nsp_example(documents, doc_index, sent_index, rng, *, cls_id, sep_id, max_len):
    """Build one NSP example.

    Args:
        documents: list of documents; a document is a list of sentences; a
            sentence is a non-empty list of int token ids.  (At least two documents.)
        doc_index, sent_index: where A comes from (do not modify documents)
        rng: a numpy.random.Generator; draw all randomness from it
        cls_id, sep_id: the ids of [CLS] and [SEP]
        max_len: the longest input allowed, special tokens included (>= 5)

    Returns:
        input_ids: list of ints, [CLS] A [SEP] B [SEP]
        token_type_ids: list of 0/1, same length
        nsp_label: 0 (IsNext) or 1 (NotNext)

    Hint: to draw a document other than doc_index uniformly, draw
    j = rng.integers(0, len(documents) - 1) and add 1 if j >= doc_index.
    """
    # TODO
    doc = documents[doc_index]
    a = list(doc[sent_index])
    has_next = sent_index + 1 < len(doc)

    # the label first: IsNext only when there is a next sentence and the coin says so
    if has_next and rng.random() < 0.5:
        label = 0
        b = list(doc[sent_index + 1])
    else:
        label = 1
        j = rng.integers(0, len(documents) - 1)
        if j >= doc_index:
            j += 1
        other = documents[j]
        b = list(other[rng.integers(0, len(other))])

    # cut the pair to fit: [CLS] A [SEP] B [SEP]
    while len(a) + len(b) >= max_len - 3:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()

    input_ids = [cls_id] + a + [sep_id] + b + [sep_id]
    token_type_ids = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    return input_ids, token_type_ids, label
