"""Pre-training examples as google-research/bert's ``create_pretraining_data.py`` makes them.

Two tasks are trained at once:

* **Next sentence prediction (NSP).** An input is ``[CLS] A [SEP] B [SEP]``,
  where A is a run of consecutive sentences of a document and B is either the
  text that really follows A (label 0, *IsNext*) or text from another document
  (label 1, *NotNext*). See :func:`~minibert.data.instances.create_instances_from_document`.
* **Masked language modelling (MLM).** About 15% of the tokens are chosen for
  prediction; of those, 80% are replaced by ``[MASK]``, 10% by a random token
  and 10% are left unchanged, and the model must recover the originals. See
  :func:`~minibert.data.masking.mask_tokens`.

Unlike the original script, which masks once while writing its files (and
repeats the corpus ``dupe_factor`` times to get several masks), masking here
happens when a batch is drawn: each epoch sees a fresh mask, and a seed makes
every epoch reproducible (:class:`PretrainingDataset`).

This module holds the dataset (:class:`PretrainingDataset`, :func:`build_pretraining_dataset`);
the instances are cut in :mod:`minibert.data.instances`, the tokens masked in :mod:`minibert.data.masking`,
and :mod:`minibert.data.memory_budget` checks beforehand that the instances fit in memory.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from itertools import chain
from operator import itemgetter

import numpy as np

from ..checks import check_count, check_flag, check_probability, is_int
from ..constants import IGNORE_INDEX
from .instances import TrainingInstance, check_max_seq_length, create_training_instances
from .masking import MaskingTables, mask_token_ids, mask_tokens, masking_tables
from .packing import PackedInstance, create_packed_instances
from .vocab import CLS, MASK, PAD, SEP, SPECIAL_TOKENS

__all__ = ["PretrainingDataset", "build_pretraining_dataset", "epoch_order", "batch_rng"]


def epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """The order in which epoch ``epoch`` visits ``n`` instances: ``default_rng((seed, epoch))``'s permutation."""
    return np.random.default_rng((seed, epoch)).permutation(n)


def batch_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    """The generator that masks batch ``index`` of epoch ``epoch``.

    A batch depends on (seed, epoch, index) only: a run resumed mid-epoch, or a
    notebook that asks for one batch, masks it as a run from the start would.
    """
    return np.random.default_rng((seed, epoch, index))


def require_pretraining_tokens(tokenizer) -> None:
    """A clear error now if the vocabulary lacks a special token that pre-training uses:
    ``[CLS] A [SEP] B [SEP]`` inputs, ``[MASK]`` to mask, ``[PAD]`` to pad a batch."""
    if not hasattr(tokenizer, "require_special_tokens"):
        raise TypeError(f"tokenizer must be a WordPieceTokenizer (WordPieceTokenizer.from_vocab_file(path) for a "
                        f"vocab.txt), got {type(tokenizer).__name__}")
    tokenizer.require_special_tokens((PAD, CLS, SEP, MASK), "pre-training (framing, masking and padding)")


class PretrainingDataset:
    """NSP instances (or MLM-only ones) plus the masking settings; draws padded, freshly masked batches.

    Args:
        instances: from :func:`create_training_instances` (NSP pairs), or all from
            :func:`~minibert.data.packing.create_packed_instances` (one segment, no NSP label).
        tokenizer: a :class:`~minibert.data.tokenizer.WordPieceTokenizer` (its vocabulary).
        max_seq_length: the longest sequence allowed.
        masked_lm_prob: the share of tokens to predict (BERT: 0.15).
        max_predictions_per_seq: the most predictions per sequence; None for
            ``ceil(max_seq_length * masked_lm_prob)`` (20 at length 128, as in BERT).
        whole_word_mask: mask whole words (see :func:`mask_tokens`).
        seed: epoch ``e`` visits the instances in the order :func:`epoch_order` draws from
            ``(seed, e)``, and its batch ``i`` is masked by :func:`batch_rng` of ``(seed, e, i)``:
            the trainer's ``BatchStream`` draws its batches the same way, so a notebook and a
            run with one seed see the same batches.
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
        packed = [isinstance(inst, PackedInstance) for inst in instances]
        if any(packed) and not all(packed):
            raise ValueError("the instances mix NSP pairs and MLM-only sequences; make them all one way")
        self.has_nsp = not packed[0]     # False: batches carry no nsp_labels, and the NSP loss is not taken
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
        self._tables = None           # the vocabulary's MaskingTables, made at the first batch

    def __len__(self) -> int:
        return len(self.instances)

    def not_next_share(self) -> float | None:
        """The fraction of NotNext instances (None for MLM-only instances, which have no NSP label)."""
        if not self.has_nsp:
            return None
        return sum(inst.is_random_next for inst in self.instances) / len(self.instances)

    def num_batches(self, batch_size: int, drop_last: bool = False) -> int:
        check_count("batch_size", batch_size, 1)
        return len(self) // batch_size if drop_last else math.ceil(len(self) / batch_size)

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
        check_flag("shuffle", shuffle)
        order = epoch_order(len(self), self.seed, epoch) if shuffle else np.arange(len(self))
        stop = len(order) - len(order) % batch_size if drop_last else len(order)
        for index, start in enumerate(range(0, stop, batch_size)):
            rng = batch_rng(self.seed, epoch, index)
            yield self.collate([self.instances[j] for j in order[start:start + batch_size]], rng, pad_to)

    def collate(self, instances: list[TrainingInstance], rng: np.random.Generator,
                pad_to: int | str = "longest") -> dict[str, np.ndarray]:
        """Mask and pad instances into the arguments of ``BertForPreTraining.forward``.

        Each instance is masked as :func:`mask_tokens` masks it, one after another with ``rng``
        (the same draws, the same result); the work is done on the ids of the whole batch at
        once, by :func:`~minibert.data.masking.mask_token_ids`.

        Returns:
            dict of int64 arrays, B = len(instances), T = the padded length:
            ``input_ids`` (B, T), ``token_type_ids`` (B, T), ``attention_mask`` (B, T) with 1 on
            real tokens and 0 on ``[PAD]``, ``mlm_labels`` (B, T) with the original token id
            at predicted positions and -100 elsewhere, ``nsp_labels`` (B,) with 0 = IsNext and
            1 = NotNext (absent for MLM-only instances).
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
        pad_id = self.tokenizer.pad_id
        sequences = [inst.tokens for inst in instances]
        lengths = np.array([len(tokens) for tokens in sequences], dtype=np.int64)
        real = np.arange(T) < lengths[:, None]         # real tokens; the rest is padding
        masked = self._mask_ids(sequences, lengths, real, rng, pad_id)
        input_ids, mlm_labels = masked if masked is not None else self._mask_tokens(sequences, rng, T, pad_id)
        batch = {"input_ids": input_ids, "token_type_ids": _segment_ids(instances, real),
                 "attention_mask": real.astype(np.int64), "mlm_labels": mlm_labels}
        if self.has_nsp:
            batch["nsp_labels"] = np.array([inst.nsp_label for inst in instances], dtype=np.int64)
        return batch

    def _mask_ids(self, sequences, lengths, real, rng, pad_id):
        """The batch masked on ids by :func:`mask_token_ids`: ``(input_ids, mlm_labels)``, or None
        where :meth:`_mask_tokens` must do it, to raise the error it raises (a token that is not in
        the vocabulary, a string for a token list, no replacement words) before any draw."""
        if any(isinstance(tokens, str) for tokens in sequences):
            return None
        tables = self._masking_tables()
        if tables is None:
            return None
        n_tokens = int(lengths.sum())
        try:
            # itemgetter looks up all the tokens in one call (it returns a bare id for a single one)
            found = itemgetter(*chain.from_iterable(sequences))(self.tokenizer.token_to_id) if n_tokens > 1 \
                else [self.tokenizer.token_to_id[t] for t in chain.from_iterable(sequences)]
        except KeyError:
            return None
        flat = np.fromiter(found, dtype=np.int64, count=n_tokens)
        ids = np.full(real.shape, pad_id, dtype=np.int64)
        ids[real] = flat                               # row-major: each row's tokens, then its padding
        return mask_token_ids(ids, lengths, rng, tables, self.masked_lm_prob, self.max_predictions_per_seq,
                              self.whole_word_mask)

    def _masking_tables(self) -> MaskingTables | None:
        """The vocabulary's :class:`MaskingTables`, made once (again if the tokenizer or the
        replacement words are replaced); None if they cannot be made."""
        source = (self.tokenizer.token_to_id, self.replacement_words)
        sizes = tuple(map(len, source))
        cached = self._tables
        if cached is None or any(a is not b for a, b in zip(cached[0], source)) or cached[1] != sizes:
            try:
                tables = masking_tables(*source)
            except (ValueError, KeyError):
                tables = None
            cached = self._tables = (source, sizes, tables)
        return cached[2]

    def _mask_tokens(self, sequences, rng, T: int, pad_id: int):
        """The batch masked token by token with :func:`mask_tokens` (the same draws and result as
        :meth:`_mask_ids`), raising its errors and those of the look-up of the ids."""
        to_id = self.tokenizer.token_to_id
        input_ids = np.full((len(sequences), T), pad_id, dtype=np.int64)
        mlm_labels = np.full((len(sequences), T), IGNORE_INDEX, dtype=np.int64)
        for b, tokens in enumerate(sequences):
            masked = mask_tokens(tokens, self.replacement_words, rng, self.masked_lm_prob,
                                 self.max_predictions_per_seq, self.whole_word_mask)
            try:
                input_ids[b, :len(masked.tokens)] = [to_id[t] for t in masked.tokens]
                mlm_labels[b, masked.positions] = [to_id[t] for t in masked.labels]
            except KeyError as exc:
                # instances made with another vocabulary: mapping to [UNK] would train on it silently
                raise ValueError(f"token {exc.args[0]!r} of an instance is not in the tokenizer's "
                                 f"vocabulary; make the instances with this tokenizer") from None
        return input_ids, mlm_labels


def _segment_ids(instances, real: np.ndarray) -> np.ndarray:
    """``token_type_ids`` (B, T): each instance's ``segment_ids``, 0 on the padding."""
    if all(type(inst) in (TrainingInstance, PackedInstance) for inst in instances):
        # 0 up to and with the first [SEP], 1 from B on; a packed instance is all segment 0
        b_starts = np.array([len(inst.tokens_a) + 2 if type(inst) is TrainingInstance else real.shape[1]
                             for inst in instances], dtype=np.int64)
        return ((np.arange(real.shape[1]) >= b_starts[:, None]) & real).astype(np.int64)
    token_type_ids = np.zeros(real.shape, dtype=np.int64)
    for b, inst in enumerate(instances):
        token_type_ids[b, :len(inst.segment_ids)] = inst.segment_ids
    return token_type_ids


def build_pretraining_dataset(corpus, tokenizer, *, max_seq_length: int = 128, short_seq_prob: float = 0.1,
                              dupe_factor: int = 1, masked_lm_prob: float = 0.15,
                              max_predictions_per_seq: int | None = None, whole_word_mask: bool = False,
                              seed: int = 0, cache_dir=None, nsp: bool = True) -> PretrainingDataset:
    """Corpus -> tokenized (cached) -> NSP instances -> :class:`PretrainingDataset`.

    ``nsp=False``: MLM-only instances instead, whole sentences packed into one segment
    (:func:`~minibert.data.packing.create_packed_instances`; ``short_seq_prob`` is not used).

    ``cache_dir`` is passed to :func:`~minibert.data.token_cache.tokenize_corpus`; the other
    arguments are described at :func:`create_training_instances` and :class:`PretrainingDataset`.
    Instances are cut with ``numpy.random.default_rng(seed)``.
    """
    from .token_cache import tokenize_corpus

    check_max_seq_length(max_seq_length)
    require_pretraining_tokens(tokenizer)
    if not hasattr(corpus, "check"):
        raise TypeError(f"corpus must be a minibert.data Corpus (load_corpus(...), builtin_corpus(), Corpus(name, "
                        f"documents)), got {type(corpus).__name__}")
    corpus.check(min_documents=2)
    check_count("seed", seed)
    check_flag("nsp", nsp)
    check_flag("whole_word_mask", whole_word_mask)
    tokenized = tokenize_corpus(corpus, tokenizer, cache_dir=cache_dir)
    if tokenized.num_documents < 2:
        raise ValueError(f"corpus {corpus.name!r} has {tokenized.num_documents} document(s) with any "
                         "tokens; next-sentence prediction needs at least 2.")
    documents, rng = tokenized.documents(tokenizer.vocab), np.random.default_rng(seed)
    if nsp:
        instances = create_training_instances(documents, max_seq_length, short_seq_prob, dupe_factor, seed=rng)
    else:
        instances = create_packed_instances(documents, max_seq_length, dupe_factor, seed=rng)
    return PretrainingDataset(instances, tokenizer, max_seq_length, masked_lm_prob,
                              max_predictions_per_seq, whole_word_mask, seed)
