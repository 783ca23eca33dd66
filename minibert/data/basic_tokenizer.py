"""BERT's "basic" tokenization: raw text -> words and punctuation marks.

This is the first of BERT's two tokenization steps (the second, WordPiece,
lives in :mod:`minibert.data.tokenizer`). For each piece of text it

1. drops control characters, NUL and U+FFFD, and turns every whitespace
   character into a plain space ("text cleaning");
2. puts spaces around CJK ideographs, so each one becomes a word of its own
   (Chinese and Japanese are not written with spaces between words);
3. splits on whitespace;
4. for an uncased model, lowercases each word and strips accents (NFD
   decomposition, then every combining mark, category ``Mn``, is dropped);
5. splits each word before and after every punctuation character.

The result is the same as the ``BasicTokenizer`` of google-research/bert
and of Hugging Face transformers. Two tricks make it fast:

* steps 1 and 2 are one ``str.translate`` call with a table that fills itself
  in lazily, one entry per distinct code point ever seen;
* steps 4 and 5 only depend on the whitespace-delimited chunk, so the result
  for each distinct chunk is memoised (natural text repeats its words a lot).
"""
from __future__ import annotations

import re
import unicodedata

__all__ = ["BasicTokenizer", "is_control", "is_whitespace", "is_punctuation", "is_cjk", "strip_accents"]


def is_whitespace(ch: str) -> bool:
    """True for the characters BERT treats as spaces: space, tab, LF, CR and category Zs."""
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def is_control(ch: str) -> bool:
    """True for characters BERT deletes: every category C* character except tab, LF and CR."""
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def is_punctuation(ch: str) -> bool:
    """True for Unicode punctuation (category P*) and for *every* non-alphanumeric printable
    ASCII character: BERT also splits on ``$ + < = > ^ ` | ~``, which Unicode calls symbols."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


# The CJK Unified Ideographs blocks (and their extensions and compatibility forms).
# Hangul, Hiragana and Katakana are deliberately not here: BERT leaves them alone.
_CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)


def is_cjk(cp: int) -> bool:
    """True if the code point ``cp`` is a CJK ideograph."""
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def strip_accents(text: str) -> str:
    """Remove accents: decompose (NFD) and drop the combining marks, so "é" -> "e"."""
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


class _CleanTable(dict):
    """A ``str.translate`` table for steps 1 and 2, computed one code point at a time.

    ``str.translate`` looks every character up in this dict; on a miss Python calls
    ``__missing__``, which classifies the character once and remembers the answer.
    """

    def __missing__(self, cp: int):
        ch = chr(cp)
        if cp == 0 or cp == 0xFFFD or is_control(ch):
            value = None                 # delete it
        elif is_whitespace(ch):
            value = " "
        elif is_cjk(cp):
            value = f" {ch} "            # a word of its own
        else:
            value = ch
        self[cp] = value
        return value


# ASCII characters that text cleaning deletes (C0 controls other than \t \n \r, and DEL).
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# In an ASCII chunk, runs of letters and digits survive and every other character is
# punctuation (see is_punctuation), so one regex does step 5.
_ASCII_WORD_OR_PUNCT = re.compile(r"[A-Za-z0-9]+|[^A-Za-z0-9]")


class BasicTokenizer:
    """Splits text into words and punctuation marks exactly as BERT does.

    Args:
        do_lower_case: lowercase and strip accents (BERT "uncased" models).
        cache_size: the most chunks to memoise before the memo is emptied.
    """

    def __init__(self, do_lower_case: bool = True, cache_size: int = 1_000_000):
        self.do_lower_case = do_lower_case
        self.cache_size = cache_size
        self._table = _CleanTable()
        self._chunk_memo: dict[str, list[str]] = {}

    def clean(self, text: str) -> str:
        """Steps 1 and 2: drop control characters, normalise whitespace, space out CJK."""
        if text.isascii():
            # fast path: for ASCII only the C0 controls and \t \n \r need work
            return _ASCII_CONTROL.sub("", text) if _ASCII_CONTROL.search(text) else text
        return text.translate(self._table)

    def chunks(self, text: str) -> list[str]:
        """Steps 1-3: the whitespace-delimited chunks of ``text``."""
        # After clean() the only whitespace left is " ", \t, \n, \r (ASCII) or the
        # space that replaced a Zs character, so str.split() splits exactly there.
        return self.clean(text).split()

    def split_chunk(self, chunk: str) -> list[str]:
        """Steps 4 and 5 for one chunk (no whitespace inside), memoised."""
        words = self._chunk_memo.get(chunk)
        if words is None:
            words = self._split_chunk_uncached(chunk)
            if len(self._chunk_memo) >= self.cache_size:
                self._chunk_memo.clear()
            self._chunk_memo[chunk] = words
        return words

    def tokenize(self, text: str) -> list[str]:
        """Text -> words and punctuation marks, e.g. ``"Hello, wörld!"`` -> ``hello , world !``."""
        out: list[str] = []
        for chunk in self.chunks(text):
            out.extend(self.split_chunk(chunk))
        return out

    def _split_chunk_uncached(self, chunk: str) -> list[str]:
        if self.do_lower_case:
            chunk = chunk.lower()
            if not chunk.isascii():
                chunk = strip_accents(chunk)
        if chunk.isascii():
            return _ASCII_WORD_OR_PUNCT.findall(chunk)
        words: list[str] = []
        current: list[str] = []
        for ch in chunk:
            if is_punctuation(ch):
                if current:
                    words.append("".join(current))
                    current = []
                words.append(ch)
            elif ch.isspace():           # lowercasing or NFD can, rarely, leave a space
                if current:
                    words.append("".join(current))
                    current = []
            else:
                current.append(ch)
        if current:
            words.append("".join(current))
        return words
