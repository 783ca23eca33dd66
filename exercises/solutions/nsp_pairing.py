"""Solution: one next-sentence-prediction example."""


def make_nsp_example(documents, doc_index, sent_index, rng, *, cls_id, sep_id, max_len):
    document = documents[doc_index]
    tokens_a = list(document[sent_index])
    has_next = sent_index + 1 < len(document)
    if has_next and rng.random() < 0.5:
        tokens_b = list(document[sent_index + 1])
        label = 0                                            # IsNext
    else:
        other = int(rng.integers(0, len(documents) - 1))
        if other >= doc_index:                               # any document but this one
            other += 1
        random_doc = documents[other]
        tokens_b = list(random_doc[int(rng.integers(0, len(random_doc)))])
        label = 1                                            # NotNext

    while len(tokens_a) + len(tokens_b) > max_len - 3:       # room for [CLS] [SEP] [SEP]
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        longer.pop()

    input_ids = [cls_id] + tokens_a + [sep_id] + tokens_b + [sep_id]
    token_type_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
    return input_ids, token_type_ids, label
