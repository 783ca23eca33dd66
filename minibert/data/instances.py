"""Next sentence prediction: a tokenized corpus cut into ``[CLS] A [SEP] B [SEP]`` instances.

A is a run of consecutive sentences of a document and B is either the text that
really follows A (label 0, *IsNext*) or text from another document (label 1,
*NotNext*), as google-research/bert's ``create_pretraining_data.py`` cuts them.
See :func:`create_instances_from_document`.
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..checks import check_count, check_generator, check_probability, is_int
from .memory_budget import check_instances_fit
from .vocab import CLS, SEP

__all__ = ["TrainingInstance", "create_training_instances", "create_instances_from_document",
           "truncate_seq_pair", "check_max_seq_length", "IS_NEXT", "NOT_NEXT"]

IS_NEXT, NOT_NEXT = 0, 1     # NSP labels

# Real sentences have tens of tokens; a "sentence" of thousands is text without line breaks.
LONG_SENTENCE_TOKENS = 1000


@dataclass
class TrainingInstance:
    """One NSP example before masking: ``[CLS] tokens_a [SEP] tokens_b [SEP]``.

    Attributes:
        tokens_a, tokens_b: WordPiece tokens of segments A and B (each non-empty).
        is_random_next: True when B comes from another document (NSP label 1, NotNext).
        documents: indices (in the shuffled document list) of the documents A and B come from.
    """

    tokens_a: list[str]
    tokens_b: list[str]
    is_random_next: bool
    documents: tuple[int, int] = field(default=(-1, -1), repr=False)

    @property
    def tokens(self) -> list[str]:
        """The full input sequence, special tokens included."""
        return [CLS, *self.tokens_a, SEP, *self.tokens_b, SEP]

    @property
    def segment_ids(self) -> list[int]:
        """0 for ``[CLS]``, A and the first ``[SEP]``; 1 for B and the last ``[SEP]``."""
        return [0] * (len(self.tokens_a) + 2) + [1] * (len(self.tokens_b) + 1)

    @property
    def nsp_label(self) -> int:
        return NOT_NEXT if self.is_random_next else IS_NEXT

    def __len__(self) -> int:
        return len(self.tokens_a) + len(self.tokens_b) + 3

    def __str__(self) -> str:
        label = "NotNext" if self.is_random_next else "IsNext"
        return f"{label}: {' '.join(self.tokens)}"


def check_max_seq_length(max_seq_length: int) -> None:
    if not isinstance(max_seq_length, (int, np.integer)) or max_seq_length < 5:
        raise ValueError(
            f"max_seq_length={max_seq_length!r} is too small: [CLS] A [SEP] B [SEP] needs 3 special "
            "tokens and at least one token each for A and B, so max_seq_length must be at least 5 "
            "(BERT uses 128, then 512).")


def truncate_seq_pair(tokens_a: list[str], tokens_b: list[str], max_num_tokens: int,
                      rng: np.random.Generator) -> None:
    """Shorten A and B in place until together they have at most ``max_num_tokens`` tokens.

    Each step removes one token from the longer segment (B on a tie), from its front
    or its back with equal probability: always cutting the end would teach the model
    that segments never start mid-sentence.

    The result and the random draws (one ``rng.random()`` per removed token) are those
    of doing it step by step, but the work is linear in the length: which segment loses
    a token at each step depends only on the lengths, so the steps are counted first
    and each segment is then cut once at each end.
    """
    check_count("max_num_tokens", max_num_tokens)
    excess = len(tokens_a) + len(tokens_b) - max_num_tokens
    if excess <= 0:
        return
    from_front = rng.random(excess) < 0.5
    from_a = _steps_that_cut_a(len(tokens_a), len(tokens_b), excess)
    for tokens, mine in ((tokens_a, from_a), (tokens_b, ~from_a)):
        front = int(np.count_nonzero(from_front & mine))
        back = int(np.count_nonzero(mine)) - front
        del tokens[len(tokens) - back:]
        del tokens[:front]


def _steps_that_cut_a(len_a: int, len_b: int, steps: int) -> np.ndarray:
    """For each truncation step, whether it shortens A (True) or B (False).

    The longer segment loses a token (B on a tie). So the first ``|len_a - len_b|``
    steps all go to the longer one; from then on the lengths are equal before every
    other step, and the steps alternate B, A, B, A, ...
    """
    gap = min(abs(len_a - len_b), steps)
    alternating = np.arange(steps - gap) % 2 == 1          # B first: the tie goes to B
    return np.concatenate([np.full(gap, len_a > len_b), alternating])


def _check_document_args(documents, document_index, max_seq_length, short_seq_prob, rng) -> None:
    check_max_seq_length(max_seq_length)
    check_probability("short_seq_prob", short_seq_prob)
    check_generator("rng", rng)
    if len(documents) < 2:
        raise ValueError(f"documents holds {len(documents)} document(s); next-sentence prediction needs at least 2, "
                         "because a NotNext segment B comes from another document")
    # a negative index would pass Python's indexing, and the "other document" drawn for a NotNext B could be A's own
    if not is_int(document_index) or not 0 <= document_index < len(documents):
        raise ValueError(f"document_index must be a whole number in [0, {len(documents)}), got {document_index!r}")


def create_instances_from_document(documents: Sequence[Sequence[list[str]]], document_index: int,
                                   max_seq_length: int, short_seq_prob: float,
                                   rng: np.random.Generator) -> list[TrainingInstance]:
    """NSP instances from one document, in the manner of ``create_pretraining_data.py``.

    Args:
        documents: ``documents[d][s]`` is the token list of sentence ``s`` of document ``d``
            (at least two documents, no empty sentence).
        document_index: the document to cut into instances.
        max_seq_length: the longest input, special tokens included.
        short_seq_prob: how often to aim for a shorter sequence (see below).
        rng: the random generator; all randomness comes from it.
    """
    _check_document_args(documents, document_index, max_seq_length, short_seq_prob, rng)
    document = documents[document_index]
    max_num_tokens = max_seq_length - 3            # room left after [CLS], [SEP], [SEP]

    # One difference from the original script: it draws the target length once per
    # document, we draw it again for every instance. On a corpus of a few hundred
    # documents, one long document that draws a short target would otherwise supply a
    # large share of all instances (on WikiText-2 valid + test, 29% short instances instead
    # of about 10%, and 62% NotNext, for one seed).
    target_seq_length = _target_length(max_num_tokens, short_seq_prob, rng)
    instances: list[TrainingInstance] = []
    chunk: list[list[str]] = []                    # sentences gathered for the next instance
    chunk_length = 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        chunk_length += len(document[i])
        # Cut an instance once the chunk reaches the target, or at the end of the document.
        if i == len(document) - 1 or chunk_length >= target_seq_length:
            # A is the first a_end sentences of the chunk (at least one).
            a_end = int(rng.integers(1, len(chunk))) if len(chunk) >= 2 else 1
            tokens_a = [t for sentence in chunk[:a_end] for t in sentence]
            if len(chunk) == 1 or rng.random() < 0.5:
                # NotNext: B is taken from a random *other* document, starting at a random
                # sentence, until it is long enough. (A one-sentence chunk has no actual
                # next segment, so it is always NotNext; this is why NotNext is a little
                # more common than IsNext.)
                is_random_next = True
                tokens_b, other = _random_segment(documents, document_index,
                                                  target_seq_length - len(tokens_a), rng)
                # The chunk's sentences after A were not used: step back so that they
                # start the next chunk instead of being wasted.
                i -= len(chunk) - a_end
                source = (document_index, other)
            else:
                # IsNext: B is the rest of the chunk, the text that really follows A.
                is_random_next = False
                tokens_b = [t for sentence in chunk[a_end:] for t in sentence]
                source = (document_index, document_index)
            truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
            instances.append(TrainingInstance(tokens_a, tokens_b, is_random_next, source))
            chunk = []
            chunk_length = 0
            target_seq_length = _target_length(max_num_tokens, short_seq_prob, rng)
        i += 1
    return instances


def _target_length(max_num_tokens: int, short_seq_prob: float, rng: np.random.Generator) -> int:
    """The length an instance aims for.

    Most of the time the whole sequence is filled. Now and then (short_seq_prob) a random
    shorter length is aimed for, so the model also sees the short inputs of fine-tuning.
    """
    if rng.random() < short_seq_prob:
        return int(rng.integers(2, max_num_tokens + 1))
    return max_num_tokens


def _random_segment(documents, document_index: int, target_length: int, rng: np.random.Generator):
    """A NotNext segment B: sentences of a random other document, from a random one on, until
    ``target_length`` tokens.  Returns (tokens, the document's index)."""
    other = int(rng.integers(0, len(documents) - 1))
    if other >= document_index:        # uniform over all documents but this one
        other += 1
    random_document = documents[other]
    start = int(rng.integers(0, len(random_document)))
    tokens: list[str] = []
    for sentence in random_document[start:]:
        tokens.extend(sentence)
        if len(tokens) >= target_length:
            break
    return tokens, other


def _sentences(doc, i):
    """Document ``i`` as it is, once its sentences are checked to be token lists, not strings."""
    if isinstance(doc, str):
        raise TypeError(f"documents[{i}] is a string; each document must be a list of sentences, "
                        f"each a list of tokens (tokenizer.tokenize(sentence))")
    for j, sent in enumerate(doc):
        if isinstance(sent, str) or (len(sent) and not isinstance(sent[0], str)):
            raise TypeError(f"documents[{i}][{j}] must be the token list of a sentence "
                            f"(tokenizer.tokenize(sentence)), got {type(sent).__name__} {str(sent)[:40]!r}")
    return doc


def _warn_long_sentences(docs: Sequence[Sequence[list[str]]], max_seq_length: int) -> None:
    """Warn about "sentences" too long to be one: nearly always text whose line breaks are missing.

    Such a sentence is one segment A or B, cut down to the sequence length, so almost
    all of its text is never trained on.
    """
    lengths = [len(s) for d in docs for s in d if len(s) > LONG_SENTENCE_TOKENS]
    if not lengths:
        return
    warnings.warn(
        f"{len(lengths):,} sentence(s) of more than {LONG_SENTENCE_TOKENS:,} tokens (the longest has "
        f"{max(lengths):,}, {sum(lengths):,} in all): they probably lack line breaks. Each line is one "
        f"sentence, and an instance holds at most max_seq_length={max_seq_length} tokens of it, so most "
        f"of this text is never trained on; put one sentence per line, or read the file as plain text "
        f"(--corpus-format plain; read_plain_text in Python), which finds the sentence ends.",
        UserWarning, stacklevel=3)


def create_training_instances(documents: Sequence[Sequence[list[str]]], max_seq_length: int = 128,
                              short_seq_prob: float = 0.1, dupe_factor: int = 1,
                              seed: int | np.random.Generator = 0) -> list[TrainingInstance]:
    """All NSP instances of a tokenized corpus, shuffled.

    Args:
        documents: ``documents[d][s]`` is the token list of sentence ``s`` of document ``d``
            (e.g. :meth:`~minibert.data.token_cache.TokenizedCorpus.documents`). Empty sentences
            and documents are dropped.
        max_seq_length: the longest input, special tokens included (at least 5).
        short_seq_prob: the probability of aiming for a shorter random length (BERT: 0.1).
        dupe_factor: how many times to cut the corpus, each time differently. The original
            script uses 10 to get 10 masks per sentence; masking here is redone every epoch,
            so 1 is enough unless you want more variety in the A/B cuts.
        seed: an int seed, or a ``numpy.random.Generator`` to draw from.

    Returns:
        the instances, in random order.
    """
    check_max_seq_length(max_seq_length)
    check_probability("short_seq_prob", short_seq_prob)
    check_count("dupe_factor", dupe_factor, 1)
    if not isinstance(seed, np.random.Generator):
        check_count("seed", seed)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    docs = [d for d in ([s for s in _sentences(doc, i) if len(s) > 0] for i, doc in enumerate(documents)) if d]
    if len(docs) < 2:
        raise ValueError(
            f"the corpus has {len(docs)} non-empty document(s); next-sentence prediction needs at "
            "least 2, because a NotNext segment B must come from a different document. Separate "
            "documents with a blank line (one sentence per line), or add text.")
    check_instances_fit(sum(len(s) for d in docs for s in d), dupe_factor)
    _warn_long_sentences(docs, max_seq_length)
    docs = [docs[j] for j in rng.permutation(len(docs))]
    instances: list[TrainingInstance] = []
    for _ in range(dupe_factor):
        for d in range(len(docs)):
            instances.extend(create_instances_from_document(docs, d, max_seq_length, short_seq_prob, rng))
    return [instances[j] for j in rng.permutation(len(instances))]
