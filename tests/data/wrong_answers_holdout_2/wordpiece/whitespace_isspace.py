# slip: whitespace is decided with str.isspace(), so control characters that Python calls whitespace (vertical tab \x0b, form feed \x0c, \x1c-\x1f, \x85) become a space and split the word, where BERT deletes them as control characters (only space, tab, newline, carriage return and Zs are whitespace)
# names it: isspace | vertical tab | form feed | control character & not whitespace | control & deleted | category Cc
"""Exercise: BERT's tokenizer, text -> words -> WordPiece pieces.

BERT reads text in two steps; write both, exactly as BERT (and minibert's
``WordPieceTokenizer``) does them.

1. basic_tokenize(text, do_lower_case): text -> words and punctuation marks.

   a. clean: delete NUL (U+0000), U+FFFD and every control character (Unicode
      category C*, unicodedata.category(ch) starts with "C") except tab, newline
      and carriage return; turn every whitespace character (space, tab,
      newline, carriage return, and category Zs such as the no-break space)
      into a space;
   b. put a space on each side of every CJK ideograph (is_cjk(ord(ch)), imported
      below), so each is a word of its own;
   c. split on whitespace;
   d. if do_lower_case: lowercase each word and strip its accents: decompose
      it (unicodedata.normalize("NFD", word)) and drop the combining marks,
      the characters of category "Mn", so "é" -> "e";
   e. split every punctuation character off as a word of its own.  Punctuation
      is Unicode's category P* AND every ASCII character that is not a letter
      or a digit (codes 33-47, 58-64, 91-96, 123-126): BERT splits "$", "+",
      "=", "<" too.

   "Crème brûlée, $3.50!" -> ['creme', 'brulee', ',', '$', '3', '.', '50', '!']

2. wordpiece_word(word, vocab, unk_token, max_chars): one word -> its pieces.
   Greedy, longest match first: at the current position take the LONGEST piece
   of the vocabulary that matches there, then go on after it.  A piece that
   continues the word is looked up (and returned) as "##" + its characters;
   the first piece has no "##".  If at some position no piece matches, the
   WHOLE word is [unk_token]; a word longer than max_chars characters is
   [unk_token] without a search.

   With un, ##want, ##ed in the vocabulary: "unwanted" -> ['un', '##want', '##ed'].

Check your work with:   python -m exercises check wordpiece
"""
import unicodedata

from minibert.data.basic_tokenizer import is_cjk  # the CJK ideograph blocks: a table of code point ranges


def _is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def basic_tokenize(text, do_lower_case=True):
    """Text -> words and punctuation marks (BERT's BasicTokenizer).

    Args:
        text: a str, any length (possibly empty)
        do_lower_case: True for an uncased model: lowercase and strip accents

    Returns:
        a list of str, the words in order (no empty strings)
    """
    # a. clean
    cleaned = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD:
            continue
        if ch.isspace():
            cleaned.append(" ")
            continue
        if unicodedata.category(ch).startswith("C"):
            continue
        # b. CJK ideographs are words of their own
        if is_cjk(cp):
            cleaned.append(" " + ch + " ")
        else:
            cleaned.append(ch)
    # c. split on whitespace
    words = "".join(cleaned).split()
    out = []
    for word in words:
        # d. lowercase and strip accents
        if do_lower_case:
            word = word.lower()
            word = "".join(c for c in unicodedata.normalize("NFD", word)
                           if unicodedata.category(c) != "Mn")
        # e. split off punctuation
        current = ""
        for c in word:
            if _is_punctuation(c):
                if current:
                    out.append(current)
                    current = ""
                out.append(c)
            else:
                current += c
        if current:
            out.append(current)
    return out


def wordpiece_word(word, vocab, unk_token="[UNK]", max_chars=100):
    """One word -> its WordPiece pieces, greedy longest match first.

    Args:
        word: one word of basic_tokenize's output (no whitespace in it)
        vocab: the pieces, a set of str (ask only ``piece in vocab``)
        unk_token: what a word with no cut becomes
        max_chars: a word longer than this is [unk_token] without a search

    Returns:
        a list of str: the pieces ("##" on every piece but the first), or [unk_token]
    """
    if len(word) > max_chars:
        return [unk_token]
    pieces = []
    start = 0
    while start < len(word):
        found = None
        for end in range(len(word), start, -1):
            piece = word[start:end]
            if start > 0:
                piece = "##" + piece
            if piece in vocab:
                found = piece
                break
        if found is None:
            return [unk_token]
        pieces.append(found)
        start = end
    return pieces
