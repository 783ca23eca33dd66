"""Training a WordPiece vocabulary from text.

The algorithm is byte-pair-encoding style merging written in WordPiece's
notation, the way Hugging Face's ``tokenizers`` trains BERT vocabularies:

1. Split every text into words with BERT's basic tokenizer and count them.
2. Start from characters: a word is spelled as its first character followed by
   ``##``-marked continuation characters, ``"low"`` -> ``l ##o ##w``. The
   ``limit_alphabet`` most frequent characters form the initial vocabulary;
   words with any other character are left out (they will become ``[UNK]``).
3. Count every pair of adjacent symbols, each weighted by its word's count.
   Merge the most frequent pair everywhere (``l`` + ``##o`` -> ``lo``,
   ``##o`` + ``##w`` -> ``##ow``) and add the merged symbol to the vocabulary.
   Ties go to the pair that sorts first, so training is deterministic.
4. Repeat step 3 until the vocabulary has ``vocab_size`` tokens or no pair is
   seen at least ``min_frequency`` times.

:func:`learn_vocab` is the algorithm; :func:`minibert.data.tokenizer.train_wordpiece` makes a
tokenizer of the vocabulary it learns.

Only the words whose spelling contains the merged pair change in step 3, so the
trainer keeps, for each pair, the set of words that contain it and updates the
counts of just those words; a heap finds the most frequent pair quickly.
"""
from __future__ import annotations

import heapq
import os
import warnings
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from .basic_tokenizer import BasicTokenizer
from ..checks import is_int
from ..textio import read_text
from .vocab import bert_special_layout

__all__ = ["learn_vocab", "bert_special_layout", "check_vocab_size_option"]


def check_vocab_size_option(vocab_size: int) -> None:
    """``--vocab-size`` of the command line: room for words next to BERT's special tokens.

    (The command line always uses BERT's layout; ``train_wordpiece`` also takes ``num_unused``.)
    """
    n_special = len(bert_special_layout())
    if vocab_size <= n_special:
        raise ValueError(f"--vocab-size {vocab_size} leaves no room for words: a trained vocabulary starts "
                         f"with BERT's {n_special} special tokens ([PAD], [unused0] to [unused98], [UNK], "
                         f"[CLS], [SEP], [MASK]); give a --vocab-size of at least {n_special + 1} (a useful "
                         f"vocabulary has thousands of tokens)")


def _texts(texts_or_files: Iterable[str | os.PathLike]) -> Iterable[str]:
    """Strings are text; ``pathlib.Path`` (any ``os.PathLike``) items are files to read."""
    if isinstance(texts_or_files, str):
        item = texts_or_files
        if len(item) < 4096 and item.strip() and not any(c.isspace() for c in item) and os.path.isfile(item):
            # the whole training text is one "word" that names a file: surely meant as the file
            raise ValueError(f"train_wordpiece got the string {item!r}, the name of a file; strings "
                             f"are text to learn from: pass pathlib.Path({item!r}) to read the file")
    if isinstance(texts_or_files, (str, os.PathLike)):
        texts_or_files = [texts_or_files]
    for item in texts_or_files:
        if isinstance(item, os.PathLike):
            yield read_text(Path(item), what="training file")
        elif isinstance(item, str):
            if ("/" in item or os.sep in item) and len(item) < 4096 and not any(c.isspace() for c in item) \
                    and os.path.isfile(item):
                # one text that is a path to an existing file (a lone word such as "Makefile" is text)
                raise ValueError(f"train_wordpiece got the text {item!r}, the path of a file; strings are "
                                 f"text to learn from: pass pathlib.Path({item!r}) to read the file")
            yield item
        else:
            raise TypeError(f"train_wordpiece takes str texts or pathlib.Path files, "
                            f"got {type(item).__name__}")


def learn_vocab(texts_or_files: Iterable[str | os.PathLike], vocab_size: int, *,
                do_lower_case: bool = True, min_frequency: int = 2, limit_alphabet: int = 1000,
                num_unused: int = 99) -> list[str]:
    """The tokens of a WordPiece vocabulary learned from text (the module docstring's steps).

    The arguments are :func:`minibert.data.tokenizer.train_wordpiece`'s.  The list holds, in order,
    the special tokens, the single characters (word-initial, then ``##`` forms) and the merged
    pieces in the order they were learned.
    """
    specials = _check_options(vocab_size, min_frequency, limit_alphabet, num_unused)
    word_counts = _count_words(texts_or_files, do_lower_case)                          # step 1
    vocab, spellings, counts = _characters(word_counts, specials, vocab_size, limit_alphabet)   # step 2
    _merge_pairs(vocab, spellings, counts, vocab_size, min_frequency)                  # steps 3 and 4
    return vocab


def _check_options(vocab_size, min_frequency, limit_alphabet, num_unused) -> list[str]:
    """The settings checked; returns the special tokens the vocabulary starts with."""
    for name, value in (("vocab_size", vocab_size), ("min_frequency", min_frequency),
                        ("limit_alphabet", limit_alphabet), ("num_unused", num_unused)):
        if not is_int(value):
            raise TypeError(f"{name} must be an int, got {value!r}")
    # checked before the special tokens are listed: a huge num_unused would fill the memory first
    if num_unused < 0:
        raise ValueError(f"num_unused={num_unused} must be in [0, vocab_size - 5) for vocab_size={vocab_size}")
    n_special = num_unused + len(bert_special_layout(0))
    if vocab_size <= n_special:
        raise ValueError(f"vocab_size={vocab_size} leaves no room next to the {n_special} special tokens "
                         f"(num_unused={num_unused} must be in [0, vocab_size - 5) for vocab_size={vocab_size}); "
                         f"use a larger vocab_size or fewer unused slots (num_unused).")
    if min_frequency < 1 or limit_alphabet < 1:
        raise ValueError("min_frequency and limit_alphabet must be at least 1.")
    return bert_special_layout(num_unused)


def _count_words(texts_or_files, do_lower_case: bool) -> Counter:
    """Step 1: every text cut into words by BERT's basic tokenizer, and the words counted."""
    basic = BasicTokenizer(do_lower_case=do_lower_case)
    word_counts: Counter[str] = Counter()
    for text in _texts(texts_or_files):
        word_counts.update(basic.tokenize(text))
    if not word_counts:
        raise ValueError("train_wordpiece: the training text has no words; give it some text.")
    return word_counts


def _characters(word_counts: Counter, specials: list[str], vocab_size: int, limit_alphabet: int):
    """Step 2: the special tokens and the alphabet's pieces; returns (vocab, spellings, counts).

    ``spellings[i]`` is word i spelled in the vocabulary's pieces (first character, then
    ``##`` characters), ``counts[i]`` how often it occurs.
    """
    # the alphabet: most frequent characters first, ties in code point order
    char_counts: Counter[str] = Counter()
    for word, n in word_counts.items():
        for ch in word:
            char_counts[ch] += n
    alphabet = sorted(char_counts, key=lambda c: (-char_counts[c], c))[:limit_alphabet]
    allowed = set(alphabet)
    words = sorted(w for w in word_counts if set(w) <= allowed)
    counts = [word_counts[w] for w in words]
    spellings = [[w[0], *("##" + c for c in w[1:])] for w in words]

    vocab = list(specials)
    pieces = sorted({s[0] for s in spellings}) + sorted({p for s in spellings for p in s[1:]})
    in_vocab = set(vocab)
    for token in pieces:
        if token not in in_vocab and len(vocab) < vocab_size:
            vocab.append(token)
            in_vocab.add(token)
    missing = [t for t in pieces if t not in in_vocab]
    if missing or not words:
        why = (f"vocab_size={vocab_size} holds only {len(pieces) - len(missing)} of the "
               f"{len(pieces)} character pieces (after {len(specials)} special tokens)"
               if missing else f"no word is spelled with the {len(alphabet)} most frequent characters "
                               f"(limit_alphabet={limit_alphabet})")
        warnings.warn(f"train_wordpiece: {why}; words that need the others become [UNK]. Raise vocab_size "
                      f"(--vocab-size on the command line); in Python a larger limit_alphabet or a smaller "
                      f"num_unused also make room.", stacklevel=4)   # at the caller of train_wordpiece
    return vocab, spellings, counts


def _merge_pairs(vocab: list[str], spellings: list, counts: list, vocab_size: int, min_frequency: int) -> None:
    """Steps 3 and 4: merge the most frequent pair of pieces, again and again, into ``vocab``."""
    in_vocab = set(vocab)
    # pair counts, and which words contain each pair
    pair_count: Counter[tuple[str, str]] = Counter()
    pair_words: dict[tuple[str, str], set[int]] = {}
    for i, s in enumerate(spellings):
        for pair in zip(s, s[1:]):
            pair_count[pair] += counts[i]
            pair_words.setdefault(pair, set()).add(i)
    heap = [(-n, pair) for pair, n in pair_count.items()]
    heapq.heapify(heap)

    while len(vocab) < vocab_size and heap:
        neg, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -neg:
            continue                      # stale heap entry: the count has changed since
        if -neg < min_frequency:
            break
        a, b = pair
        merged = a + b[2:]                # b always starts with "##"
        if merged not in in_vocab:
            vocab.append(merged)
            in_vocab.add(merged)
        changed: set[tuple[str, str]] = set()
        for i in sorted(pair_words.pop(pair, ())):
            old = spellings[i]
            new = _merge(old, a, b, merged)
            for p in zip(old, old[1:]):   # forget the word's old pairs ...
                pair_count[p] -= counts[i]
                changed.add(p)
                pair_words.get(p, set()).discard(i)
            for p in zip(new, new[1:]):   # ... and count its new ones
                pair_count[p] += counts[i]
                changed.add(p)
                pair_words.setdefault(p, set()).add(i)
            spellings[i] = new
        for p in sorted(changed):
            if pair_count[p] > 0:
                heapq.heappush(heap, (-pair_count[p], p))
            else:
                del pair_count[p]


def _merge(symbols: list[str], a: str, b: str, merged: str) -> list[str]:
    """Replace every adjacent ``a, b`` in ``symbols`` (left to right) by ``merged``."""
    out: list[str] = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
            out.append(merged)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out
