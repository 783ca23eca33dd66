"""The two steps of BERT's tokenizer and their usual mistakes.

basic_tokenize: delete control characters, turn every whitespace character into
a space, put spaces around CJK ideographs, split on whitespace; for an uncased
model lowercase and strip accents (NFD, then drop the combining marks, category
Mn); split off every punctuation character (category P*, and every ASCII
character that is neither a letter nor a digit).  The right one is minibert's
own ``BasicTokenizer``.

wordpiece_word: at each position take the longest piece of the vocabulary that
matches there ("##" + the characters when the piece continues a word); a word
with a position where nothing matches, or longer than max_chars characters, is
[unk_token] as a whole.
"""
from __future__ import annotations

import string
import unicodedata

from minibert.data.basic_tokenizer import BasicTokenizer, is_control, is_punctuation, is_whitespace, strip_accents

from .table import Table


def _basic_right(text, do_lower_case=True):
    return BasicTokenizer(do_lower_case=do_lower_case).tokenize(text)


def _wordpiece(order="longest", prefix="continuation", unknown="word", strict_length=False, fixed=False):
    """wordpiece_word, or one of its usual mistakes.

    order: "longest" candidate first (right) or "shortest"; prefix: "continuation" (right),
    "none" (no "##" anywhere) or "all" ("##" on the first piece too); unknown: "word" (right),
    "rest" (the pieces found so far, then [UNK]) or "char" ([UNK] for that one character, then
    go on); strict_length: a word of exactly max_chars characters is [UNK] too; fixed: "[UNK]"
    and 100 written into the code instead of the arguments.
    """
    def wordpiece_word(word, vocab, unk_token="[UNK]", max_chars=100):
        if fixed:
            unk_token, max_chars = "[UNK]", 100
        if len(word) > max_chars or (strict_length and len(word) == max_chars):
            return [unk_token]
        pieces, start = [], 0
        while start < len(word):
            mark = {"continuation": "##" if start > 0 else "", "none": "", "all": "##"}[prefix]
            ends = range(len(word), start, -1) if order == "longest" else range(start + 1, len(word) + 1)
            end = next((e for e in ends if mark + word[start:e] in vocab), None)
            if end is not None:
                pieces.append(mark + word[start:end])
                start = end
            elif unknown == "word":
                return [unk_token]
            elif unknown == "rest":
                return pieces + [unk_token]
            else:
                pieces.append(unk_token)
                start += 1
        return pieces
    return wordpiece_word


def _chunks(text, split):
    """Steps 1-3: "right" (minibert's), "no_cjk" (cleaned and split, CJK left inside words),
    "space" (no cleaning, text.split(" ")) or "isspace" (whitespace decided by str.isspace() before
    the control characters are deleted, so the ones Python calls whitespace split words)."""
    if split == "space":
        return text.split(" ")
    if split == "isspace":
        return BasicTokenizer(do_lower_case=False).chunks("".join(" " if c.isspace() else c for c in text))
    if split == "no_cjk":
        kept = (c for c in text if not (c in "\x00\ufffd" or is_control(c)))
        return "".join(" " if is_whitespace(c) else c for c in kept).split()
    return BasicTokenizer(do_lower_case=False).chunks(text)


PUNCTUATION = {"right": is_punctuation,
               "unicode": lambda c: unicodedata.category(c).startswith("P"),
               "ascii": lambda c: c in string.punctuation,
               "none": lambda c: False}


def _split_punctuation(chunk, is_punct):
    words, current = [], ""
    for ch in chunk:
        if is_punct(ch):
            words += [current, ch] if current else [ch]
            current = ""
        else:
            current += ch
    return words + [current] if current else words


def _basic(split="right", accents="right", punctuation="right", lower_flag=True):
    """basic_tokenize with one usual mistake.

    split: see ``_chunks``; accents: "right", "kept" (lowercased only) or "ascii" (NFKD, then
    encode("ascii", "ignore"), which drops every non-Latin letter too); punctuation: a key of
    PUNCTUATION; lower_flag=False: lowercases and strips accents whatever do_lower_case says.
    """
    def basic_tokenize(text, do_lower_case=True):
        words = []
        for chunk in _chunks(text, split):
            if do_lower_case or not lower_flag:
                chunk = chunk.lower()
                if accents == "right":
                    chunk = strip_accents(chunk)
                elif accents == "ascii":
                    chunk = unicodedata.normalize("NFKD", chunk).encode("ascii", "ignore").decode()
            words += _split_punctuation(chunk, PUNCTUATION[punctuation])
        return words
    return basic_tokenize


TABLE = Table("wordpiece", basic_tokenize=_basic_right, wordpiece_word=_wordpiece())


def basic_case(name, hint, **flags):
    return TABLE.case(name, hint, basic_tokenize=_basic(**flags))


def wordpiece_case(name, hint, **flags):
    return TABLE.case(name, hint, wordpiece_word=_wordpiece(**flags))


PUNCT_RULE = ("a punctuation character is one of Unicode's category P* (unicodedata.category(ch) starts with 'P') "
              "OR any ASCII character that is not a letter, a digit or a space (codes 33-47, 58-64, 91-96, "
              "123-126)")

CJK = basic_case(
    "CJK ideographs not separated", "put a space on each side of every CJK ideograph (is_cjk(ord(ch))) before "
    "splitting on whitespace, so each one is a word of its own: '東京' -> '東', '京'", split="no_cjk")
SPACES = basic_case(
    "split on spaces only", "split on every kind of whitespace, not only ' ': first delete the control characters "
    "and turn every whitespace character (tab, newline, no-break space, category Zs) into a space, then "
    "text.split() with no argument", split="space")
ISSPACE = basic_case(
    "whitespace by str.isspace()", "str.isspace() also says yes to control characters that BERT deletes: the "
    "vertical tab \\x0b, the form feed \\x0c, \\x1c-\\x1f and \\x85 (category Cc) must vanish, joining their "
    "neighbours, not split the word; whitespace is ' ', '\\t', '\\n', '\\r' and category Zs only", split="isspace")
ACCENTS_KEPT = basic_case(
    "accents kept", "an uncased model strips accents after lowercasing: unicodedata.normalize('NFD', word), then "
    "drop the combining marks (unicodedata.category(c) == 'Mn'), so 'é' -> 'e'", accents="kept")
ACCENTS_ASCII = basic_case(
    "accents stripped by encoding to ASCII", "encode('ascii', 'ignore') deletes every letter that is not Latin "
    "(Greek, Cyrillic, CJK...) and NFKD rewrites characters like 'ﬁ': decompose with NFD and drop only the "
    "combining marks (category 'Mn')", accents="ascii")
NO_PUNCT = basic_case(
    "punctuation not split off", "split every punctuation character off as a word of its own: 'world!' -> "
    "'world', '!'", punctuation="none")
UNICODE_ONLY = basic_case(
    "ASCII symbols not split off", "BERT splits off $ + < = > ^ ` | ~ too, which Unicode calls symbols, not "
    "punctuation: " + PUNCT_RULE, punctuation="unicode")
ASCII_ONLY = basic_case(
    "only ASCII punctuation split off", "string.punctuation is ASCII only: '¿', '«', '—', '’' are punctuation "
    "too; " + PUNCT_RULE, punctuation="ascii")
CASED = basic_case(
    "lowercases a cased model's text", "with do_lower_case=False keep the case and the accents: lowercase and "
    "strip accents only when do_lower_case is True", lower_flag=False)

SHORTEST = wordpiece_case(
    "shortest match first", "try the LONGEST candidate first: end runs from len(word) down to start + 1, and "
    "the first candidate found in the vocabulary is taken", order="shortest")
NO_HASHES = wordpiece_case(
    "no ## on continuation pieces", "a piece that continues a word is looked up, and returned, as '##' + its "
    "characters: 'unwanted' -> 'un', '##want', '##ed'", prefix="none")
HASH_FIRST = wordpiece_case(
    "## on the first piece", "the first piece of a word has no '##': look up word[0:end] itself; only the "
    "pieces after it are '##' + characters", prefix="all")
UNK_REST = wordpiece_case(
    "pieces kept before [UNK]", "when no piece matches at some position, the WHOLE word is [unk_token]: "
    "return [unk_token] alone, not the pieces found so far followed by it", unknown="rest")
UNK_CHAR = wordpiece_case(
    "[UNK] for one character", "when no piece matches at some position, the WHOLE word is [unk_token]: "
    "return [unk_token] alone, do not skip the character and go on", unknown="char")
STRICT = wordpiece_case(
    "max_chars off by one", "only a word LONGER than max_chars is [unk_token] (len(word) > max_chars): a word of "
    "exactly max_chars characters is still cut into pieces", strict_length=True)
FIXED = wordpiece_case(
    "unk_token and max_chars written into the code", "use the unk_token and max_chars arguments, not '[UNK]' "
    "and 100 written into the code", fixed=True)


def _wordpiece_for_else(word, vocab, unk_token="[UNK]", max_chars=100):
    """The same search with the end positions counted up from the longest possible piece."""
    if len(word) > max_chars:
        return [unk_token]
    longest = max(len(t[2:]) if t.startswith("##") else len(t) for t in vocab)
    pieces, start = [], 0
    while start < len(word):
        for end in range(min(len(word), start + longest), start, -1):
            piece = ("##" if start else "") + word[start:end]
            if piece in vocab:
                break
        else:
            return [unk_token]
        pieces.append(piece)
        start = end
    return pieces


def _basic_lower_first(text, do_lower_case=True):
    """Lowercase and strip accents of the whole text first, then clean and split."""
    if do_lower_case:
        text = "".join(c for c in unicodedata.normalize("NFD", text.lower()) if unicodedata.category(c) != "Mn")
    return BasicTokenizer(do_lower_case=False).tokenize(text)


TABLE.variant("candidates no longer than the vocabulary's longest piece", wordpiece_word=_wordpiece_for_else)
TABLE.variant("the whole text lowercased first", basic_tokenize=_basic_lower_first)
