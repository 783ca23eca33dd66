"""BERT's WordPiece tokenizer: text -> tokens -> ids, and back.

Tokenization has two steps:

1. :class:`~minibert.data.basic_tokenizer.BasicTokenizer` cuts text into words and
   punctuation marks (cleaning, CJK, lowercasing and accent stripping).
2. WordPiece cuts each word into pieces from the vocabulary, greedily taking the
   longest piece that matches at the current position. Pieces that continue a
   word start with ``##``: ``"unwanted"`` -> ``un ##want ##ed``. A word with no
   such cut, or longer than 100 characters, becomes ``[UNK]`` as a whole.

With an uncased ``vocab.txt`` the ids are those of Hugging Face's
``BertTokenizer``/``BertTokenizerFast`` (the tests check every line of
WikiText-2's validation split and a set of tricky strings).  At the edges of
Unicode the two transformers tokenizers disagree with each other, and
minibert follows google-research/bert's Python code and Python's
``unicodedata`` tables: in cased mode no NFC normalisation (like the Fast
tokenizer), a final sigma lowercased as ``ς`` and unassigned code points
dropped (like the Python one). Special tokens of the vocabulary written literally in
the text, such as ``"[MASK]"``, are kept whole, as in transformers.

Vocabularies are trained by :func:`train_wordpiece` (the algorithm is in
:mod:`minibert.data.wordpiece_trainer`); ``vocab.txt`` is read by :mod:`minibert.data.vocab`.
"""
from __future__ import annotations

import hashlib
import operator
import os
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from .basic_tokenizer import BasicTokenizer
from ..checks import check_flag
from ..textio import write_whole
from .vocab import CLS, MASK, PAD, SEP, SPECIAL_TOKENS, UNK, load_vocab, vocab_is_cased  # noqa: F401
from .wordpiece_trainer import learn_vocab

__all__ = ["WordPieceTokenizer", "load_vocab", "train_wordpiece", "SPECIAL_TOKENS",
           "PAD", "UNK", "CLS", "SEP", "MASK", "MAX_CHARS_PER_WORD"]

MAX_CHARS_PER_WORD = 100     # longer "words" (URLs, DNA, ...) become a single [UNK]


def _check_text(name: str, text) -> str:
    if isinstance(text, str):
        return text
    hint = " (decode the bytes first, e.g. .decode('utf-8'))" if isinstance(text, (bytes, bytearray)) else ""
    raise TypeError(f"{name} must be a str, got {type(text).__name__}{hint}")


class WordPieceTokenizer:
    """BERT's tokenizer for a given vocabulary.

    Args:
        vocab: the tokens; ``vocab[i]`` has id ``i``. Tokenizing needs only ``[UNK]``
            (for words that cannot be cut into pieces); the other special tokens are
            required where they are used: ``[CLS]`` and ``[SEP]`` to frame an input
            (:meth:`encode`), ``[PAD]`` to pad a batch, ``[MASK]`` to mask. A vocabulary
            for pre-training holds all five, anywhere.
        do_lower_case: ``True`` for uncased vocabularies (lowercase and strip accents).
        source: where the vocabulary came from, used in error messages.
    """

    def __init__(self, vocab: list[str], do_lower_case: bool = True, source: str = "vocabulary"):
        # in id order: a set (or a dict's keys, a generator) would give the ids an order of its own, or none
        if not isinstance(vocab, (list, tuple)) or not all(isinstance(t, str) for t in vocab):
            raise TypeError(f"{source}: the vocabulary must be a list of token strings in id order, got "
                            f"{type(vocab).__name__}")
        check_flag("do_lower_case", do_lower_case, "True (an uncased vocabulary) or False")
        self.vocab: list[str] = list(vocab)
        self.token_to_id: dict[str, int] = {t: i for i, t in enumerate(self.vocab)}
        if len(self.token_to_id) != len(self.vocab):
            raise ValueError(f"{source}: some tokens are listed more than once.")
        self.source = source
        self.unk_id = self.special_id(UNK, "tokenizing (every word that WordPiece cannot cut into "
                                           "pieces becomes [UNK])")
        self.do_lower_case = do_lower_case
        self.basic = BasicTokenizer(do_lower_case=do_lower_case)
        # WordPiece never needs to try a piece longer than the longest one in the vocabulary.
        self._max_piece_chars = max(len(t[2:]) if t.startswith("##") else len(t) for t in self.vocab)
        self._word_memo: dict[str, tuple[list[str], list[int]]] = {}
        # special tokens written in the text stay whole, if the vocabulary has them
        present = [t for t in SPECIAL_TOKENS if t in self.token_to_id]
        self._special_re = re.compile("(" + "|".join(re.escape(t) for t in present) + ")")

    # ------------------------------------------------------------------ special tokens
    def require_special_tokens(self, tokens, needed_for: str) -> None:
        """A ``ValueError`` naming every one of ``tokens`` missing from the vocabulary and what
        ``needed_for`` them (e.g. "masking"); nothing when all are there."""
        missing = [t for t in tokens if t not in self.token_to_id]
        if missing:
            raise ValueError(
                f"{self.source}: no {' '.join(missing)} token{'s' if len(missing) > 1 else ''} in the "
                f"vocabulary, which {needed_for} needs. Add {'them' if len(missing) > 1 else 'it'} "
                f"(BERT's vocab.txt has [PAD] on line 1 and [UNK] [CLS] [SEP] [MASK] on lines 101-104) "
                f"or train a vocabulary with train_wordpiece() or `minibert train-tokenizer`.")

    def special_id(self, token: str, needed_for: str) -> int:
        """The id of a special token, or a ``ValueError`` naming it and what ``needed_for`` it."""
        self.require_special_tokens([token], needed_for)
        return self.token_to_id[token]

    @property
    def pad_id(self) -> int:
        return self.special_id(PAD, "padding a batch")

    @property
    def cls_id(self) -> int:
        return self.special_id(CLS, "framing an input ([CLS] A [SEP] B [SEP])")

    @property
    def sep_id(self) -> int:
        return self.special_id(SEP, "framing an input ([CLS] A [SEP] B [SEP])")

    @property
    def mask_id(self) -> int:
        return self.special_id(MASK, "masking (pre-training and fill-mask)")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_vocab_file(cls, path: str | os.PathLike, do_lower_case: bool | None = None) -> "WordPieceTokenizer":
        """Load BERT's ``vocab.txt`` (or a file written by :meth:`save_vocabulary`).

        ``do_lower_case=None`` reads the casing off the vocabulary: an uncased
        vocabulary (BERT's ``-uncased`` ones, or one trained uncased) holds no
        uppercase letter, a cased one does.  Lowercasing the input for a cased
        vocabulary would silently leave its capitalised entries unused.
        """
        vocab = load_vocab(path)
        if do_lower_case is None:
            do_lower_case = not vocab_is_cased(vocab)
        return cls(vocab, do_lower_case=do_lower_case, source=str(path))

    def save_vocabulary(self, directory: str | os.PathLike) -> Path:
        """Write ``vocab.txt`` into ``directory`` (created if needed); returns its path."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        return self.write_vocab_file(directory / "vocab.txt")

    def write_vocab_file(self, path: str | os.PathLike) -> Path:
        """Write the vocabulary to ``path``, one token per line, in BERT's vocab.txt format."""
        path = Path(path)
        # whole or not at all: a torn vocab.txt (a full disk) would no longer match the run's checkpoints
        write_whole(path, lambda f: f.write("".join(t + "\n" for t in self.vocab).encode("utf-8")))
        return path

    def __len__(self) -> int:
        return len(self.vocab)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def fingerprint(self) -> str:
        """SHA-256 of the vocabulary and the casing: two tokenizers with the same
        fingerprint give the same ids for every text (used as a cache key)."""
        h = hashlib.sha256(f"minibert-wordpiece-v1 lower={self.do_lower_case}\n".encode())
        h.update("\n".join(self.vocab).encode("utf-8"))
        return h.hexdigest()

    # ------------------------------------------------------------------ tokenizing
    def tokenize(self, text: str) -> list[str]:
        """Text -> WordPiece tokens, e.g. ``"UNwant\\u00e9d,running"`` -> ``un ##want ##ed , runn ##ing``."""
        tokens: list[str] = []
        for part, special in self._split_special(_check_text("text", text)):
            if special:
                tokens.append(part)
                continue
            for chunk in self.basic.chunks(part):
                for word in self.basic.split_chunk(chunk):
                    tokens.extend(self._wordpiece(word)[0])
        return tokens

    def tokenize_to_ids(self, text: str) -> list[int]:
        """``convert_tokens_to_ids(tokenize(text))``, only faster (no special tokens added)."""
        ids: list[int] = []
        for part, special in self._split_special(_check_text("text", text)):
            if special:
                ids.append(self.token_to_id[part])
                continue
            for chunk in self.basic.chunks(part):
                for word in self.basic.split_chunk(chunk):
                    ids.extend(self._wordpiece(word)[1])
        return ids

    def _split_special(self, text: str):
        """Yield (piece, is_special_token) so that "[MASK]" in the text stays one token."""
        if "[" not in text:
            yield text, False
            return
        for i, part in enumerate(self._special_re.split(text)):
            if part:
                yield part, i % 2 == 1

    def _wordpiece(self, word: str) -> tuple[list[str], list[int]]:
        """Greedy longest-match-first WordPiece for one word, memoised: (tokens, ids)."""
        hit = self._word_memo.get(word)
        if hit is not None:
            return hit
        pieces = self._wordpiece_uncached(word)
        result = (pieces, [self.token_to_id[p] for p in pieces])
        if len(self._word_memo) >= 1_000_000:
            self._word_memo.clear()
        self._word_memo[word] = result
        return result

    def _wordpiece_uncached(self, word: str) -> list[str]:
        if len(word) > MAX_CHARS_PER_WORD:
            return [UNK]
        vocab = self.token_to_id
        pieces: list[str] = []
        start = 0
        while start < len(word):
            # try the longest candidate first, then shorter ones
            end = min(len(word), start + self._max_piece_chars)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in vocab:
                    break
                end -= 1
            else:
                return [UNK]            # no piece fits here: the whole word is unknown
            pieces.append(piece)
            start = end
        return pieces

    # ------------------------------------------------------------------ ids
    def convert_tokens_to_ids(self, tokens: list[str]) -> list[int]:
        """Tokens -> ids; tokens not in the vocabulary map to the id of ``[UNK]``.  One token (a string) -> its
        id, as transformers' tokenizers do (not a list of its characters' ids)."""
        get, unk = self.token_to_id.get, self.unk_id
        if isinstance(tokens, str):
            return get(tokens, unk)
        if isinstance(tokens, bytes) or not hasattr(tokens, "__iter__"):
            raise TypeError(f"tokens must be a list of token strings, got {type(tokens).__name__}")
        return [get(t, unk) for t in tokens]

    def convert_ids_to_tokens(self, ids) -> list[str]:
        """Ids (any iterable of ints, e.g. a NumPy row) -> tokens."""
        n = len(self.vocab)
        if isinstance(ids, (str, bytes)):
            raise TypeError(f"ids must be a sequence of token ids (ints), got {type(ids).__name__}")
        if hasattr(ids, "tolist"):          # a NumPy, CuPy or PyTorch array: to host ints once
            ids = ids.tolist()
            ids = ids if isinstance(ids, list) else [ids]
        if not hasattr(ids, "__iter__"):
            raise TypeError(f"ids must be a sequence of token ids (ints), got {type(ids).__name__}")
        out = []
        for i in ids:
            if isinstance(i, (bool, np.bool_)):
                raise TypeError(f"token ids must be ints, got {i!r}")
            try:
                i = operator.index(i)       # ints of any kind, not floats
            except TypeError:
                raise TypeError(f"token ids must be ints, got {i!r} ({type(i).__name__})") from None
            if not 0 <= i < n:
                raise ValueError(f"token id {i} is outside the vocabulary (0..{n - 1}).")
            out.append(self.vocab[i])
        return out

    def encode(self, text_a: str, text_b: str | None = None, max_length: int | None = None) -> dict:
        """Model inputs for one text, ``[CLS] A [SEP]``, or a pair, ``[CLS] A [SEP] B [SEP]``.

        With ``max_length``, tokens are removed one at a time from the end of the
        longer of A and B (B when they tie) until the sequence fits, as google-research/bert
        and transformers' Python ``BertTokenizer`` do. (The Rust ``BertTokenizerFast`` shares
        the cut between equally long segments the other way round, so the two can differ by
        one token in each segment.)

        Returns:
            dict with ``input_ids``, ``token_type_ids`` (0 for ``[CLS]``, A and the first
            ``[SEP]``; 1 for B and its ``[SEP]``) and ``attention_mask`` (all 1): lists of int
            of equal length.
        """
        ids_a = self.tokenize_to_ids(_check_text("text_a", text_a))
        ids_b = self.tokenize_to_ids(_check_text("text_b", text_b)) if text_b is not None else None
        n_special = 2 if ids_b is None else 3
        if max_length is not None:
            if isinstance(max_length, (bool, np.bool_)) or not isinstance(max_length, (int, np.integer)):
                raise TypeError(f"max_length must be an int (or None), got {max_length!r}")
            if max_length < n_special:
                raise ValueError(f"max_length={max_length} cannot hold the {n_special} special tokens "
                                 f"of {'[CLS] A [SEP]' if ids_b is None else '[CLS] A [SEP] B [SEP]'}; "
                                 f"use max_length >= {n_special}.")
            budget = max_length - n_special
            if ids_b is None:
                del ids_a[budget:]
            else:
                while len(ids_a) + len(ids_b) > budget:
                    (ids_a if len(ids_a) > len(ids_b) else ids_b).pop()
        input_ids = [self.cls_id, *ids_a, self.sep_id]
        token_type_ids = [0] * len(input_ids)
        if ids_b is not None:
            input_ids += [*ids_b, self.sep_id]
            token_type_ids += [1] * (len(ids_b) + 1)
        return {"input_ids": input_ids, "token_type_ids": token_type_ids,
                "attention_mask": [1] * len(input_ids)}

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        """Ids -> text: tokens joined by spaces, ``##`` pieces glued to the piece before.

        Lowercasing, accents and the spacing around punctuation are not undone.
        """
        tokens = self.convert_ids_to_tokens(ids)
        if skip_special_tokens:
            tokens = [t for t in tokens if t not in SPECIAL_TOKENS]
        return " ".join(tokens).replace(" ##", "")


def train_wordpiece(texts_or_files: Iterable[str | os.PathLike], vocab_size: int, *,
                    do_lower_case: bool = True, min_frequency: int = 2, limit_alphabet: int = 1000,
                    num_unused: int = 99):
    """Learn a WordPiece vocabulary of at most ``vocab_size`` tokens (see :mod:`minibert.data.wordpiece_trainer`).

    Args:
        texts_or_files: strings of text, or ``pathlib.Path`` objects of UTF-8 text files,
            or a single one of either.
        vocab_size: the size of the vocabulary, special tokens included.
        do_lower_case: train an uncased vocabulary (lowercase, accents stripped).
        min_frequency: stop merging when the best pair is seen fewer times than this.
        limit_alphabet: keep at most this many distinct characters.
        num_unused: ``[unusedN]`` slots between ``[PAD]`` and ``[UNK]`` (see
            :func:`minibert.data.vocab.bert_special_layout`).

    Returns:
        a :class:`~minibert.data.tokenizer.WordPieceTokenizer`; its ``vocab`` lists, in order,
        the special tokens, the single characters (word-initial, then ``##`` forms) and the
        merged pieces in the order they were learned.
    """
    check_flag("do_lower_case", do_lower_case, "True (an uncased vocabulary) or False")     # before the training
    vocab = learn_vocab(texts_or_files, vocab_size, do_lower_case=do_lower_case, min_frequency=min_frequency,
                        limit_alphabet=limit_alphabet, num_unused=num_unused)
    return WordPieceTokenizer(vocab, do_lower_case=do_lower_case, source="trained vocabulary")
