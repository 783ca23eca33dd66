"""Masked language modelling: which tokens of a sequence are predicted, and how they are hidden.

About 15% of the tokens are chosen for prediction; of those, 80% are replaced by
``[MASK]``, 10% by a random token and 10% are left unchanged, and the model must
recover the originals (:func:`mask_tokens`).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..checks import check_probability
from .vocab import CLS, MASK, PAD, SEP

__all__ = ["MaskedTokens", "mask_tokens"]


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
    candidates = _candidates(tokens, never_mask, whole_word_mask)
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
