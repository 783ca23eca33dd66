"""Data that a course's students really feed minibert: text without line breaks, absurd
settings, too many [MASK]s, vocabularies that are broken or only partly BERT's.

Each case must end in one clear line (or a warning) that names the cause and the fix,
quickly, and never in a hang, a climb of memory or silently lost data.
"""
from __future__ import annotations

import time
from collections import deque

import numpy as np
import pytest

from minibert.cli import main
from minibert.train import TrainArgs, pretrain


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIBERT_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def documents():
    """60 documents of real prose, each a list of sentences."""
    from minibert.data.builtin import builtin_corpus
    return builtin_corpus(cache_dir=False).documents[:60]


def write_corpus(path, documents, extra_lines=()):
    """BERT's format: one sentence per line, a blank line between documents."""
    blocks = ["\n".join(d) for d in documents] + list(extra_lines)
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return path


def run_args(corpus, out, **kw):
    base = dict(corpus=str(corpus), vocab_size=300, config="tiny", steps=1, warmup=0, batch_size=4,
                seq_len=32, eval_every=1, save_every=1, log_every=1, eval_instances=8,
                heldout_fraction=0.1, progress=False, plot=False, out=str(out))
    base.update(kw)
    return TrainArgs(**base)


def run_cli(args, capsys):
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.err.strip(), captured.out


# ----------------------------------------------------------------- A. a text without line breaks
def truncate_step_by_step(tokens_a, tokens_b, max_num_tokens, rng):
    """The rule as google-research/bert states it, one token at a time (deques: O(1) at both ends)."""
    a, b = deque(tokens_a), deque(tokens_b)
    while len(a) + len(b) > max_num_tokens:
        longer = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            longer.popleft()
        else:
            longer.pop()
    return list(a), list(b)


def test_truncating_a_400k_token_pair_is_fast_and_cuts_as_step_by_step():
    from minibert.data.instances import truncate_seq_pair
    a, b = [f"a{i}" for i in range(300_000)], [f"b{i}" for i in range(100_000)]
    expected = truncate_step_by_step(a, b, 125, np.random.default_rng(7))
    rng = np.random.default_rng(7)
    start = time.perf_counter()
    truncate_seq_pair(a, b, 125, rng)
    elapsed = time.perf_counter() - start
    assert elapsed < 1.0, f"truncating 400k tokens took {elapsed:.1f} s"
    assert (a, b) == expected
    after = np.random.default_rng(7)
    after.random(400_000 - 125)                   # one draw per removed token, as before
    assert rng.random() == after.random()


def test_truncation_matches_step_by_step_on_every_small_case():
    from minibert.data.instances import truncate_seq_pair
    cases = [(la, lb, m) for la in range(9) for lb in range(9) for m in range(0, 14, 3)]
    for k, (la, lb, m) in enumerate(cases):
        a, b = list(range(la)), list(range(100, 100 + lb))
        reference_rng = np.random.default_rng(k)
        expected = truncate_step_by_step(a, b, m, reference_rng)
        rng = np.random.default_rng(k)
        truncate_seq_pair(a, b, m, rng)
        assert (a, b) == expected, (la, lb, m)
        assert rng.random() == reference_rng.random(), (la, lb, m)   # the same draws were used
    with pytest.raises(ValueError, match="max_num_tokens=-1 must be an integer >= 0"):
        truncate_seq_pair([1], [2], -1, np.random.default_rng(0))


def test_a_line_without_line_breaks_is_reported_and_does_not_hang(documents, tmp_path):
    words = " ".join(" ".join(d) for d in documents).split()
    dump = " ".join(words[i % len(words)] for i in range(60_000))    # a text dump on one line
    corpus = write_corpus(tmp_path / "dump.txt", documents, [dump])
    notes = []
    start = time.perf_counter()
    pretrain(run_args(corpus, tmp_path / "run", heldout_fraction=0.05), log=notes.append)
    assert time.perf_counter() - start < 60
    warned = [n for n in notes if "lack line breaks" in str(n)]
    assert len(warned) == 1, notes
    line = str(warned[0])
    assert line.startswith("warning: 1 sentence(s) of more than 1,000 tokens") and "\n" not in line
    assert "the longest has" in line and "one sentence per line" in line


def test_creating_instances_warns_about_a_sentence_of_thousands_of_tokens():
    from minibert.data.instances import create_training_instances
    docs = [[["w"] * 5000, ["x"] * 3], [["y"] * 4, ["z"] * 2]]
    with pytest.warns(UserWarning, match=r"1 sentence\(s\) of more than 1,000 tokens \(the longest has 5,000"):
        create_training_instances(docs, max_seq_length=16)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        create_training_instances([[["w"] * 900], [["y"] * 4]], max_seq_length=16)   # long, but a sentence


# ----------------------------------------------------------------- B. a dupe factor that cannot fit
def test_a_dupe_factor_that_cannot_fit_is_refused_before_any_work(documents, tmp_path, capsys):
    corpus = write_corpus(tmp_path / "small.txt", documents)
    start = time.perf_counter()
    # about 30,000 tokens a billion times: half a petabyte, more than any machine has
    with pytest.raises(ValueError, match=r"dupe_factor=1,000,000,000 \(--dupe-factor\) .* more than the .* "
                                         r"(available|assumed)"):
        pretrain(run_args(corpus, tmp_path / "api", dupe_factor=10**9), log=lambda *a: None)
    code, err, _ = run_cli(["pretrain", "--corpus", str(corpus), "--out", str(tmp_path / "cli"),
                            "--dupe-factor", "1000000000", "--no-progress", "--no-plot"], capsys)
    assert time.perf_counter() - start < 30
    assert code == 2 and err.startswith("minibert pretrain: error: dupe_factor=1,000,000,000") and "\n" not in err
    assert "the most that could fit is" in err, err


def test_the_memory_estimate_counts_tokens_times_passes(monkeypatch):
    from minibert.data import memory_budget as mem, pretraining_data as pd
    docs = [[["w"] * 10] * 10, [["v"] * 10] * 10]                 # 200 tokens
    monkeypatch.setattr(mem, "available_memory", lambda: (200 * mem.BYTES_PER_INSTANCE_TOKEN * 50, True))
    assert len(pd.create_training_instances(docs, 32, dupe_factor=50)) > 0
    with pytest.raises(ValueError, match=r"200 tokens into instances 51 times: .* the most that could fit is 50 "):
        pd.create_training_instances(docs, 32, dupe_factor=51)
    monkeypatch.setattr(mem, "available_memory", lambda: (100, False))
    with pytest.raises(ValueError, match=r"assumed \(the free memory could not be read\); not even 1 fits"):
        pd.create_training_instances(docs, 32)


def test_free_memory_falls_back_to_an_assumption(monkeypatch):
    from minibert.data import memory_budget as mem
    free, measured = mem.available_memory()
    assert free > 0 and isinstance(measured, bool)
    monkeypatch.setattr(mem, "_read_int", lambda *a: None)

    def no_sysconf(name):
        raise ValueError(name)
    monkeypatch.setattr(mem.os, "sysconf", no_sysconf)
    assert mem.available_memory() == (mem.ASSUMED_MEMORY, False)


# ----------------------------------------------------------------- E. too many [MASK]s
@pytest.fixture(scope="module")
def small_model_dir(tmp_path_factory):
    """A tiny untrained model of 16 positions, saved as `minibert pretrain` saves one."""
    import minibert as mb
    from minibert.data.tokenizer import train_wordpiece
    tok = train_wordpiece(["word after word"] * 5, vocab_size=120)
    model = mb.BertForPreTraining(mb.BertConfig.from_preset("tiny", vocab_size=tok.vocab_size,
                                                            max_position_embeddings=16))
    d = tmp_path_factory.mktemp("model")
    model.save_pretrained(d)
    tok.save_vocabulary(d)
    return d, model, tok


def test_fill_mask_never_drops_masks_silently(small_model_dir, capsys):
    from minibert.train import fill_mask
    d, model, tok = small_model_dir
    assert len(fill_mask(model, tok, " ".join(["[MASK]"] * 14), top_k=1)) == 14    # 14 + [CLS] [SEP] = 16
    with pytest.raises(ValueError, match=r"6 of the 20 \[MASK\] tokens .* lie beyond the model's 16 "
                                         r"positions: only 14 fit"):
        fill_mask(model, tok, " ".join(["[MASK]"] * 20))
    code, err, out = run_cli(["fill-mask", str(d), "word " + "[MASK] " * 600], capsys)
    assert code == 2 and "\n" not in err
    assert "587 of the 600 [MASK] tokens" in err and "only 13 fit" in err, err


# ----------------------------------------------------------------- H. messages that must be true
def test_a_corpus_that_is_not_utf8_gets_advice_that_works(documents, tmp_path, capsys):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(write_corpus(tmp_path / "ok.txt", documents).read_bytes() + "Café.\n".encode("latin-1"))
    code, err, _ = run_cli(["pretrain", "--corpus", str(bad), "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and "not valid utf-8" in err, err
    assert f"iconv -f CP1252 -t UTF-8 {bad} > {tmp_path / 'latin1.utf8.txt'}" in err, err
    assert "pass the right encoding" not in err and "--encoding" not in err
    utf16 = tmp_path / "notepad.txt"
    utf16.write_text("One sentence.\n", encoding="utf-16")
    code, err, _ = run_cli(["train-tokenizer", "--corpus", str(utf16), "--out", str(tmp_path / "v.txt")], capsys)
    assert code == 2 and "iconv -f UTF-16 -t UTF-8" in err and "byte-order mark" in err, err
    import gzip                  # a compressed corpus is no encoding to convert from: it is unpacked
    packed = tmp_path / "corpus.txt.gz"
    packed.write_bytes(gzip.compress(write_corpus(tmp_path / "ok.txt", documents).read_bytes()))
    code, err, _ = run_cli(["pretrain", "--corpus", str(packed), "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and f"It is gzip-compressed, not text: unpack it first (`gunzip -k {packed}`)" in err, err
    assert "iconv" not in err


def test_a_vocab_size_too_small_is_advised_in_command_line_terms(documents, tmp_path, capsys):
    corpus = write_corpus(tmp_path / "small.txt", documents)
    code, err, _ = run_cli(["pretrain", "--corpus", str(corpus), "--out", str(tmp_path / "r"),
                            "--vocab-size", "5"], capsys)
    assert code == 2 and "--vocab-size 5 leaves no room" in err and "at least 105" in err, err
    assert "num_unused" not in err
    code, err, _ = run_cli(["train-tokenizer", "--corpus", str(corpus), "--vocab-size", "5",
                            "--out", str(tmp_path / "v.txt")], capsys)
    assert code == 2 and "--vocab-size 5 leaves no room" in err and "num_unused" not in err, err
    code, err, _ = run_cli(["train-tokenizer", "--corpus", str(corpus), "--vocab-size", "110",
                            "--out", str(tmp_path / "v.txt")], capsys)
    assert code == 0 and "Raise vocab_size (--vocab-size on the command line)" in err, err


def test_whitespace_around_a_vocab_token_is_named_with_its_line(tmp_path, capsys):
    from minibert.data.tokenizer import WordPieceTokenizer
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]  \n[UNK]\n[CLS]\n[SEP]\n[MASK]\nword\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab.txt, line 1: token '\[PAD\]  ' has 2 trailing spaces.*"
                                         r"make the line '\[PAD\]'"):
        WordPieceTokenizer.from_vocab_file(path)
    path.write_text("[PAD]\n[UNK]\n\tword\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 3: token '\\tword' has a leading tab"):
        WordPieceTokenizer.from_vocab_file(path)
    code, err, _ = run_cli(["fill-mask", str(tmp_path), "a [MASK]"], capsys)
    assert code == 2 and "line 3: token '\\tword' has a leading tab" in err, err


def test_an_empty_vocab_line_is_refused_with_its_number(tmp_path):
    from minibert.data.tokenizer import load_vocab
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\n\n[CLS]\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab.txt, line 3: the line is empty; .*no blank lines"):
        load_vocab(path)
    path.write_text("[PAD]\n[UNK]\n\n", encoding="utf-8")            # a blank line at the end too
    with pytest.raises(ValueError, match=r"line 3: the line is empty"):
        load_vocab(path)
    path.write_text("[PAD]\n \n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2: the line is only whitespace \(a space\)"):
        load_vocab(path)
    path.write_text("[PAD]\r\n[UNK]\r\n", encoding="utf-8")           # Windows line ends are fine
    assert load_vocab(path) == ["[PAD]", "[UNK]"]


# ----------------------------------------------------------------- 4. vocabularies of tokenizer tests
PEER_VOCAB = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing", ","]


def test_a_tokenizer_only_vocabulary_tokenizes():
    from minibert.data.tokenizer import WordPieceTokenizer
    tok = WordPieceTokenizer(PEER_VOCAB)
    assert tok.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert tok.tokenize_to_ids("unwanted running") == [7, 4, 5, 8, 9]
    assert tok.encode("unwanted", "running")["input_ids"] == [1, 7, 4, 5, 2, 8, 9, 2]
    assert tok.tokenize_to_ids("[MASK] [CLS]") == [0, 0, 0, 1]     # no [MASK] here: an ordinary word
    with pytest.raises(ValueError, match=r"no \[UNK\] token in the vocabulary, which tokenizing"):
        WordPieceTokenizer(PEER_VOCAB[1:])
    with pytest.raises(ValueError, match=r"no \[CLS\] token in the vocabulary, which framing an input"):
        WordPieceTokenizer([t for t in PEER_VOCAB if t != "[CLS]"]).encode("want")


def test_padding_and_masking_name_the_missing_token(small_model_dir):
    from minibert.data.pretraining_data import PretrainingDataset, TrainingInstance, build_pretraining_dataset
    from minibert.data.corpus import Corpus
    from minibert.data.tokenizer import WordPieceTokenizer
    from minibert.train import fill_mask
    tok = WordPieceTokenizer(PEER_VOCAB, source="peer vocabulary")
    with pytest.raises(ValueError, match=r"peer vocabulary: no \[PAD\] token in the vocabulary, which "
                                         r"padding a batch needs"):
        tok.pad_id
    with pytest.raises(ValueError, match=r"no \[MASK\] token in the vocabulary, which masking"):
        tok.mask_id
    inst = TrainingInstance(["want"], ["runn", "##ing"], False)
    with pytest.raises(ValueError, match=r"peer vocabulary: no \[PAD\] \[MASK\] tokens in the vocabulary, "
                                         r"which pre-training"):
        PretrainingDataset([inst, inst], tok, max_seq_length=8)
    corpus = Corpus("two", [["want running."], ["unwanted."]])
    with pytest.raises(ValueError, match=r"no \[PAD\] \[MASK\] tokens"):
        build_pretraining_dataset(corpus, tok, max_seq_length=8, cache_dir=False)
    _, model, _ = small_model_dir
    with pytest.raises(ValueError, match=r"no \[MASK\] token in the vocabulary, which masking"):
        fill_mask(model, tok, "want [MASK]")


def test_pretrain_with_a_tokenizer_only_vocabulary_fails_in_one_line(documents, tmp_path, capsys):
    corpus = write_corpus(tmp_path / "small.txt", documents)
    vocab = tmp_path / "peer.txt"
    vocab.write_text("".join(t + "\n" for t in PEER_VOCAB), encoding="utf-8")
    code, err, _ = run_cli(["pretrain", "--corpus", str(corpus), "--vocab", str(vocab),
                            "--out", str(tmp_path / "r"), "--no-progress", "--no-plot"], capsys)
    assert code == 2 and "\n" not in err
    assert f"{vocab}: no [PAD] [MASK] tokens in the vocabulary" in err, err


def test_save_vocabulary_is_whole_or_not_at_all(tmp_path, monkeypatch):
    # a full disk while vocab.txt is rewritten (a --resume) must leave the old file as it was
    import builtins
    from minibert.data.tokenizer import WordPieceTokenizer
    old = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"])
    path = old.save_vocabulary(tmp_path)
    before = path.read_bytes()
    new = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(5000)])
    real_open = builtins.open

    class Full:
        def __init__(self, f):
            self.f = f

        def write(self, data):
            self.f.write(data[:10])
            raise OSError(28, "No space left on device")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    def full_open(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        return Full(f) if "w" in mode else f
    monkeypatch.setattr(builtins, "open", full_open)
    with pytest.raises(OSError):
        new.save_vocabulary(tmp_path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vocab.txt"]


def test_train_tokenizer_says_when_the_corpus_has_fewer_pieces_than_asked(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat.\nthe dog ran.\n\nA bird flew.\nIt sang.\n")
    assert main(["train-tokenizer", "--corpus", str(corpus), "--vocab-size", "5000",
                 "--out", str(tmp_path / "v.txt")]) == 0
    err = capsys.readouterr().err
    assert "asked for 5,000" in err and "no more word pieces" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt", "v.txt"]      # no temporary file left


def test_fill_mask_on_a_file_names_the_folder_it_needs(tmp_path, capsys):
    f = tmp_path / "model.txt"
    f.write_text("not a model")
    assert main(["fill-mask", str(f), "the [MASK] ."]) == 2
    assert "is a file; give the model's folder" in capsys.readouterr().err


def test_a_token_cache_that_cannot_be_written_is_said_once(tmp_path, monkeypatch):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n\n".join(" ".join(["word"] * 5) + f" number {d}.\nAnd a second line {d}.\n"
                                  for d in range(40)))
    not_a_folder = tmp_path / "cache-is-a-file"
    not_a_folder.write_text("")
    monkeypatch.setenv("MINIBERT_CACHE", str(not_a_folder))
    lines = []
    pretrain(TrainArgs(corpus=str(corpus), vocab_size=120, config="tiny", batch_size=4, seq_len=16, steps=1,
                       eval_instances=4, progress=False, plot=False, out=str(tmp_path / "run")), log=lines.append)
    said = [line for line in lines if "token cache" in line]
    assert len(said) == 1 and "cannot be written" in said[0] and "MINIBERT_CACHE" in said[0], lines
