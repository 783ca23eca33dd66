"""Solution: BERT's basic tokenizer, and WordPiece for one word."""
import unicodedata

from minibert.data.basic_tokenizer import is_cjk


def _is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True                                   # every ASCII symbol, $ + < = > ^ ` | ~ included
    return unicodedata.category(ch).startswith("P")


def _clean(text):
    out = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or (ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")):
            continue                                  # control characters are deleted
        if ch in " \t\n\r" or unicodedata.category(ch) == "Zs":
            out.append(" ")
        elif is_cjk(cp):
            out.append(f" {ch} ")
        else:
            out.append(ch)
    return "".join(out)


def basic_tokenize(text, do_lower_case=True):
    words = []
    for chunk in _clean(text).split():
        if do_lower_case:
            chunk = unicodedata.normalize("NFD", chunk.lower())
            chunk = "".join(c for c in chunk if unicodedata.category(c) != "Mn")
        current = ""
        for ch in chunk:
            if _is_punctuation(ch) or ch.isspace():
                if current:
                    words.append(current)
                current = ""
                if not ch.isspace():
                    words.append(ch)
            else:
                current += ch
        if current:
            words.append(current)
    return words


def wordpiece_word(word, vocab, unk_token="[UNK]", max_chars=100):
    if len(word) > max_chars:
        return [unk_token]
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):      # the longest candidate first
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
        else:
            return [unk_token]                        # nothing fits here: the whole word is unknown
        pieces.append(piece)
        start = end
    return pieces
