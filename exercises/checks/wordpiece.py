"""BERT's tokenizer in two steps, compared with minibert's own on many texts and words.

Each line of the report is one group of inputs (whitespace, accents,
punctuation, CJK, the cased mode; whole words, cut words, unknown words, long
words, the arguments), and the pipeline of the two functions against
``WordPieceTokenizer.tokenize`` on whole sentences.  A failure shows the first
input whose result differs; its hint is that of the usual mistake (from
``exercises/cases/wordpiece.py``) that gives the student's results on the whole
group, or else on that input.
"""
from __future__ import annotations

from minibert.data.basic_tokenizer import BasicTokenizer
from minibert.data.tokenizer import WordPieceTokenizer

from ..calls import call_each
from ..cases import wordpiece as cases
from ..harness import touch
from ..report import Abort, Report

T = cases.TABLE
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
LETTERS = "abcdefghijklmnoprstuvwxyz"          # no "q": a word with a q has no cut
PIECES = ["un", "##want", "##ed", "want", "ed", "the", "run", "##ning", "token", "##ization", "##iz",
          "##ation", "play", "##ing", "ta", "##aq", ".", ",", "!", "'"]
VOCAB = SPECIAL + list(LETTERS) + ["##" + c for c in LETTERS] + PIECES

BASIC_GROUPS = [
    ("whitespace and control characters", True, [
        "hello world", "  many   spaces  here ", "", "   ", "tabs\tand\nnewlines\r\nhere",
        "no\u00a0break and\u3000ideographic\u2003spaces", "zero\u200bwidth", "bell\x07 nul\x00l repl\ufffdaced",
        "vertical\x0btab form\x0cfeed\x1cand\x85next"]),
    ("lowercasing and accents", True, [
        "Hello WORLD", "Crème Brûlée", "Zürich naïve café", "ÅNGSTRÖM", "Ελληνικά", "Привет Мир", "\ufb01ne"]),
    ("punctuation split off", True, [
        "Hello, world!", "(ABCs).", "don't stop", "x+=1", "costs $3.50", "a<b>c=d", "2^10 | `code` ~home",
        "¿Qué tal?", "«quoted»", "em—dash…", "object’s"]),
    ("CJK ideographs one word each", True, ["東京 means Tokyo", "我爱你", "mixed日本語text", "ひらがな カタカナ 한국어"]),
    ("do_lower_case=False keeps case and accents", False, [
        "Hello WORLD", "Crème Brûlée costs $3.50!", "Ελληνικά", "東京 Tokyo", "tabs\tand ¿punctuation?"]),
]

WORD_GROUPS = [
    ("a word in the vocabulary is one piece", {}, ["the", "want", "token", "play", "un", "z"]),
    ("longest match first, ## on later pieces", {}, [
        "unwanted", "running", "tokenization", "playing", "plays", "wanted", "thez"]),
    ("no cut at some position: [UNK] for the word", {}, ["qu", "unwantedq", "unqwanted", "q", "taq"]),
    ("max_chars: only longer words are [UNK]", {}, ["a" * 100, "ab" * 50, "a" * 101, "want" * 30]),
    ("other unk_token and max_chars", None, None),
]
# (word, arguments, the pieces): minibert's tokenizer fixes both arguments, so these are written out
ARGUMENTS = [("qu", {"unk_token": "<unk>"}, ["<unk>"]), ("unwantedq", {"unk_token": "<unk>"}, ["<unk>"]),
             ("unwanted", {"max_chars": 8}, ["un", "##want", "##ed"]), ("unwanteds", {"max_chars": 8}, ["[UNK]"]),
             ("token", {"max_chars": 4}, ["[UNK]"]), ("a" * 150, {"max_chars": 200}, ["a"] + ["##a"] * 149)]

# the hint of a failure that no usual mistake explains
RULES = {"basic_tokenize": "follow steps a to e of the stub's docstring in order; print basic_tokenize of the "
                           "text above, and compare it with the expected list word by word",
         "wordpiece_word": "at each position try end = len(word), len(word) - 1, ..., start + 1 and take the "
                           "first piece found; compare your pieces with the expected ones one by one"}

SENTENCES = ["Unwanted running, tokenization!", "The QUEUE plays.", "Crème brûlée\twanted; 東京",
             "  playing's  the token ", ""]


def _check_basic(r: Report) -> None:
    for what, lower, texts in BASIC_GROUPS:
        calls = [((t,), {"do_lower_case": lower}) for t in texts]
        _group(r, "basic_tokenize", what, calls, [BasicTokenizer(do_lower_case=lower).tokenize(t) for t in texts])


def _check_words(r: Report) -> None:
    reference = WordPieceTokenizer(VOCAB)
    for what, kwargs, words in WORD_GROUPS:
        if words is None:
            calls = [((w, set(VOCAB)), kw) for w, kw, _ in ARGUMENTS]
            want = [pieces for _, _, pieces in ARGUMENTS]
        else:
            calls = [((w, set(VOCAB)), kwargs) for w in words]
            want = [reference.tokenize(w) for w in words]
        _group(r, "wordpiece_word", what, calls, want)


def _group(r: Report, func: str, what: str, calls, want) -> bool:
    """One line: ``func`` on every call of ``calls`` gives ``want``; a FAIL shows the first that does not."""
    got = [_words(r, func, args, res) for (args, _), res in zip(calls, call_each(r, func, calls))]
    bad = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), None)
    line = f"{func}: {what}"
    if bad is None:
        r.ok(f"{line} ({len(calls)} {'texts' if func == 'basic_tokenize' else 'words'})")
        touch(T.each(_outputs(func, calls), of=func, mutants=True))   # the student copy's recording
        return True
    args, kwargs = calls[bad]
    shown = ", ".join([_show(args[0])] + [f"{k}={v!r}" for k, v in kwargs.items() if k != "do_lower_case"])
    r.fail(f"{line}: {func}({shown}) gave {_show(got[bad])}, expected {_show(want[bad])}",
           _recognise(func, calls, got, bad) or RULES[func])
    return False


def _words(r: Report, func: str, args, result) -> list:
    """The student's result as a list of str, or a FAIL that says what came back instead."""
    if isinstance(result, (list, tuple)) and all(isinstance(w, str) for w in result):
        return list(result)
    r.fail(f"{func}({_show(args[0])}) returned {_show(result)}, not a list of str",
           "return a list of strings, e.g. ['hello', ',', 'world']" if func == "basic_tokenize" else
           "return a list of strings, the pieces, e.g. ['un', '##want', '##ed']")
    raise Abort


def _recognise(func: str, calls, got, bad):
    """The hint of the first case or mutant that gives ``got`` on all ``calls``, else of the first case
    that gives it on call ``bad``; or None."""
    results = [(o.case, o.value) for o in T.each(_outputs(func, calls), of=func, mutants=True) if o.raised is None]
    return next((case.hint for case, theirs in results if theirs == got), None) or next(
        (case.hint for case, theirs in results if not case.mutant and theirs[bad] == got[bad]), None)


def _outputs(func: str, calls):
    return lambda m: [_quiet(getattr(m, func), args, kwargs) for args, kwargs in calls]


def _quiet(func, args, kwargs):
    try:
        return func(*[set(a) if isinstance(a, set) else a for a in args], **kwargs)
    except Exception:
        return None


def _check_sentences(r: Report) -> None:
    """basic_tokenize, then wordpiece_word on each word: minibert's WordPieceTokenizer.tokenize."""
    reference = WordPieceTokenizer(VOCAB)
    words = [_words(r, "basic_tokenize", (s,), res)
             for s, res in zip(SENTENCES, call_each(r, "basic_tokenize", [((s,), {}) for s in SENTENCES]))]
    flat = [w for ws in words for w in ws]
    calls = [((w, set(VOCAB)), {}) for w in flat]
    pieces = iter([_words(r, "wordpiece_word", args, res) for (args, _), res in
                   zip(calls, call_each(r, "wordpiece_word", calls))])
    got = [[p for _ in ws for p in next(pieces)] for ws in words]
    bad = next((i for i, s in enumerate(SENTENCES) if got[i] != reference.tokenize(s)), None)
    line = "both steps together = minibert's WordPieceTokenizer.tokenize"
    if bad is None:
        r.ok(f"{line} ({len(SENTENCES)} sentences)")
    else:
        r.fail(f"{line}: {_show(SENTENCES[bad])} gave {_show(got[bad])}, expected "
               f"{_show(reference.tokenize(SENTENCES[bad]))}",
               "this follows from the failures above: fix them first" if r.failures else
               "each function alone passed on the inputs above but not on these sentences: compare the two "
               "lists word by word")


def _show(value, limit: int = 60) -> str:
    """A value as Python writes it, shortened: a long string or list ends in '...' and its length."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:20]!r}... ({len(value)} characters)"
    if isinstance(value, list) and len(repr(value)) > limit:
        head = repr(value[:6])[:-1]
        return f"{head}, ...] ({len(value)} items)"
    return repr(value)


# what each part checks: a notebook checks one function at a time (checks/__init__.py)
PARTS = ((("basic_tokenize",), _check_basic), (("wordpiece_word",), _check_words),
         (("basic_tokenize", "wordpiece_word"), _check_sentences))
