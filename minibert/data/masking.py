"""Masked language modelling: which tokens of a sequence are predicted, and how they are hidden.

About 15% of the tokens are chosen for prediction; of those, 80% are replaced by
``[MASK]``, 10% by a random token and 10% are left unchanged, and the model must
recover the originals (:func:`mask_tokens`).

:func:`mask_tokens` works on one sequence of token strings and is the reference;
:func:`mask_token_ids` does the same to a whole batch of token ids at once (what
``PretrainingDataset.collate`` uses), with the same random draws and the same result.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

from ..checks import check_flag, check_generator, check_probability, is_int
from ..constants import IGNORE_INDEX
from .vocab import CLS, MASK, PAD, SEP

__all__ = ["MaskedTokens", "mask_tokens", "MaskingTables", "masking_tables", "mask_token_ids"]


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
    if len(tokens) and not isinstance(tokens[0], str):      # ids would come back mixed with '[MASK]' strings
        raise TypeError(f"mask_tokens takes tokens (strings such as 'the', '##s'), not {type(tokens[0]).__name__}s: "
                        "give instance.tokens, or tokenizer.convert_ids_to_tokens(ids)")
    if isinstance(vocab_words, str) or len(vocab_words) == 0:
        raise ValueError("mask_tokens needs vocab_words, a list of tokens to draw random replacements from; got "
                         + ("a string" if isinstance(vocab_words, str) else "none"))
    _check_settings(rng, masked_lm_prob, max_predictions_per_seq, whole_word_mask)
    candidates = _candidates(tokens, never_mask, whole_word_mask)
    num_to_predict = min(max_predictions_per_seq, max(1, int(round(len(tokens) * masked_lm_prob))))
    # candidates in random order until num_to_predict positions are chosen (step 3, _whole_words)
    taken, _ = _whole_words(rng.permutation(len(candidates)).tolist(), [len(c) for c in candidates],
                            num_to_predict)
    chosen = sorted(p for c in taken for p in candidates[c])

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


def _candidates(tokens, never_mask, whole_word_mask: bool) -> list[list[int]]:
    """The positions that may be chosen, in groups chosen together (a whole word, or one piece)."""
    candidates: list[list[int]] = []
    for i, token in enumerate(tokens):
        if token in never_mask:
            continue
        if whole_word_mask and token.startswith("##") and candidates and candidates[-1][-1] == i - 1:
            candidates[-1].append(i)
        else:
            candidates.append([i])
    return candidates


@dataclass
class MaskingTables:
    """What :func:`mask_token_ids` needs to know of a vocabulary, one entry per id.

    Attributes:
        never_mask: True for the ids never chosen (``[CLS]``, ``[SEP]``, ``[PAD]``).
        continues_word: True for the ids of ``##`` pieces (they join the piece before
            under whole-word masking).
        replacement_ids: the ids of ``vocab_words``, in their order.
        mask_id: the id of ``[MASK]``.
    """

    never_mask: np.ndarray
    continues_word: np.ndarray
    replacement_ids: np.ndarray
    mask_id: int


def masking_tables(token_to_id: dict[str, int], vocab_words: Sequence[str],
                   never_mask: frozenset[str] | set[str] = frozenset({CLS, SEP, PAD})) -> MaskingTables:
    """The :class:`MaskingTables` of a vocabulary (``token_to_id``, which must hold ``[MASK]``)
    for :func:`mask_tokens`' ``vocab_words`` and ``never_mask``.

    Raises:
        ValueError: no ``vocab_words``, or one that is not in the vocabulary (it has no id).
    """
    if len(vocab_words) == 0:
        raise ValueError("masking needs vocab_words to draw random replacements from; got none")
    unknown = [w for w in vocab_words if w not in token_to_id]
    if unknown:
        raise ValueError(f"vocab_words holds {unknown[0]!r}, which is not in the vocabulary")
    size = max(token_to_id.values()) + 1
    never, continues = np.zeros(size, dtype=bool), np.zeros(size, dtype=bool)
    for token, i in token_to_id.items():
        never[i] = token in never_mask
        continues[i] = token.startswith("##")
    replacement = np.array([token_to_id[w] for w in vocab_words], dtype=np.int64)
    return MaskingTables(never, continues, replacement, token_to_id[MASK])


def mask_token_ids(ids: np.ndarray, lengths: np.ndarray, rng: np.random.Generator, tables: MaskingTables,
                   masked_lm_prob: float = 0.15, max_predictions_per_seq: int = 20,
                   whole_word_mask: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """:func:`mask_tokens` on every row of a batch of token ids: the same draws, the same choices.

    Row ``b`` of ``ids`` (B, T) holds a sequence in its first ``lengths[b]`` entries (what
    follows, ids too, e.g. ``[PAD]``'s, is left as it is). The rows are masked in order, each
    with the calls :func:`mask_tokens` makes on ``rng`` for that sequence:
    ``rng.permutation(number of candidates)``, then ``rng.random(k)``, ``rng.random(k)`` and
    ``rng.integers(0, len(vocab_words), k)`` for its ``k`` chosen positions. So with the same
    generator the result is the one ``mask_tokens`` gives row after row (``tables`` from
    :func:`masking_tables` of its ``vocab_words`` and ``never_mask``), and the generator ends
    in the same state. Only those draws, and the choice of whole words, go row by row; the
    candidates, the sorting of the chosen positions and the corruption are done for the whole
    batch at once.

    Returns:
        ``(input_ids, labels)``, both (B, T) int64: ``ids`` after masking, and the original id
        at the chosen positions with ``IGNORE_INDEX`` elsewhere.
    """
    _check_settings(rng, masked_lm_prob, max_predictions_per_seq, whole_word_mask)
    ids = np.asarray(ids, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    candidate = ~tables.never_mask[ids] & (np.arange(ids.shape[1]) < lengths[:, None])
    flat = np.flatnonzero(candidate)           # the candidate positions (in ids.ravel()), row after row
    group_of, n_groups, sizes = _groups(ids, candidate, flat, tables.continues_word, whole_word_mask)
    num_to_predict = _num_to_predict(lengths, masked_lm_prob, max_predictions_per_seq)

    picks, n_picked, u_mask, u_keep, replacement = [], [], [], [], []
    permutation, random, integers = rng.permutation, rng.random, rng.integers
    n_words = len(tables.replacement_ids)
    first = 0                                  # the batch-wide number of the row's first group
    for n, cap in zip(n_groups, num_to_predict):
        order = permutation(n)
        if whole_word_mask:
            take, k = _whole_words(order.tolist(), sizes[first:first + n], cap)
        else:
            k = max(0, min(n, int(cap)))       # single positions never overshoot: the first cap of the order
            take = order[:k]
        picks.append(take)
        n_picked.append(len(take))
        first += n
        u_mask.append(random(k))
        u_keep.append(random(k))
        replacement.append(integers(0, n_words, k))

    # Groups are numbered in the order of their positions, row after row, so the chosen ones'
    # positions come out each row's ascending (as mask_tokens sorts them), in line with its draws.
    row_first = np.repeat(np.cumsum([0] + n_groups[:-1]), n_picked)
    local = np.fromiter(chain.from_iterable(picks), np.int64) if whole_word_mask else np.concatenate(picks)
    is_chosen = np.zeros(first, dtype=bool)
    is_chosen[local + row_first] = True
    positions = flat[is_chosen[group_of]]
    return _corrupt(ids, positions, *(np.concatenate(u) for u in (u_mask, u_keep, replacement)), tables)


def _corrupt(ids, positions, u_mask, u_keep, replacement, tables: MaskingTables):
    """mask_tokens' step 4 at the chosen ``positions`` (of ``ids.ravel()``), with their draws:
    the masked ids, and the labels (the original ids there, ``IGNORE_INDEX`` elsewhere)."""
    original = ids.ravel()[positions]
    # [MASK] if u_mask < 0.8, else unchanged if u_keep < 0.5, else the random word
    new = np.where(u_mask < 0.8, tables.mask_id,
                   np.where(u_keep < 0.5, original, tables.replacement_ids[replacement]))
    input_ids = ids.copy()
    input_ids.ravel()[positions] = new
    labels = np.full(ids.shape, IGNORE_INDEX, dtype=np.int64)
    labels.ravel()[positions] = original
    return input_ids, labels


def _groups(ids, candidate, flat, continues_word, whole_word_mask: bool):
    """The candidates in groups chosen together, as mask_tokens' ``_candidates`` makes them:
    ``(group_of, n_groups, sizes)``, the batch-wide group of each candidate position of ``flat``
    (an index array, or a slice where each candidate is its own group), the number of groups of
    each row, and the number of positions of each group (None where they are all 1)."""
    if not whole_word_mask:
        return slice(None), candidate.sum(1).tolist(), None
    # a ## piece joins the group of the position before it when that one is a candidate too;
    # every other candidate starts a group of its own
    joins = candidate & continues_word[ids]
    joins[:, 0] = False
    joins[:, 1:] &= candidate[:, :-1]
    starts = candidate & ~joins
    group_of = np.cumsum(starts.ravel()[flat]) - 1
    n_groups = starts.sum(1)
    return group_of, n_groups.tolist(), np.bincount(group_of, minlength=int(n_groups.sum())).tolist()


def _check_settings(rng, masked_lm_prob, max_predictions_per_seq, whole_word_mask) -> None:
    """The settings both maskers take, checked alike (0 predictions at most: nothing is masked)."""
    check_probability("masked_lm_prob", masked_lm_prob)
    if not is_int(max_predictions_per_seq) or max_predictions_per_seq < 0:
        raise ValueError(f"max_predictions_per_seq must be a whole number >= 0, got {max_predictions_per_seq!r}")
    check_generator("rng", rng)
    check_flag("whole_word_mask", whole_word_mask)


def _num_to_predict(lengths: np.ndarray, masked_lm_prob, max_predictions_per_seq) -> list[int]:
    """mask_tokens' ``num_to_predict`` of each row, counting every token of the sequence."""
    if isinstance(masked_lm_prob, (int, float)) and isinstance(max_predictions_per_seq, int) \
            and abs(max_predictions_per_seq) < 2**62:
        # the same double products as mask_tokens', and np.rint rounds halves to even as round() does
        rounded = np.rint(lengths * masked_lm_prob).astype(np.int64)
        return np.minimum(max_predictions_per_seq, np.maximum(1, rounded)).tolist()
    # other types (a float32 probability, a cap past int64): their own arithmetic, as in mask_tokens
    return [min(max_predictions_per_seq, max(1, int(round(n * masked_lm_prob)))) for n in lengths.tolist()]


def _whole_words(order: list[int], sizes: list[int], num_to_predict: int) -> tuple[list[int], int]:
    """Step 3 for one sequence's groups of ``sizes`` (a whole word, or one piece), taken in
    ``order`` until ``num_to_predict`` positions are chosen, a group that would overshoot skipped:
    the groups chosen, and how many positions they hold (both :func:`mask_tokens` and
    :func:`mask_token_ids` choose by it)."""
    taken, total = [], 0
    for c in order:
        if total >= num_to_predict:
            break
        size = sizes[c]
        if total + size > num_to_predict:
            continue                           # a word that would overshoot is skipped
        taken.append(c)
        total += size
    return taken, total
