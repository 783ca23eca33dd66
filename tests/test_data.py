"""Corpora, the tokenized-corpus cache, NSP instances and MLM batches."""
from __future__ import annotations

import hashlib
import http.server
import io
import threading
import time
import zipfile
from collections import Counter

import numpy as np
import pytest

from data_helpers import bert_vocab_path, wikitext_dir
from minibert.data import builtin as builtin_module
from minibert.data import wikitext
from minibert.data.corpus import Corpus, load_corpus, read_bert_format, read_plain_text, split_sentences
from minibert.constants import IGNORE_INDEX
from minibert.data.instances import TrainingInstance, create_training_instances, truncate_seq_pair
from minibert.data.masking import mask_token_ids, mask_tokens, masking_tables
from minibert.data.pretraining_data import PretrainingDataset, build_pretraining_dataset
from minibert.data.token_cache import cache_path, tokenize_corpus
from minibert.data.tokenizer import WordPieceTokenizer, train_wordpiece


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Never touch the user's cache or data folders."""
    monkeypatch.setenv("MINIBERT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MINIBERT_DATA", str(tmp_path / "data"))


@pytest.fixture(scope="module")
def bert_tok():
    return WordPieceTokenizer.from_vocab_file(bert_vocab_path())


@pytest.fixture(scope="module")
def builtin_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("builtin")


@pytest.fixture(scope="module")
def builtin(builtin_cache):
    builtin_module._memory.clear()
    return builtin_module.builtin_corpus(cache_dir=builtin_cache)


@pytest.fixture(scope="module")
def small_tok(builtin):
    """A vocabulary trained on part of the built-in corpus (no download, no test package)."""
    return train_wordpiece([s for d in builtin.documents[:400] for s in d], vocab_size=3000)


@pytest.fixture(scope="module")
def wiki():
    return wikitext.load_wikitext2(("valid", "test"), data_dir=wikitext_dir())


def synthetic_documents(n_docs=40, seed=0):
    """Documents whose every token names its document, sentence and position: "d3s7t2"."""
    rng = np.random.default_rng(seed)
    docs = []
    for d in range(n_docs):
        n_sent = int(rng.integers(1, 30))
        docs.append([[f"d{d}s{s}t{t}" for t in range(int(rng.integers(3, 40)))] for s in range(n_sent)])
    return docs


def doc_of(token: str) -> int:
    return int(token[1:token.index("s")])


# --------------------------------------------------------------------------- sentences and readers
def test_split_sentences():
    assert split_sentences("It rained. Mr. Smith stayed in!  So did we.") == \
        ["It rained.", "Mr. Smith stayed in!", "So did we."]
    assert split_sentences('He said "Go." Then left. J. R. R. Tolkien wrote (e.g. here) books.') == \
        ['He said "Go."', "Then left.", "J. R. R. Tolkien wrote (e.g. here) books."]
    assert split_sentences("Version 3.11 is out. 2024 was a year? Yes") == \
        ["Version 3.11 is out.", "2024 was a year?", "Yes"]
    assert split_sentences("WikiText spacing . It works ; fine .") == ["WikiText spacing .", "It works ; fine ."]
    assert split_sentences("   ") == [] and split_sentences("no end") == ["no end"]


def test_read_bert_format(tmp_path):
    f = tmp_path / "corpus.txt"
    f.write_bytes(b"First sentence.\r\nSecond one.\n\n\n  \nOther document.\nLast line.")
    g = tmp_path / "more.txt"
    g.write_text("Third document.\n", encoding="utf-8")
    c = read_bert_format([f, g])
    assert c.documents == [["First sentence.", "Second one."], ["Other document.", "Last line."],
                           ["Third document."]]
    assert c.stats() == {"documents": 3, "sentences": 5, "words": 10}
    assert "corpus.txt" in c.name and load_corpus(f).documents == c.documents[:2]


def test_read_plain_text(tmp_path):
    f = tmp_path / "story.txt"
    f.write_text("Once upon a time. There was a cat.\nIt slept.\n\nThe end came. Nobody woke.\n",
                 encoding="utf-8")
    assert read_plain_text(f).documents == [["Once upon a time.", "There was a cat.", "It slept.",
                                             "The end came.", "Nobody woke."]]
    assert read_plain_text(f, documents="paragraph").documents == [
        ["Once upon a time.", "There was a cat.", "It slept."], ["The end came.", "Nobody woke."]]
    assert load_corpus(f, fmt="plain").num_documents == 2     # one file: a document per paragraph


# --------------------------------------------------------------------------- bad input
def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"corpus file .*nothing.txt does not exist"):
        read_bert_format(tmp_path / "nothing.txt")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        read_bert_format(tmp_path)


def test_empty_corpus(tmp_path):
    f = tmp_path / "empty.txt"
    f.write_text("\n\n   \n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"corpus 'empty.txt' is empty: it has no sentences"):
        read_bert_format(f)


def test_undecodable_bytes(tmp_path):
    f = tmp_path / "latin1.txt"
    f.write_bytes("Good line.\nCaf\u00e9 au lait.\n".encode("latin-1"))
    with pytest.raises(ValueError) as e:
        read_bert_format(f)
    msg = str(e.value)
    assert str(f) in msg and "byte offset 14 (line 2, column 4)" in msg and "e9" in msg
    assert read_bert_format(f, encoding="latin-1").documents == [["Good line.", "Caf\u00e9 au lait."]]


def test_one_document_corpus(tmp_path, small_tok):
    f = tmp_path / "one.txt"
    f.write_text("A sentence here.\nAnother sentence.\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"'one.txt' has 1 document\(s\) but at least 2 are needed"):
        build_pretraining_dataset(read_bert_format(f), small_tok, cache_dir=False)
    with pytest.raises(ValueError, match="needs at least 2"):
        create_training_instances([[["a", "b"], ["c"]]])


@pytest.mark.parametrize("bad", [0, 3, 4, 4.5])
def test_max_seq_length_too_small(bad):
    with pytest.raises(ValueError, match=r"max_seq_length=.* \[CLS\] A \[SEP\] B \[SEP\] needs 3 special"):
        create_training_instances(synthetic_documents(3), max_seq_length=bad)


def test_bad_arguments(small_tok):
    docs = synthetic_documents(3)
    with pytest.raises(ValueError, match="short_seq_prob=1.5"):
        create_training_instances(docs, short_seq_prob=1.5)
    with pytest.raises(ValueError, match="dupe_factor=0"):
        create_training_instances(docs, dupe_factor=0)
    instances = create_training_instances(docs, max_seq_length=64)
    with pytest.raises(ValueError, match="masked_lm_prob=0"):
        PretrainingDataset(instances, small_tok, max_seq_length=64, masked_lm_prob=0)
    with pytest.raises(ValueError, match="more than max_seq_length=32"):
        PretrainingDataset(instances, small_tok, max_seq_length=32)
    data = PretrainingDataset(instances, small_tok, max_seq_length=64)
    with pytest.raises(ValueError, match="pad_to=10 is shorter"):
        next(data.batches(4, pad_to=10))


# --------------------------------------------------------------------------- built-in corpus
def test_builtin_corpus(builtin, builtin_cache):
    s = builtin.stats()
    print(f"built-in corpus: {builtin}")
    assert s["documents"] > 1000 and s["sentences"] > 5000 and s["words"] > 100_000
    assert all(doc and all(sent.strip() for sent in doc) for doc in builtin.documents)
    # the first documents are the reference topics, in name order ("assert" first)
    assert "assert" in builtin.documents[0][0].lower()
    # the cache file gives back exactly what was built, quickly
    assert len(list(builtin_cache.glob("builtin-corpus-*.json"))) == 1
    builtin_module._memory.clear()
    start = time.perf_counter()
    again = builtin_module.builtin_corpus(cache_dir=builtin_cache)
    assert time.perf_counter() - start < 1.0
    assert again.documents == builtin.documents and again.fingerprint() == builtin.fingerprint()
    assert load_corpus("builtin") is again                 # kept in memory too


# --------------------------------------------------------------------------- WikiText-2
def test_wikitext_documents(wiki):
    assert wiki.num_documents == 122                   # 60 + 62 articles
    first = wiki.documents[0]
    assert first[0].startswith("Homarus gammarus , known as the European lobster")
    text = " ".join(s for d in wiki.documents for s in d)
    assert "@-@" not in text and "@,@" not in text and "@.@" not in text
    assert not any(s.startswith("= ") and s.endswith(" =") for d in wiki.documents for s in d)
    assert 400_000 < wiki.num_words < 460_000


def test_load_corpus_by_name(wiki):
    by_name = load_corpus("wikitext-2", data_dir=wikitext_dir())
    assert by_name.documents == wiki.documents
    assert load_corpus("wikitext2", data_dir=wikitext_dir(), splits=("test",)).num_documents == 62


def test_wikitext_missing_split_is_explained():
    with pytest.raises(FileNotFoundError) as e:
        wikitext.load_wikitext2(("train", "valid"), data_dir=wikitext_dir())
    msg = str(e.value)
    assert "wiki.train.raw" in msg and "it has: valid, test" in msg and "download=True" in msg
    with pytest.raises(FileNotFoundError, match="does not exist"):
        wikitext.load_wikitext2(data_dir=wikitext_dir() / "nope")
    with pytest.raises(ValueError, match="unknown WikiText-2 split"):
        wikitext.load_wikitext2(("dev",), data_dir=wikitext_dir())


def test_wikitext_checksum_is_verified(tmp_path):
    folder = tmp_path / "wikitext-2-raw"
    folder.mkdir()
    data = (wikitext_dir() / "wiki.valid.raw").read_bytes()
    (folder / "wiki.valid.raw").write_bytes(data.replace(b"\n", b"\r\n"))     # CRLF copy
    with pytest.raises(ValueError, match=r"wiki.valid.raw: SHA-256 is .* but WikiText-2 \(raw, v1\) valid"):
        wikitext.load_wikitext2(("valid",), data_dir=tmp_path)
    (folder / "wiki.valid.raw").write_bytes(data)                              # archive layout
    assert wikitext.load_wikitext2(("valid",), data_dir=tmp_path).num_documents == 60


# --------------------------------------------------------------------------- download
def _fake_archive(splits_text: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in splits_text.items():
            zf.writestr(f"wikitext-2-raw/{name}", data)
    return buf.getvalue()


FAKE = {
    "wiki.train.raw": b" = Alpha = \n\n Alpha is first . It leads .\n\n = Beta = \n\n Beta follows . It trails .\n",
    "wiki.valid.raw": b" = Gamma = \n\n Gamma is third . Yes .\n\n = Delta = \n\n Delta is fourth .\n",
    "wiki.test.raw": b" = Epsilon = \n\n Epsilon ends it . Done .\n\n = Zeta = \n\n Zeta too .\n",
}


@pytest.fixture
def fake_wikitext(monkeypatch):
    """The fake archive's checksums in place of the real ones."""
    archive = _fake_archive(FAKE)
    splits = {s: (name, hashlib.sha256(FAKE[name]).hexdigest()) for s, (name, _) in wikitext.WIKITEXT2_SPLITS.items()}
    monkeypatch.setattr(wikitext, "WIKITEXT2_SPLITS", splits)
    monkeypatch.setattr(wikitext, "WIKITEXT2_ARCHIVE_SHA256", hashlib.sha256(archive).hexdigest())
    return archive


@pytest.fixture
def http_server():
    """A web server on 127.0.0.1 serving the bytes put in ``files`` (path -> bytes)."""
    files: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path in files:
                self.send_response(200)
                self.send_header("Content-Length", str(len(files[self.path])))
                self.end_headers()
                self.wfile.write(files[self.path])
            else:
                self.send_error(404)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", files
    server.shutdown()
    server.server_close()


def test_download_over_http(fake_wikitext, http_server, tmp_path):
    archive = fake_wikitext
    base, files = http_server
    files["/wikitext-2-raw-v1.zip"] = archive
    target = wikitext.download_wikitext2(tmp_path / "data", url=base + "/wikitext-2-raw-v1.zip", timeout=10)
    assert sorted(p.name for p in target.iterdir()) == ["wiki.test.raw", "wiki.train.raw", "wiki.valid.raw"]
    assert not [p for p in (tmp_path / "data").iterdir() if p.name.startswith(".download")]
    corpus = wikitext.load_wikitext2(("train", "valid", "test"), data_dir=tmp_path / "data")
    assert corpus.documents == [["Alpha is first .", "It leads ."], ["Beta follows .", "It trails ."],
                                ["Gamma is third .", "Yes ."], ["Delta is fourth ."],
                                ["Epsilon ends it .", "Done ."], ["Zeta too ."]]


def test_download_into_default_dir_from_file_url(fake_wikitext, tmp_path, monkeypatch):
    archive = fake_wikitext
    zip_path = tmp_path / "mirror.zip"
    zip_path.write_bytes(archive)
    monkeypatch.setattr(wikitext, "WIKITEXT2_URL", zip_path.as_uri())
    corpus = wikitext.load_wikitext2(("valid",), download=True)           # MINIBERT_DATA (see fixture)
    assert corpus.num_documents == 2
    assert (wikitext.default_data_dir() / "wikitext-2-raw" / "wiki.valid.raw").is_file()


def test_download_failures(fake_wikitext, http_server, tmp_path):
    archive = fake_wikitext
    base, files = http_server
    with pytest.raises(OSError, match=r"could not download WikiText-2 from .*404"):
        wikitext.download_wikitext2(tmp_path, url=base + "/missing.zip", timeout=10)
    files["/other.zip"] = archive + b"junk"
    with pytest.raises(ValueError, match="is not the WikiText-2 .* archive"):
        wikitext.download_wikitext2(tmp_path, url=base + "/other.zip", timeout=10)
    files["/bad.zip"] = b"not a zip"
    with pytest.raises(ValueError, match="not a zip archive"):
        wikitext.download_wikitext2(tmp_path, url=base + "/bad.zip", verify_archive=False, timeout=10)
    assert not list((tmp_path / "wikitext-2-raw").iterdir())          # nothing half-written


# --------------------------------------------------------------------------- tokenized-corpus cache
def test_tokenized_cache(wiki, bert_tok, tmp_path, monkeypatch):
    first = tokenize_corpus(wiki, bert_tok, cache_dir=tmp_path)
    path = cache_path(wiki, bert_tok, tmp_path)
    assert path.is_file()
    assert first.num_documents == 122 and first.num_tokens > 450_000

    fresh = WordPieceTokenizer(bert_tok.vocab)
    monkeypatch.setattr(fresh, "tokenize_to_ids", lambda text: pytest.fail("cache not used"))
    start = time.perf_counter()
    again_corpus = wikitext.load_wikitext2(data_dir=wikitext_dir())                # a "second run"
    second = tokenize_corpus(again_corpus, fresh, cache_dir=tmp_path)
    elapsed = time.perf_counter() - start
    assert elapsed < 2.0, f"loading from the cache took {elapsed:.2f} s"
    assert np.array_equal(first.ids, second.ids)
    assert np.array_equal(first.sentence_starts, second.sentence_starts)
    assert first.documents(bert_tok.vocab)[0][0] == bert_tok.tokenize(wiki.documents[0][0])

    # another vocabulary or another corpus never hits this file
    other = WordPieceTokenizer(bert_tok.vocab, do_lower_case=False)
    assert cache_path(wiki, other, tmp_path) != path
    smaller = Corpus("x", wiki.documents[:10])
    assert cache_path(smaller, bert_tok, tmp_path) != path


# --------------------------------------------------------------------------- NSP
def test_truncate_seq_pair():
    rng = np.random.default_rng(0)
    a, b = list("abcdefghij"), list("xyz")
    truncate_seq_pair(a, b, 8, rng)
    assert len(a) == 5 and b == list("xyz")
    assert "".join(a) in "abcdefghij"                       # a contiguous piece of the original


@pytest.mark.parametrize("max_seq_length", [5, 16, 64, 128])
def test_nsp_instances_on_synthetic_documents(max_seq_length):
    docs = synthetic_documents()
    instances = create_training_instances(docs, max_seq_length=max_seq_length, dupe_factor=2, seed=3)
    assert instances
    for inst in instances:
        assert len(inst) <= max_seq_length and inst.tokens_a and inst.tokens_b
        doc_a = doc_of(inst.tokens_a[0])
        assert all(doc_of(t) == doc_a for t in inst.tokens_a)
        docs_b = {doc_of(t) for t in inst.tokens_b}
        assert len(docs_b) == 1
        if inst.is_random_next:
            assert doc_a not in docs_b                      # NotNext never from A's document
        else:
            assert docs_b == {doc_a}
        assert inst.documents[0] != inst.documents[1] if inst.is_random_next else \
            inst.documents[0] == inst.documents[1]


def test_isnext_b_really_follows_a():
    docs = synthetic_documents(seed=1)
    for inst in create_training_instances(docs, max_seq_length=256, short_seq_prob=0.0, seed=5):
        if not inst.is_random_next:
            # with room for everything nothing is truncated: B starts the sentence after A's last
            last_a, first_b = inst.tokens_a[-1], inst.tokens_b[0]
            s_a, s_b = int(last_a.split("s")[1].split("t")[0]), int(first_b.split("s")[1].split("t")[0])
            if len(inst) < 256 - 40:
                assert s_b == s_a + 1 and first_b.endswith("t0")


def test_instances_are_deterministic():
    docs = synthetic_documents()
    a = create_training_instances(docs, seed=11)
    b = create_training_instances(docs, seed=11)
    c = create_training_instances(docs, seed=12)
    assert a == b and a != c


def test_nsp_split_on_wikitext(wiki, bert_tok, record_property):
    data = build_pretraining_dataset(wiki, bert_tok, max_seq_length=128, seed=0, cache_dir=False)
    share = data.not_next_share()
    record_property("not_next_share", share)
    print(f"WikiText-2 valid+test, seed 0: {len(data)} instances, NotNext {share:.1%}")
    assert 0.45 <= share <= 0.58
    assert max(len(inst) for inst in data.instances) <= 128
    assert all(inst.documents[0] != inst.documents[1] for inst in data.instances if inst.is_random_next)


# --------------------------------------------------------------------------- MLM
def test_mask_tokens_one_sentence(bert_tok):
    tokens = ["[CLS]", *bert_tok.tokenize("The cat sat on the mat because it was warm there."), "[SEP]"]
    m = mask_tokens(tokens, bert_tok.vocab[1000:], np.random.default_rng(0))
    assert len(m.positions) == round(len(tokens) * 0.15) == 2
    assert m.labels == [tokens[p] for p in m.positions]
    assert all(m.tokens[p] == ("[MASK]" if a == "mask" else m.tokens[p]) for p, a in zip(m.positions, m.actions))
    assert [t for i, t in enumerate(m.tokens) if i not in m.positions] == \
        [t for i, t in enumerate(tokens) if i not in m.positions]


def test_masking_statistics():
    """Over ~300k tokens: 15% chosen, and of those 80% [MASK], 10% random, 10% unchanged."""
    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(5000)]
    total = chosen = 0
    actions: Counter[str] = Counter()
    while total < 300_000:
        n = int(rng.integers(10, 126))
        tokens = ["[CLS]", *rng.choice(vocab, n - 3), "[SEP]", vocab[0], "[SEP]"]
        tokens += ["[PAD]"] * 3                     # padding is never chosen either
        m = mask_tokens(tokens, vocab, rng, masked_lm_prob=0.15, max_predictions_per_seq=1000)
        assert not any(tokens[p] in ("[CLS]", "[SEP]", "[PAD]") for p in m.positions)
        total += len(tokens)
        chosen += len(m.positions)
        actions.update(m.actions)
        for p, a in zip(m.positions, m.actions):
            assert (m.tokens[p] == "[MASK]") == (a == "mask")
            assert (m.tokens[p] == tokens[p]) == (a == "keep") or a == "random"
    share = chosen / total
    assert abs(share - 0.15) < 0.005, share
    for action, expected in (("mask", 0.8), ("random", 0.1), ("keep", 0.1)):
        assert abs(actions[action] / chosen - expected) < 0.01, (action, actions[action] / chosen)


def test_max_predictions_binds():
    rng = np.random.default_rng(1)
    tokens = ["[CLS]", *[f"w{i}" for i in range(250)], "[SEP]", "x", "[SEP]"]
    for _ in range(50):
        assert len(mask_tokens(tokens, ["a", "b"], rng, 0.15, max_predictions_per_seq=20).positions) == 20


def test_whole_word_masking():
    rng = np.random.default_rng(2)
    tokens = ["[CLS]"] + ["un", "##want", "##ed", "run", "##ning", "cat"] * 10 + ["[SEP]", "dog", "[SEP]"]
    for _ in range(100):
        m = mask_tokens(tokens, ["a"], rng, 0.15, 20, whole_word_mask=True)
        chosen = set(m.positions)
        assert len(chosen) <= max(1, round(len(tokens) * 0.15))
        for p in chosen:                             # a chosen piece brings its whole word
            assert p + 1 >= len(tokens) or not tokens[p + 1].startswith("##") or p + 1 in chosen
            assert not tokens[p].startswith("##") or p - 1 in chosen


# The batch path (mask_token_ids, used by collate) against mask_tokens, sequence after sequence.
MASK_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]",
              "the", "cat", "un", "run", "dog", "##want", "##ed", "##ning", "##s"]


def masked_one_by_one(rows, ids, words, rng, prob, cap, whole_word_mask):
    """mask_tokens on each row of ``rows`` in turn, written into copies of ``ids``."""
    to_id = {t: i for i, t in enumerate(MASK_VOCAB)}
    want_ids, want_labels = ids.copy(), np.full(ids.shape, IGNORE_INDEX)
    for b, row in enumerate(rows):
        m = mask_tokens(row, words, rng, prob, cap, whole_word_mask)
        want_ids[b, :len(row)] = [to_id[t] for t in m.tokens]
        want_labels[b, m.positions] = [to_id[t] for t in m.labels]
    return want_ids, want_labels


@pytest.mark.parametrize("whole_word_mask", [False, True])
def test_mask_token_ids_makes_the_draws_and_choices_of_mask_tokens(whole_word_mask):
    """Random batches and settings (candidates that run out, words that overshoot the cap, rows of
    special tokens only, one token): the same ids, labels and generator state afterwards."""
    to_id = {t: i for i, t in enumerate(MASK_VOCAB)}
    words = MASK_VOCAB[6:]
    tables = masking_tables(to_id, words)
    make = np.random.default_rng(11)
    weights = np.r_[[1, 1, 3, 3, 1, 1], [4] * 5, [5] * 4].astype(float)
    for trial in range(150):
        B, T = int(make.integers(1, 10)), int(make.integers(1, 48))
        lengths = make.integers(1, T + 1, B)
        rows = [list(make.choice(MASK_VOCAB, n, p=weights / weights.sum())) for n in lengths]
        if trial % 5 == 0:
            rows[-1] = list(make.choice(["[CLS]", "[SEP]", "[PAD]"], lengths[-1]))    # nothing to choose
        filler = to_id["the"] if trial % 2 else to_id["[PAD]"]   # past the length: never chosen, kept
        ids = np.full((B, T), filler, dtype=np.int64)
        for b, row in enumerate(rows):
            ids[b, :len(row)] = [to_id[t] for t in row]
        prob = float(make.choice([0.0, 0.15, 0.4, 1.0]))
        cap = int(make.choice([0, 1, 3, 20, 1000]))
        ours, theirs = np.random.default_rng(trial), np.random.default_rng(trial)
        got = mask_token_ids(ids, lengths, ours, tables, prob, cap, whole_word_mask)
        want = masked_one_by_one(rows, ids, words, theirs, prob, cap, whole_word_mask)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), (trial, rows)
        assert ours.bit_generator.state == theirs.bit_generator.state, trial


def collated_one_by_one(data, instances, rng, T):
    """What collate made before it masked on ids: mask_tokens sequence after sequence."""
    tok = data.tokenizer
    batch = {k: np.zeros((len(instances), T), dtype=np.int64) for k in ("input_ids", "token_type_ids",
                                                                        "attention_mask")}
    batch["input_ids"][:] = tok.pad_id
    batch["mlm_labels"] = np.full((len(instances), T), IGNORE_INDEX, dtype=np.int64)
    for b, inst in enumerate(instances):
        m = mask_tokens(inst.tokens, data.replacement_words, rng, data.masked_lm_prob,
                        data.max_predictions_per_seq, data.whole_word_mask)
        batch["input_ids"][b, :len(m.tokens)] = tok.convert_tokens_to_ids(m.tokens)
        batch["mlm_labels"][b, m.positions] = tok.convert_tokens_to_ids(m.labels)
        batch["token_type_ids"][b, :len(inst)] = inst.segment_ids
        batch["attention_mask"][b, :len(inst)] = 1
    if data.has_nsp:
        batch["nsp_labels"] = np.array([inst.nsp_label for inst in instances], dtype=np.int64)
    return batch


@pytest.mark.parametrize("nsp,whole_word_mask,prob,cap", [(True, False, 0.15, None), (True, True, 0.15, 3),
                                                          (False, False, 0.5, 1000), (False, True, 0.3, None)])
def test_collate_gives_the_batches_of_mask_tokens(builtin, small_tok, nsp, whole_word_mask, prob, cap):
    data = build_pretraining_dataset(Corpus("part", builtin.documents[:40]), small_tok, max_seq_length=48,
                                     masked_lm_prob=prob, max_predictions_per_seq=cap,
                                     whole_word_mask=whole_word_mask, seed=1, cache_dir=False, nsp=nsp)
    assert data.has_nsp is nsp
    for index, pad_to in enumerate(["longest", 48, "longest"]):
        if index == 2:
            data.replacement_words = data.replacement_words[:7]     # a new list is looked up again
        instances = data.instances[index * 16:(index + 1) * 16]
        ours, theirs = np.random.default_rng(index), np.random.default_rng(index)
        got = data.collate(instances, ours, pad_to)
        want = collated_one_by_one(data, instances, theirs, got["input_ids"].shape[1])
        assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in got)
        assert ours.bit_generator.state == theirs.bit_generator.state
    assert set(got["input_ids"][got["mlm_labels"] != IGNORE_INDEX].tolist()) <= \
        set(small_tok.convert_tokens_to_ids(data.replacement_words + ["[MASK]"]) +
            got["mlm_labels"][got["mlm_labels"] != IGNORE_INDEX].tolist())


# --------------------------------------------------------------------------- batches
def test_batches(bert_tok, wiki):
    data = build_pretraining_dataset(wiki, bert_tok, max_seq_length=64, seed=7, cache_dir=False)
    first = list(data.batches(16, epoch=0))
    again = list(data.batches(16, epoch=0))
    later = list(data.batches(16, epoch=1))
    assert len(first) == data.num_batches(16)
    for x, y in zip(first, again):                    # same seed and epoch: identical
        assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
    assert not np.array_equal(first[0]["input_ids"], later[0]["input_ids"])   # a fresh epoch
    other = build_pretraining_dataset(wiki, bert_tok, max_seq_length=64, seed=7, cache_dir=False)
    assert all(np.array_equal(a[k], b[k]) for a, b in zip(first, other.batches(16)) for k in a)

    for batch in first[:5]:
        assert set(batch) == {"input_ids", "token_type_ids", "attention_mask", "mlm_labels", "nsp_labels"}
        assert all(v.dtype == np.int64 for v in batch.values())
        ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["mlm_labels"]
        B, T = ids.shape
        assert T <= 64 and batch["nsp_labels"].shape == (B,)
        assert np.all(ids[mask == 0] == bert_tok.pad_id) and np.all(labels[mask == 0] == IGNORE_INDEX)
        assert np.all(mask.sum(1) == (ids != bert_tok.pad_id).sum(1))
        assert np.all(ids[:, 0] == bert_tok.cls_id)
        predicted = labels != IGNORE_INDEX
        assert np.all(predicted.sum(1) >= 1) and np.all(predicted.sum(1) <= data.max_predictions_per_seq)
        assert not np.isin(labels[predicted], [bert_tok.cls_id, bert_tok.sep_id, bert_tok.pad_id]).any()
        assert set(np.unique(batch["nsp_labels"])) <= {0, 1}
        assert set(np.unique(batch["token_type_ids"])) <= {0, 1}

    fixed = next(data.batches(8, pad_to=64))
    assert fixed["input_ids"].shape == (8, 64)


def test_batches_follow_instances(small_tok):
    docs = [[small_tok.tokenize(s) for s in d] for d in (
        ["The first document starts here.", "It goes on for a while.", "Then it ends."],
        ["A second document.", "It has two sentences."])]
    instances = create_training_instances(docs, max_seq_length=32, seed=0)
    data = PretrainingDataset(instances, small_tok, max_seq_length=32, seed=0)
    batch = next(data.batches(len(instances), shuffle=False))
    for b, inst in enumerate(instances):
        n = len(inst)
        assert batch["nsp_labels"][b] == int(inst.is_random_next)
        assert batch["token_type_ids"][b, :n].tolist() == inst.segment_ids
        original = small_tok.convert_tokens_to_ids(inst.tokens)
        labels = batch["mlm_labels"][b, :n]
        restored = np.where(labels != IGNORE_INDEX, labels, batch["input_ids"][b, :n])
        assert restored.tolist() == original
    assert str(instances[0]).startswith(("IsNext: [CLS]", "NotNext: [CLS]"))


def test_instance_is_readable():
    inst = TrainingInstance(["the", "cat"], ["sat", "."], is_random_next=False)
    assert inst.tokens == ["[CLS]", "the", "cat", "[SEP]", "sat", ".", "[SEP]"]
    assert inst.segment_ids == [0, 0, 0, 0, 1, 1, 1] and inst.nsp_label == 0 and len(inst) == 7
    assert str(inst) == "IsNext: [CLS] the cat [SEP] sat . [SEP]"


def test_batches_are_those_the_trainer_draws_with_the_same_seed(builtin, small_tok):
    """One shuffling and masking scheme: ``batches()`` in a notebook and a training run agree."""
    from minibert.train import BatchStream
    data = build_pretraining_dataset(Corpus("part", builtin.documents[:60]), small_tok, max_seq_length=32,
                                     seed=3, cache_dir=False)
    stream = BatchStream(data, 8, seed=3)
    for epoch in (0, 1):
        for batch in data.batches(8, epoch=epoch, drop_last=True):
            drawn = stream.next_batch()
            assert batch.keys() == drawn.keys() and all(np.array_equal(batch[k], drawn[k]) for k in batch)
    assert stream.state_dict() == {"epoch": 1, "index": data.num_batches(8, drop_last=True)}


def test_batch_feeds_the_model(builtin, small_tok):
    """A batch goes straight into BertForPreTraining.forward."""
    try:
        from minibert import BertConfig, BertForPreTraining
    except ImportError as e:  # pragma: no cover - the model is built separately
        pytest.skip(f"model not importable: {e}")
    corpus = Corpus("part", builtin.documents[:60])
    data = build_pretraining_dataset(corpus, small_tok, max_seq_length=32, seed=0, cache_dir=False)
    config = BertConfig(vocab_size=len(small_tok), hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)
    out = BertForPreTraining(config, seed=0).forward(**next(data.batches(4)))
    assert np.isfinite(float(out.loss))


def test_documents_of_strings_are_refused():
    # sentences as strings would be cut into characters
    with pytest.raises(TypeError, match=r"documents\[0\]\[0\] must be the token list"):
        create_training_instances([["Hello world.", "Yes."], ["Another one.", "No."]], 32)
    with pytest.raises(TypeError, match=r"documents\[0\] is a string"):
        create_training_instances(["one document", "another"], 32)


def test_instances_from_another_vocabulary_are_refused(small_tok):
    instances = create_training_instances(synthetic_documents(3), max_seq_length=64)
    data = PretrainingDataset(instances, small_tok, max_seq_length=64)
    with pytest.raises(ValueError, match="not in the tokenizer's vocabulary"):
        next(data.batches(4))


@pytest.mark.parametrize("kw", [dict(seed=-1), dict(seed=1.5), dict(max_predictions_per_seq=2.5)])
def test_seeds_and_counts_are_checked_here(small_tok, kw):
    instances = create_training_instances(synthetic_documents(3), max_seq_length=64)
    name = next(iter(kw))
    with pytest.raises(ValueError, match=f"{name}=.*must be an integer"):
        PretrainingDataset(instances, small_tok, max_seq_length=64, **kw)
    if name == "seed":
        with pytest.raises(ValueError, match="seed=.*must be an integer"):
            create_training_instances(synthetic_documents(3), 64, seed=kw["seed"])


def test_batches_checks_its_arguments(small_tok):
    docs = [[small_tok.tokenize(s) for s in ("the cat sat .", "it was warm .")]] * 3
    data = PretrainingDataset(create_training_instances(docs, 32), small_tok, max_seq_length=32)
    for kw in (dict(batch_size=1.5), dict(batch_size=2, epoch=-1)):
        with pytest.raises(ValueError, match="must be an integer"):
            next(data.batches(**kw))
    assert next(data.batches(2))["input_ids"].shape[0] == 2


def test_the_token_cache_is_keyed_by_the_unicode_version(small_tok, builtin, tmp_path):
    # Python's Unicode tables decide what is punctuation or a CJK character: another Python,
    # another tokenization, another cache file
    import unicodedata
    name = cache_path(builtin, small_tok, tmp_path).name
    assert name.endswith(f"-u{unicodedata.unidata_version}.npz")


def test_the_trainer_downloads_wikitext_unless_given_a_folder(fake_wikitext, tmp_path, monkeypatch):
    from minibert.train import TrainArgs, load_run_corpus
    zip_path = tmp_path / "mirror.zip"
    zip_path.write_bytes(fake_wikitext)
    monkeypatch.setattr(wikitext, "WIKITEXT2_URL", zip_path.as_uri())
    corpus = load_run_corpus(TrainArgs(corpus="wikitext-2"))              # into MINIBERT_DATA
    assert corpus.num_documents == 4
    with pytest.raises(FileNotFoundError, match="--data-dir"):          # a named folder is only read
        load_run_corpus(TrainArgs(corpus="wikitext-2", data_dir=str(tmp_path / "elsewhere")))


def test_a_plain_text_file_is_one_document_per_paragraph(tmp_path):
    f = tmp_path / "prose.txt"
    f.write_text("First paragraph. It has two sentences.\n\nSecond one here.\nStill the second.\n\n"
                 "Third paragraph.\n", encoding="utf-8")
    corpus = load_corpus(f, "plain")
    assert corpus.num_documents == 3 and corpus.documents[0] == ["First paragraph.", "It has two sentences."]


def test_a_truncated_token_cache_is_tokenized_again(small_tok, builtin, tmp_path):
    first = tokenize_corpus(builtin, small_tok, cache_dir=tmp_path)
    path = cache_path(builtin, small_tok, tmp_path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])      # a copy cut short
    again = tokenize_corpus(builtin, small_tok, cache_dir=tmp_path)
    np.testing.assert_array_equal(again.ids, first.ids)
