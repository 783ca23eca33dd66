# slip: the control-character test comes before the whitespace test, so tab, newline and carriage return (category Cc) are deleted instead of becoming spaces, gluing words together
# names it: tab & deleted | newline & deleted | control & before & whitespace | whitespace & before & control | tab & control
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


def basic_tokenize(text, do_lower_case=True):
    """Text -> words and punctuation marks (BERT's BasicTokenizer).

    Args:
        text: a str, any length (possibly empty)
        do_lower_case: True for an uncased model: lowercase and strip accents

    Returns:
        a list of str, the words in order (no empty strings)
    """
    # TODO: steps a to e above.
    def is_punct(c):
        o = ord(c)
        if 33 <= o <= 47 or 58 <= o <= 64 or 91 <= o <= 96 or 123 <= o <= 126:
            return True
        return unicodedata.category(c).startswith("P")

    # a, b: clean the text character by character
    chars = []
    for ch in text:
        if ch == "\x00" or ch == "\ufffd":
            continue
        if unicodedata.category(ch).startswith("C"):  # control characters go
            continue
        elif ch in (" ", "\t", "\n", "\r") or unicodedata.category(ch) == "Zs":
            chars.append(" ")
        elif is_cjk(ord(ch)):
            chars.append(" " + ch + " ")
        else:
            chars.append(ch)

    # c: split on whitespace
    words = "".join(chars).split()

    result = []
    for word in words:
        # d: lowercase and strip the accents
        if do_lower_case:
            word = word.lower()
            word = "".join(c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn")
        # e: every punctuation mark is a word of its own
        current = ""
        for c in word:
            if is_punct(c):
                if current:
                    result.append(current)
                    current = ""
                result.append(c)
            else:
                current += c
        if current:
            result.append(current)
    return result


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
    # TODO: for each start, try end = len(word), len(word) - 1, ..., start + 1.
    if len(word) > max_chars:
        return [unk_token]
    pieces = []
    start = 0
    while start < len(word):
        end = len(word)
        piece = None
        while end > start:
            candidate = word[start:end]
            if start > 0:
                candidate = "##" + candidate
            if candidate in vocab:
                piece = candidate
                break
            end -= 1
        if piece is None:
            return [unk_token]  # no cut: the whole word is unknown
        pieces.append(piece)
        start = end
    return pieces
