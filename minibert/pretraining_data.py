"""Pre-training examples as google-research/bert's ``create_pretraining_data.py`` makes them.

Two tasks are trained at once:

* **Next sentence prediction (NSP).** An input is ``[CLS] A [SEP] B [SEP]``,
  where A is a run of consecutive sentences of a document and B is either the
  text that really follows A (label 0, *IsNext*) or text from another document
  (label 1, *NotNext*). See :func:`create_instances_from_document`.
* **Masked language modelling (MLM).** About 15% of the tokens are chosen for
  prediction; of those, 80% are replaced by ``[MASK]``, 10% by a random token
  and 10% are left unchanged, and the model must recover the originals. See
  :func:`mask_tokens`.

Unlike the original script, which masks once while writing its files (and
repeats the corpus ``dupe_factor`` times to get several masks), masking here
happens when a batch is drawn: each epoch sees a fresh mask, and a seed makes
every epoch reproducible (:class:`PretrainingDataset`).
"""
from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from .checks import check_count, check_probability, is_int
from .constants import IGNORE_INDEX
from .tokenizer import CLS, MASK, PAD, SEP, SPECIAL_TOKENS

__all__ = ["TrainingInstance", "MaskedTokens", "create_training_instances",
           "create_instances_from_document", "truncate_seq_pair", "mask_tokens",
           "PretrainingDataset", "build_pretraining_dataset", "IGNORE_INDEX"]

IS_NEXT, NOT_NEXT = 0, 1     # NSP labels

# Cut instances hold each corpus token about 1.5 times (NotNext segments repeat text of
# other documents) as an 8-byte list entry, plus every instance's own objects: 16 to 22
# bytes per corpus token and pass, measured on the built-in corpus at 32 to 512 tokens
# per sequence. The low end is used, so that no run that fits is refused.
BYTES_PER_INSTANCE_TOKEN = 16
ASSUMED_MEMORY = 16 * 2**30  # when the free memory cannot be read
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


# ---------------------------------------------------------------------------- checks
def check_max_seq_length(max_seq_length: int) -> None:
    if not isinstance(max_seq_length, (int, np.integer)) or max_seq_length < 5:
        raise ValueError(
            f"max_seq_length={max_seq_length!r} is too small: [CLS] A [SEP] B [SEP] needs 3 special "
            "tokens and at least one token each for A and B, so max_seq_length must be at least 5 "
            "(BERT uses 128, then 512).")


def _read_int(path: str, field_name: str | None = None) -> int | None:
    """An integer from a /proc or /sys file (the value after ``field_name:``), or None."""
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":") if field_name else ("", "", line)
                if key == (field_name or ""):
                    words = value.split()
                    unit = 1024 if words[1:] == ["kB"] else 1
                    return int(words[0]) * unit if words and words[0].isdigit() else None
    except OSError:
        pass
    return None


def available_memory() -> tuple[int, bool]:
    """Bytes of memory that new data can take, and whether that was measured (False: assumed).

    The smallest of what the system (``MemAvailable``) and a container limit (cgroup v2)
    leave; where neither can be read, the free physical pages; else ``ASSUMED_MEMORY``.
    """
    candidates = [_read_int("/proc/meminfo", "MemAvailable")]
    limit, used = _read_int("/sys/fs/cgroup/memory.max"), _read_int("/sys/fs/cgroup/memory.current")
    if limit is not None and used is not None:
        candidates.append(max(limit - used, 0))
    found = [c for c in candidates if c is not None]
    if not found:
        try:
            found = [os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")]
        except (AttributeError, ValueError, OSError):
            return ASSUMED_MEMORY, False
    return min(found), True


def _size(n_bytes: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n_bytes < 1000:
            return f"{n_bytes:.0f} {unit}"
        n_bytes /= 1000
    return f"{n_bytes:,.0f} TB"


def check_instances_fit(num_tokens: int, dupe_factor: int, unit: str = "tokens") -> None:
    """Refuse, before anything is allocated, a ``dupe_factor`` whose instances cannot fit in memory.

    Cutting the corpus ``dupe_factor`` times keeps about ``num_tokens * dupe_factor``
    tokens in instances, ``BYTES_PER_INSTANCE_TOKEN`` bytes each. ``unit`` names what
    ``num_tokens`` counts ("words" for a first check before tokenizing: there are at
    least as many tokens).
    """
    need = num_tokens * dupe_factor * BYTES_PER_INSTANCE_TOKEN
    free, measured = available_memory()
    if need <= free:
        return
    per_pass = max(num_tokens * BYTES_PER_INSTANCE_TOKEN, 1)
    where = "available" if measured else "assumed (the free memory could not be read)"
    advice = (f"the most that could fit is {free // per_pass:,}" if free >= per_pass
              else "not even 1 fits: use a smaller corpus or a machine with more memory")
    raise ValueError(
        f"dupe_factor={dupe_factor:,} (--dupe-factor) cuts the corpus's {num_tokens:,} {unit} into "
        f"instances {dupe_factor:,} times: about {_size(need)} in memory, more than the {_size(free)} "
        f"{where}; {advice} (minibert masks afresh every epoch, so 1 or 2 are enough).")


# ---------------------------------------------------------------------------- NSP
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
    document = documents[document_index]
    max_num_tokens = max_seq_length - 3            # room left after [CLS], [SEP], [SEP]

    def draw_target_length() -> int:
        # Most of the time fill the whole sequence. Now and then (short_seq_prob) aim for a
        # random shorter length, so the model also sees the short inputs of fine-tuning.
        if rng.random() < short_seq_prob:
            return int(rng.integers(2, max_num_tokens + 1))
        return max_num_tokens

    # One difference from the original script: it draws the target length once per
    # document, we draw it again for every instance. On a corpus of a few hundred
    # documents, one long document that draws a short target would otherwise supply a
    # large share of all instances (on WikiText-2 valid + test, 29% short instances instead
    # of about 10%, and 62% NotNext, for one seed).
    target_seq_length = draw_target_length()
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
            tokens_b: list[str] = []
            if len(chunk) == 1 or rng.random() < 0.5:
                # NotNext: B is taken from a random *other* document, starting at a random
                # sentence, until it is long enough. (A one-sentence chunk has no actual
                # next segment, so it is always NotNext; this is why NotNext is a little
                # more common than IsNext.)
                is_random_next = True
                target_b_length = target_seq_length - len(tokens_a)
                other = int(rng.integers(0, len(documents) - 1))
                if other >= document_index:        # uniform over all documents but this one
                    other += 1
                random_document = documents[other]
                start = int(rng.integers(0, len(random_document)))
                for sentence in random_document[start:]:
                    tokens_b.extend(sentence)
                    if len(tokens_b) >= target_b_length:
                        break
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
            target_seq_length = draw_target_length()
        i += 1
    return instances


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
            (e.g. :meth:`~minibert.token_cache.TokenizedCorpus.documents`). Empty sentences
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


# ---------------------------------------------------------------------------- MLM
@dataclass
class MaskedTokens:
    """The result of :func:`mask_tokens`.

    Attributes:
        tokens: the input after masking.
        positions: the chosen positions, ascending.
        labels: the original token at each chosen position (what the model must predict).
        actions: what happened at each chosen position: "mask", "random" or "keep".
    """

    tokens: list[str]
    positions: list[int]
    labels: list[str]
    actions: list[str]


def mask_tokens(tokens: Sequence[str], vocab_words: Sequence[str], rng: np.random.Generator,
                masked_lm_prob: float = 0.15, max_predictions_per_seq: int = 20,
                whole_word_mask: bool = False,
                never_mask: frozenset[str] | set[str] = frozenset({CLS, SEP, PAD})) -> MaskedTokens:
    """Choose tokens to predict and corrupt them, as BERT does.

    1. Candidates are all positions except ``[CLS]``, ``[SEP]`` and ``[PAD]``. With
       ``whole_word_mask`` a word's ``##`` pieces join the candidate of the piece before,
       so a word is chosen (and predicted) whole.
    2. ``num_to_predict = min(max_predictions_per_seq, max(1, round(len(tokens) * masked_lm_prob)))``,
       counting every token of the sequence, special ones too.
    3. Candidates are taken in random order until ``num_to_predict`` positions are chosen
       (a whole word that would overshoot is skipped).
    4. Each chosen position becomes ``[MASK]`` with probability 0.8, a random token from
       ``vocab_words`` with 0.1, and stays as it is with 0.1. The model sees a ``[MASK]``
       only in pre-training, so the other 20% make it predict every token it is given.

    Args:
        tokens: the sequence (e.g. ``instance.tokens``).
        vocab_words: the tokens random replacements are drawn from. (The original draws
            from the whole vocabulary; :class:`PretrainingDataset` leaves out the special
            and ``[unused]`` tokens, so a random replacement is never ``[SEP]`` or ``[MASK]``.)
        rng: the random generator.

    Returns:
        a :class:`MaskedTokens`.
    """
    if isinstance(tokens, str):
        raise TypeError("mask_tokens takes a list of tokens, not a string (it would mask its characters)")
    check_probability("masked_lm_prob", masked_lm_prob)
    if len(vocab_words) == 0:
        raise ValueError("mask_tokens needs vocab_words to draw random replacements from; got none")
    candidates: list[list[int]] = []
    for i, token in enumerate(tokens):
        if token in never_mask:
            continue
        if whole_word_mask and token.startswith("##") and candidates and candidates[-1][-1] == i - 1:
            candidates[-1].append(i)
        else:
            candidates.append([i])
    num_to_predict = min(max_predictions_per_seq, max(1, int(round(len(tokens) * masked_lm_prob))))
    chosen: list[int] = []
    for c in rng.permutation(len(candidates)):
        if len(chosen) >= num_to_predict:
            break
        if len(chosen) + len(candidates[c]) > num_to_predict:
            continue
        chosen.extend(candidates[c])
    chosen.sort()

    # Three draws per chosen position, made up front so the stream of random numbers
    # does not depend on the outcomes.
    k = len(chosen)
    u_mask, u_keep = rng.random(k), rng.random(k)
    replacement = rng.integers(0, len(vocab_words), k)
    output = list(tokens)
    actions = []
    for j, pos in enumerate(chosen):
        if u_mask[j] < 0.8:
            output[pos], action = MASK, "mask"
        elif u_keep[j] < 0.5:
            action = "keep"
        else:
            output[pos], action = vocab_words[replacement[j]], "random"
        actions.append(action)
    return MaskedTokens(output, chosen, [tokens[p] for p in chosen], actions)


# ---------------------------------------------------------------------------- batches
def require_pretraining_tokens(tokenizer) -> None:
    """A clear error now if the vocabulary lacks a special token that pre-training uses:
    ``[CLS] A [SEP] B [SEP]`` inputs, ``[MASK]`` to mask, ``[PAD]`` to pad a batch."""
    tokenizer.require_special_tokens((PAD, CLS, SEP, MASK), "pre-training (framing, masking and padding)")


class PretrainingDataset:
    """NSP instances plus the masking settings; draws padded, freshly masked batches.

    Args:
        instances: from :func:`create_training_instances`.
        tokenizer: a :class:`~minibert.tokenizer.WordPieceTokenizer` (its vocabulary).
        max_seq_length: the longest sequence allowed.
        masked_lm_prob: the share of tokens to predict (BERT: 0.15).
        max_predictions_per_seq: the most predictions per sequence; None for
            ``ceil(max_seq_length * masked_lm_prob)`` (20 at length 128, as in BERT).
        whole_word_mask: mask whole words (see :func:`mask_tokens`).
        seed: epoch ``e`` is shuffled and masked by ``numpy.random.default_rng((seed, e))``.
    """

    def __init__(self, instances: list[TrainingInstance], tokenizer, max_seq_length: int = 128,
                 masked_lm_prob: float = 0.15, max_predictions_per_seq: int | None = None,
                 whole_word_mask: bool = False, seed: int = 0):
        check_max_seq_length(max_seq_length)
        require_pretraining_tokens(tokenizer)
        check_probability("masked_lm_prob", masked_lm_prob, low_open=True)
        if max_predictions_per_seq is None:
            max_predictions_per_seq = math.ceil(max_seq_length * masked_lm_prob)
        check_count("max_predictions_per_seq", max_predictions_per_seq, 1)
        check_count("seed", seed)
        if not instances:
            raise ValueError("no training instances: the corpus is too small or empty.")
        too_long = [i for i, inst in enumerate(instances) if len(inst) > max_seq_length]
        if too_long:
            raise ValueError(f"instance {too_long[0]} has {len(instances[too_long[0]])} tokens, more than "
                             f"max_seq_length={max_seq_length}; create the instances with the same length.")
        self.instances = instances
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.masked_lm_prob = masked_lm_prob
        self.max_predictions_per_seq = max_predictions_per_seq
        self.whole_word_mask = whole_word_mask
        self.seed = seed
        # random replacements: every ordinary token (not [PAD] [UNK] [CLS] [SEP] [MASK] or [unusedN])
        self.replacement_words = [t for t in tokenizer.vocab
                                  if t not in SPECIAL_TOKENS and not (t.startswith("[unused") and t.endswith("]"))]
        if not self.replacement_words:
            raise ValueError("the vocabulary holds only special tokens: it has no words to mask, predict "
                             "or draw random replacements from")

    def __len__(self) -> int:
        return len(self.instances)

    def not_next_share(self) -> float:
        """The fraction of NotNext instances."""
        return sum(inst.is_random_next for inst in self.instances) / len(self.instances)

    def num_batches(self, batch_size: int, drop_last: bool = False) -> int:
        return len(self) // batch_size if drop_last else math.ceil(len(self) / batch_size)

    def epoch_rng(self, epoch: int) -> np.random.Generator:
        """The generator that shuffles and masks epoch ``epoch``."""
        return np.random.default_rng((self.seed, epoch))

    def batches(self, batch_size: int, epoch: int = 0, shuffle: bool = True,
                pad_to: int | str = "longest", drop_last: bool = False) -> Iterator[dict[str, np.ndarray]]:
        """Yield the batches of one epoch (see :meth:`collate` for their contents).

        Args:
            batch_size: instances per batch (the last one may be smaller unless ``drop_last``).
            epoch: the epoch number; with the same seed and epoch the batches are identical.
            shuffle: visit the instances in a random order.
            pad_to: ``"longest"`` (the longest sequence of the batch) or a fixed length.
        """
        check_count("batch_size", batch_size, 1)
        check_count("epoch", epoch)
        rng = self.epoch_rng(epoch)
        order = rng.permutation(len(self)) if shuffle else np.arange(len(self))
        stop = len(order) - len(order) % batch_size if drop_last else len(order)
        for start in range(0, stop, batch_size):
            yield self.collate([self.instances[j] for j in order[start:start + batch_size]], rng, pad_to)

    def collate(self, instances: list[TrainingInstance], rng: np.random.Generator,
                pad_to: int | str = "longest") -> dict[str, np.ndarray]:
        """Mask and pad instances into the arguments of ``BertForPreTraining.forward``.

        Returns:
            dict of int64 arrays, B = len(instances), T = the padded length:
            ``input_ids`` (B, T), ``token_type_ids`` (B, T), ``attention_mask`` (B, T) with 1 on
            real tokens and 0 on ``[PAD]``, ``mlm_labels`` (B, T) with the original token id
            at predicted positions and -100 elsewhere, ``nsp_labels`` (B,) with 0 = IsNext and
            1 = NotNext.
        """
        if not isinstance(instances, (list, tuple)) or not instances:
            raise ValueError(f"collate needs a non-empty list of TrainingInstance, got {instances!r:.80}")
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"collate masks with rng, a numpy.random.Generator "
                            f"(np.random.default_rng(seed)), got {type(rng).__name__}")
        longest = max(len(inst) for inst in instances)
        if pad_to == "longest":
            T = longest
        elif is_int(pad_to):
            if pad_to < longest:
                raise ValueError(f"pad_to={pad_to} is shorter than the longest sequence in the batch "
                                 f"({longest} tokens); use pad_to >= max_seq_length={self.max_seq_length}.")
            if pad_to > self.max_seq_length:
                raise ValueError(f"pad_to={pad_to} is longer than max_seq_length={self.max_seq_length}: no "
                                 f"instance is longer, so the rest would be padding only; use at most "
                                 f"{self.max_seq_length}.")
            T = int(pad_to)
        else:
            raise ValueError(f"pad_to={pad_to!r}: use 'longest' or an int length.")
        B = len(instances)
        to_id = self.tokenizer.token_to_id
        input_ids = np.full((B, T), self.tokenizer.pad_id, dtype=np.int64)
        token_type_ids = np.zeros((B, T), dtype=np.int64)
        attention_mask = np.zeros((B, T), dtype=np.int64)
        mlm_labels = np.full((B, T), IGNORE_INDEX, dtype=np.int64)
        nsp_labels = np.empty(B, dtype=np.int64)
        for b, inst in enumerate(instances):
            masked = mask_tokens(inst.tokens, self.replacement_words, rng, self.masked_lm_prob,
                                 self.max_predictions_per_seq, self.whole_word_mask)
            n = len(masked.tokens)
            try:
                input_ids[b, :n] = [to_id[t] for t in masked.tokens]
                mlm_labels[b, masked.positions] = [to_id[t] for t in masked.labels]
            except KeyError as exc:
                # instances made with another vocabulary: mapping to [UNK] would train on it silently
                raise ValueError(f"token {exc.args[0]!r} of an instance is not in the tokenizer's "
                                 f"vocabulary; make the instances with this tokenizer") from None
            token_type_ids[b, :n] = inst.segment_ids
            attention_mask[b, :n] = 1
            nsp_labels[b] = inst.nsp_label
        return {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask,
                "mlm_labels": mlm_labels, "nsp_labels": nsp_labels}


def build_pretraining_dataset(corpus, tokenizer, *, max_seq_length: int = 128, short_seq_prob: float = 0.1,
                              dupe_factor: int = 1, masked_lm_prob: float = 0.15,
                              max_predictions_per_seq: int | None = None, whole_word_mask: bool = False,
                              seed: int = 0, cache_dir=None) -> PretrainingDataset:
    """Corpus -> tokenized (cached) -> NSP instances -> :class:`PretrainingDataset`.

    ``cache_dir`` is passed to :func:`~minibert.token_cache.tokenize_corpus`; the other
    arguments are described at :func:`create_training_instances` and :class:`PretrainingDataset`.
    Instances are cut with ``numpy.random.default_rng(seed)``.
    """
    from .token_cache import tokenize_corpus

    check_max_seq_length(max_seq_length)
    require_pretraining_tokens(tokenizer)
    corpus.check(min_documents=2)
    tokenized = tokenize_corpus(corpus, tokenizer, cache_dir=cache_dir)
    if tokenized.num_documents < 2:
        raise ValueError(f"corpus {corpus.name!r} has {tokenized.num_documents} document(s) with any "
                         "tokens; next-sentence prediction needs at least 2.")
    instances = create_training_instances(tokenized.documents(tokenizer.vocab), max_seq_length,
                                          short_seq_prob, dupe_factor, seed=np.random.default_rng(seed))
    return PretrainingDataset(instances, tokenizer, max_seq_length, masked_lm_prob,
                              max_predictions_per_seq, whole_word_mask, seed)
