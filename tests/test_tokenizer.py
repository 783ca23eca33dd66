"""The WordPiece tokenizer: BERT's own test vectors, parity with transformers, training, errors."""
from __future__ import annotations

import numpy as np
import pytest

from data_helpers import bert_vocab_path, wikitext_dir
from minibert.data.basic_tokenizer import BasicTokenizer, is_control, is_punctuation, is_whitespace
from minibert.data.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer, load_vocab, train_wordpiece


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def bert_tok():
    return WordPieceTokenizer.from_vocab_file(bert_vocab_path())


@pytest.fixture(scope="module")
def hf_fast():
    transformers = pytest.importorskip("transformers")
    return transformers.BertTokenizerFast(str(bert_vocab_path()), do_lower_case=True)


@pytest.fixture(scope="module")
def hf_python():
    """transformers' pure-Python BERT tokenizer (``BertTokenizerLegacy`` in transformers 5,
    ``BertTokenizer`` before, when ``BertTokenizer`` was not yet the Rust one)."""
    pytest.importorskip("transformers")
    try:
        from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy as cls
    except ImportError:
        from transformers import BertTokenizer as cls
    return cls(str(bert_vocab_path()), do_lower_case=True)


# The vocabulary of google-research/bert's tokenization_test.py, as it is: tokenizing needs
# only [UNK] ([PAD] and [MASK] are required where a batch is padded or masked).
GOOGLE_VOCAB = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing", ","]


@pytest.fixture
def google_tok():
    return WordPieceTokenizer(GOOGLE_VOCAB)


# --------------------------------------------------------------------------- BERT's test vectors
def test_google_full_tokenizer(google_tok):
    assert google_tok.tokenize("UNwant\u00E9d,running") == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert google_tok.convert_tokens_to_ids(google_tok.tokenize("UNwant\u00E9d,running")) == [7, 4, 5, 10, 8, 9]


def test_google_wordpiece(google_tok):
    assert google_tok.tokenize("") == []
    assert google_tok.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert google_tok.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]


def test_google_basic_tokenizer():
    lower, cased = BasicTokenizer(do_lower_case=True), BasicTokenizer(do_lower_case=False)
    assert lower.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["hello", "!", "how", "are", "you", "?"]
    assert lower.tokenize("H\u00E9llo") == ["hello"]
    assert cased.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["HeLLo", "!", "how", "Are", "yoU", "?"]
    assert lower.tokenize("ah\u535A\u63A8zz") == ["ah", "\u535A", "\u63A8", "zz"]


def test_google_character_classes():
    for ch in " \t\r\n\u00A0":
        assert is_whitespace(ch)
    assert not is_whitespace("A") and not is_whitespace("-")
    assert is_control("\u0005")
    for ch in "A \t\r\U0001F4A9":
        assert not is_control(ch)
    for ch in "-$`.":
        assert is_punctuation(ch)
    assert not is_punctuation("A") and not is_punctuation(" ")


# --------------------------------------------------------------------------- parity with transformers
TRICKY = {
    "accents": "Héllo wörld, naïve café résumé Ångström",
    "combining accent": "e\u0301t\u00e9 \u0301abc",
    "cjk": "ah博推zz 你好世界 豈更",
    "kana and hangul": "カタカナ ﾊﾝｶｸ 한국어",
    "emoji": "emoji 😀 test 👍🏽!",
    "control chars": "a\x00b\x07c\x1cd\x85e\x7ff",
    "zero width and separators": "\u200bzero\u2028line\u00a0nbsp\u3000ideographic",
    "replacement char": "\ufffd replacement",
    "150-char word": "x" * 150,
    "101-char word": "y" * 101,
    "100-char word": "z" * 100,
    "empty": "",
    "only whitespace": "   \t\n \r\n ",
    "ascii symbols": "$5 + 3 = <8> ^_^ `x` | ~ #1 @home",
    "apostrophes and numbers": "don't stop 3.14159 1,000,000",
    "special tokens in text": "[CLS] the [MASK] sat [SEP] a[MASK]b [mask]",
    "turkish and ligatures": "İstanbul ǅ ß ﬁ",
    "long mixed": "UNwant\u00E9d,running — “quoted” (brackets) [x] {y} …",
}


@pytest.mark.parametrize("name", list(TRICKY))
def test_tricky_strings_match_transformers(name, bert_tok, hf_fast, hf_python):
    text = TRICKY[name]
    ours = bert_tok.encode(text)["input_ids"]
    assert ours == hf_fast(text)["input_ids"]
    assert ours == hf_python(text)["input_ids"]
    assert bert_tok.tokenize(text) == hf_fast.tokenize(text)


def test_tricky_strings_expected_tokens(bert_tok):
    assert bert_tok.tokenize("x" * 150) == ["[UNK]"]
    assert bert_tok.tokenize("") == [] and bert_tok.tokenize(" \t\n ") == []
    assert bert_tok.tokenize("a\x00b\x07c") == bert_tok.tokenize("abc")
    assert bert_tok.tokenize("Ångström") == bert_tok.tokenize("angstrom")
    assert bert_tok.tokenize("the [MASK] sat") == ["the", "[MASK]", "sat"]
    assert bert_tok.tokenize("ah博推zz") == ["ah", "博", "[UNK]", "z", "##z"]   # one word per ideograph


def test_wikitext_valid_parity(bert_tok, hf_fast, hf_python):
    """Every line of WikiText-2's validation split gets exactly transformers' ids."""
    lines = (wikitext_dir() / "wiki.valid.raw").read_text(encoding="utf-8").split("\n")
    assert len(lines) == 3761                    # 3,760 lines and the text after the last newline
    ours = [bert_tok.tokenize_to_ids(line) for line in lines]
    fast = hf_fast(lines, add_special_tokens=False)["input_ids"]
    differ = [i for i, (a, b) in enumerate(zip(ours, fast)) if a != b]
    assert not differ, f"{len(differ)} lines differ from BertTokenizerFast, first: line {differ[0] + 1}"
    python = [hf_python.encode(line, add_special_tokens=False) for line in lines]
    assert ours == python
    assert sum(map(len, ours)) > 200_000


@pytest.mark.parametrize("max_length", [None, 8, 9, 10, 13, 30, 512])
def test_encode_pairs_match_transformers(bert_tok, hf_fast, hf_python, max_length):
    """Pairs and truncation as transformers' Python BertTokenizer (and google-research/bert's
    _truncate_seq_pair) do it. The Rust BertTokenizerFast agrees except when the cut has to be
    shared between two equally long segments: then it removes the odd token from A, we from B."""
    a = "The quick brown fox jumps over the lazy dog near the riverbank."
    b = "Unbelievably, it ran."
    kwargs = {"truncation": "longest_first", "max_length": max_length} if max_length else {}
    for x, y in [(a, b), (b, a), (a, None)]:
        ours = bert_tok.encode(x, y, max_length=max_length)
        theirs = hf_python(x, y, return_token_type_ids=True, return_attention_mask=True, **kwargs)
        for key in ("input_ids", "token_type_ids", "attention_mask"):
            assert ours[key] == list(theirs[key]), (x, y, key)
        if max_length in (None, 13, 30, 512):
            assert ours["input_ids"] == hf_fast(x, y, **kwargs)["input_ids"]


def test_encode_layout(bert_tok):
    enc = bert_tok.encode("hello world", "goodbye")
    tokens = bert_tok.convert_ids_to_tokens(enc["input_ids"])
    assert tokens == ["[CLS]", "hello", "world", "[SEP]", "goodbye", "[SEP]"]
    assert enc["token_type_ids"] == [0, 0, 0, 0, 1, 1]
    assert enc["attention_mask"] == [1] * 6
    assert bert_tok.cls_id == 101 and bert_tok.sep_id == 102 and bert_tok.mask_id == 103
    assert bert_tok.pad_id == 0 and bert_tok.unk_id == 100


def test_decode(bert_tok):
    ids = bert_tok.encode("Unbelievably, it ran!")["input_ids"]
    assert bert_tok.decode(ids) == "[CLS] unbelievably , it ran ! [SEP]"
    assert bert_tok.decode(ids, skip_special_tokens=True) == "unbelievably , it ran !"


def test_save_and_reload(bert_tok, tmp_path):
    path = bert_tok.save_vocabulary(tmp_path / "out")
    assert path.read_text(encoding="utf-8") == bert_vocab_path().read_text(encoding="utf-8")
    again = WordPieceTokenizer.from_vocab_file(path)
    assert again.vocab == bert_tok.vocab and again.fingerprint() == bert_tok.fingerprint()


def test_memo_does_not_change_results(bert_tok):
    text = "Tokenizing the same text twice gives the same tokens, ünïcödé or not."
    assert bert_tok.tokenize(text) == bert_tok.tokenize(text)
    fresh = WordPieceTokenizer(bert_tok.vocab)
    assert fresh.tokenize_to_ids(text) == bert_tok.convert_tokens_to_ids(bert_tok.tokenize(text))


# --------------------------------------------------------------------------- training
CORPUS = ["low lower lowest", "new newer newest", "wide wider widest", "low new wide"] * 3


def test_train_small_vocabulary():
    tok = train_wordpiece(CORPUS, vocab_size=130, min_frequency=2)
    v = tok.vocab
    # BERT's places for the special tokens
    assert v[0] == "[PAD]" and v[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert v[1] == "[unused0]" and v[99] == "[unused98]"
    # every character, word-initial and continuation, then merges
    assert {"l", "n", "w", "##o", "##e"} <= set(v)
    assert "low" in v and "##est" in v
    assert len(v) <= 130
    assert tok.tokenize("lowest") == ["lowest"]
    assert "[UNK]" not in tok.tokenize(" ".join(CORPUS))


def test_train_is_deterministic_and_compact_layout():
    a = train_wordpiece(CORPUS, vocab_size=25, num_unused=0)
    b = train_wordpiece(list(CORPUS), vocab_size=25, num_unused=0)
    assert a.vocab == b.vocab
    assert a.vocab[:5] == list(SPECIAL_TOKENS)
    assert len(a.vocab) == 25
    # merging stops early once every word is a single piece: no pair is left to merge
    full = train_wordpiece(CORPUS, vocab_size=1000, num_unused=0, min_frequency=1)
    assert len(full.vocab) < 1000
    assert all(full.tokenize(w) == [w] for w in " ".join(CORPUS).split())


def test_train_from_files(tmp_path):
    f = tmp_path / "text.txt"
    f.write_text("\n".join(CORPUS), encoding="utf-8")
    from_file = train_wordpiece([f], vocab_size=60, num_unused=0)
    from_text = train_wordpiece(CORPUS, vocab_size=60, num_unused=0)
    assert from_file.vocab == from_text.vocab


def test_train_on_builtin_corpus(tmp_path):
    from minibert.data import builtin_corpus
    corpus = builtin_corpus(cache_dir=False)     # no cache file outside the test's folders
    sentences = [s for d in corpus.documents[:300] for s in d]
    tok = train_wordpiece(sentences, vocab_size=2000)
    assert len(tok.vocab) == 2000
    tokens = [t for s in sentences for t in tok.tokenize(s)]
    assert tokens.count("[UNK]") / len(tokens) < 0.001
    tok.save_vocabulary(tmp_path)
    assert WordPieceTokenizer.from_vocab_file(tmp_path / "vocab.txt").vocab == tok.vocab


def test_train_errors():
    with pytest.raises(ValueError, match="vocab_size=50"):
        train_wordpiece(CORPUS, vocab_size=50)           # not even room for the 104 specials
    with pytest.raises(ValueError, match="no words"):
        train_wordpiece(["", "  \n"], vocab_size=500)


# --------------------------------------------------------------------------- bad input
def test_missing_vocab_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        WordPieceTokenizer.from_vocab_file(tmp_path / "nope.txt")


def test_vocab_without_special_tokens(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\nhello\n##s\n", encoding="utf-8")
    tok = WordPieceTokenizer.from_vocab_file(path)          # enough to tokenize
    assert tok.tokenize("hellos [MASK]") == ["hello", "##s", "[UNK]", "[UNK]", "[UNK]"]
    with pytest.raises(ValueError) as e:
        tok.encode("hello")                                  # [CLS] hello [SEP]
    msg = str(e.value)
    assert str(path) in msg and "no [CLS] token" in msg and "train_wordpiece" in msg
    path.write_text("[PAD]\nhello\n##s\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab.txt: no \[UNK\] token in the vocabulary, which tokenizing"):
        WordPieceTokenizer.from_vocab_file(path)


def test_vocab_with_bad_bytes_and_duplicates(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"[PAD]\n[UNK]\nab\xffc\n")
    with pytest.raises(ValueError, match=r"bad.txt: byte offset 14 \(line 3, column 3\)"):
        load_vocab(bad)
    dup = tmp_path / "dup.txt"
    dup.write_text("[PAD]\nx\ny\nx\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"dup.txt, line 4: token 'x' is already on line 2"):
        load_vocab(dup)
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="empty"):
        load_vocab(empty)


def test_encode_max_length_too_small(google_tok):
    with pytest.raises(ValueError, match="max_length=2 .*3 special tokens"):
        google_tok.encode("want", "want", max_length=2)
    assert google_tok.encode("want want", max_length=3)["input_ids"] == [1, 3, 2]


def test_ids_out_of_range(google_tok):
    with pytest.raises(ValueError, match="token id 99"):
        google_tok.convert_ids_to_tokens([1, 99])
    assert google_tok.convert_tokens_to_ids(["want", "nope"]) == [3, 0]


def test_wrong_types_are_refused_not_coerced(google_tok, tmp_path):
    with pytest.raises(TypeError, match="token ids must be ints, got 5.9"):
        google_tok.convert_ids_to_tokens([1, 5.9])
    with pytest.raises(TypeError, match="ids must be a sequence of token ids"):
        google_tok.decode("12")                   # not the ids 1 and 2
    assert google_tok.decode(np.array([1, 3, 2])) == google_tok.decode([1, 3, 2])   # NumPy ints are ints
    with pytest.raises(TypeError, match=r"text must be a str, got NoneType"):
        google_tok.tokenize(None)
    with pytest.raises(TypeError, match=r"got bytes \(decode the bytes first"):
        google_tok.encode(b"want")
    with pytest.raises(TypeError, match="text_b must be a str"):
        google_tok.encode("want", 3)
    with pytest.raises(TypeError, match="max_length must be an int"):
        google_tok.encode("want", max_length=3.5)
    with pytest.raises(TypeError, match="list of token strings"):
        WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", None])


def test_train_wordpiece_on_a_file_name_says_to_pass_a_path(tmp_path):
    f = tmp_path / "corpus.txt"
    f.write_text("\n".join(CORPUS), encoding="utf-8")
    with pytest.raises(ValueError, match=r"pathlib.Path"):
        train_wordpiece(str(f), vocab_size=200)
    with pytest.raises(TypeError, match="vocab_size must be an int"):
        train_wordpiece(CORPUS, vocab_size=200.5)
    with pytest.raises(TypeError, match="takes str texts or pathlib.Path files, got bytes"):
        train_wordpiece([b"some text"], vocab_size=200)


def test_ids_from_arrays_of_any_library(google_tok):
    torch = pytest.importorskip("torch")
    want = google_tok.convert_ids_to_tokens([1, 3, 2])
    assert google_tok.convert_ids_to_tokens(torch.tensor([1, 3, 2])) == want
    assert google_tok.convert_ids_to_tokens(np.array([1, 3, 2], dtype=np.int32)) == want
    assert google_tok.convert_ids_to_tokens(np.int64(3)) == want[1:2]          # a 0-d array: one id
    with pytest.raises(TypeError, match="token ids must be ints"):
        google_tok.convert_ids_to_tokens(np.array([1.0, 3.0]))
    with pytest.raises(TypeError, match="token ids must be ints"):
        google_tok.convert_ids_to_tokens([True])


def test_a_word_that_names_a_file_is_text_inside_a_list(tmp_path, monkeypatch):
    (tmp_path / "Makefile").write_text("all:\n")
    monkeypatch.chdir(tmp_path)
    tok = train_wordpiece(["Makefile"] + CORPUS, vocab_size=200)      # a list of texts: all text
    assert tok.vocab_size > 104
