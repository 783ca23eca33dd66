"""Smaller hostile cases: train-tokenizer's note and its --out, fill-mask on long text and large
vocabularies, --vocab naming a folder, forward() without input_ids, --stop-at behind a checkpoint,
an unknown MINIBERT_ATTENTION."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import minibert as mb
from minibert.data.tokenizer import WordPieceTokenizer
from minibert.cli import main
from minibert.train import TrainArgs, pretrain
from minibert.data.vocab import bert_special_layout


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("MINIBERT_CACHE", str(tmp_path_factory.getbasetemp() / "small-cache"))


ROOT = Path(__file__).resolve().parents[1]


def _tiny_model_dir(tmp_path) -> Path:
    """A copy of a small model folder (config.json, model.safetensors, vocab.txt) to spoil at will."""
    vocab = bert_special_layout() + ["the", ".", "cat"]
    folder = tmp_path / "model"
    config = mb.BertConfig.from_preset("tiny", vocab_size=len(vocab), max_position_embeddings=64)
    mb.BertForPreTraining(config, seed=3).save_pretrained(folder)
    (folder / "vocab.txt").write_text("".join(t + "\n" for t in vocab))
    return folder


def run(argv, capsys):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err.strip()


# ------------------------------------------------------------------ train-tokenizer
def test_a_vocabulary_that_stops_short_says_why_truly(corpus_file, tmp_path, capsys):
    # it said "every word is already one token" while words were still split (training stops
    # once no pair of pieces is seen twice)
    code, _, err = run(["train-tokenizer", "--corpus", corpus_file, "--vocab-size", 100000,
                        "--out", tmp_path / "v.txt"], capsys)
    assert code == 0, err
    note = err.splitlines()[-1]
    found = re.search(r"no pair of adjacent pieces is seen twice or more, where training stops; ([\d,]+) of its "
                      r"([\d,]+) distinct words are still split into pieces\)$", note)
    assert found and int(found.group(1).replace(",", "")) > 0, note
    tokenizer = WordPieceTokenizer.from_vocab_file(tmp_path / "v.txt")
    words = {w for line in corpus_file.read_text().splitlines() for w in tokenizer.basic.tokenize(line)}
    assert int(found.group(1).replace(",", "")) == sum(len(tokenizer.tokenize(w)) > 1 for w in words)
    (tmp_path / "tiny.txt").write_text("ab ab ab cd cd cd\n")
    code, _, err = run(["train-tokenizer", "--corpus", tmp_path / "tiny.txt", "--vocab-size", 1000,
                        "--out", tmp_path / "v2.txt"], capsys)
    assert code == 0 and err.endswith("(every word is already one token)"), err


def test_train_tokenizer_out_inside_a_file_is_one_line(corpus_file, tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    code, _, err = run(["train-tokenizer", "--corpus", corpus_file, "--out", tmp_path / "afile" / "v.txt"], capsys)
    assert code == 2 and err == f"minibert train-tokenizer: error: --out {tmp_path / 'afile' / 'v.txt'}: " \
                                f"{tmp_path / 'afile'} is a file, not a folder", err


def test_train_tokenizer_replaces_a_vocabulary_but_no_other_file(corpus_file, tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    code, _, err = run(["train-tokenizer", "--corpus", corpus_file, "--vocab-size", 300, "--out", notes], capsys)
    assert code == 2 and "already exists and is not a vocabulary" in err and len(err.splitlines()) == 1, err
    assert notes.read_text() == "my notes\n"
    vocab = tmp_path / "vocab.txt"
    for _ in range(2):
        code, out, err = run(["train-tokenizer", "--corpus", corpus_file, "--vocab-size", 300, "--out", vocab],
                             capsys)
        assert code == 0, err
    assert out.startswith(f"wrote {vocab} (it replaces the vocabulary that was there): ")


# ------------------------------------------------------------------ fill-mask
@pytest.fixture(scope="module")
def wide_model(tmp_path_factory):
    """A model with BERT's special layout (99 [unusedN]) and 1,500 words: probabilities of about 1/1,600."""
    vocab = bert_special_layout() + [f"word{i}" for i in range(1500)] + ["the", "."]
    folder = tmp_path_factory.mktemp("wide")
    config = mb.BertConfig.from_preset("tiny", vocab_size=len(vocab), max_position_embeddings=64)
    mb.BertForPreTraining(config, seed=3).save_pretrained(folder)
    (folder / "vocab.txt").write_text("".join(t + "\n" for t in vocab))
    return folder


def test_fill_mask_never_predicts_unused_slots_and_shows_small_probabilities(wide_model, capsys):
    code, out, err = run(["fill-mask", wide_model, "the word3 [MASK] word7 .", "--top-k", 200], capsys)
    assert code == 0, err
    shown = re.findall(r"(\S+) \(([^)]*)\)", out.splitlines()[1])
    assert len(shown) == 200
    assert not [t for t, _ in shown if t.startswith("[")], shown           # no [unusedN], no [CLS] ...
    assert all(float(p) > 0 for _, p in shown) and "(0.000)" not in out  # 0.00061 was printed as 0.000
    assert any("e-" in p for _, p in shown)


def test_fill_mask_says_when_it_cut_the_text(wide_model, capsys):
    text = "the [MASK] " + " ".join(f"word{i}" for i in range(100)) + " ."
    code, out, err = run(["fill-mask", wide_model, text], capsys)
    assert code == 0
    assert err == "note: the text is 103 tokens long and the model reads 62: its last 41 tokens were not read"
    assert "[MASK] #1:" in out


def test_fill_mask_names_a_missing_model_folder(tmp_path, capsys):
    code, _, err = run(["fill-mask", tmp_path / "nope", "the [MASK] ."], capsys)
    assert code == 2 and err == f"minibert fill-mask: error: model folder not found: {tmp_path / 'nope'}"


# ------------------------------------------------------------------ pretrain and the model
def test_a_vocab_that_is_a_folder_is_called_a_folder(corpus_file, tmp_path, wide_model, capsys):
    code, _, err = run(["pretrain", "--corpus", corpus_file, "--vocab", wide_model, "--out", tmp_path / "r"],
                       capsys)
    assert code == 2 and err == (f"minibert pretrain: error: --vocab {wide_model} is a folder; name the "
                                 f"vocabulary file in it (it holds {wide_model / 'vocab.txt'})"), err


def test_forward_without_input_ids_is_a_plain_error():
    model = mb.BertForPreTraining(mb.BertConfig.from_preset("tiny", vocab_size=50))
    with pytest.raises(TypeError, match=r"^input_ids is required"):
        model.forward(input_ids=None)
    with pytest.raises(TypeError, match=r"^input_ids is required"):
        mb.BertModel(model.config).forward(None, np.zeros((1, 3), dtype=int))


def test_a_stop_at_behind_the_checkpoint_is_refused(corpus_file, tmp_path, capsys):
    # it said "stopped at step 5 (--stop-at)" for --stop-at 3
    a = TrainArgs(corpus=str(corpus_file), vocab_size=400, config="tiny", batch_size=4, seq_len=32, steps=12,
                  eval_instances=8, progress=False, plot=False, out=str(tmp_path / "r"), stop_at=5)
    pretrain(a, log=lambda *x: None)
    code, _, err = run(["pretrain", "--corpus", corpus_file, "--vocab-size", 400, "--batch-size", 4, "--seq-len", 32,
                        "--steps", 12, "--eval-instances", 8, "--no-progress", "--no-plot", "--out", tmp_path / "r",
                        "--resume", "--stop-at", 3], capsys)
    assert code == 2 and err == (f"minibert pretrain: error: --stop-at 3 is behind the run: "
                                 f"{tmp_path / 'r' / 'checkpoint-00000005.npz'} is at step 5; give a later "
                                 f"--stop-at, or none to train to --steps"), err


def test_fill_mask_checks_top_k_and_text_and_names_a_lowercase_mask(wide_model):
    # top_k=0 gave [[]], -1 every token but one, 2.5 a TypeError from a slice; [mask] said only "no [MASK]"
    from minibert.model.inference import fill_mask
    model = mb.BertForPreTraining.from_pretrained(wide_model)
    tokenizer = WordPieceTokenizer.from_vocab_file(wide_model / "vocab.txt")
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match=r"^top_k must be a positive int"):
            fill_mask(model, tokenizer, "the [MASK] .", top_k=bad)
    with pytest.raises(TypeError, match=r"^text must be a str"):
        fill_mask(model, tokenizer, None)
    with pytest.raises(ValueError, match=r"\(in capitals: \[mask\] is read as a word\)$"):
        fill_mask(model, tokenizer, "the [mask] .")


def test_fill_mask_to_a_full_disk_fails_as_echo_does(tmp_path, capsys):
    # its predictions were lost without a word, and it exited 0; a reader that went away stays quiet
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    model = _tiny_model_dir(tmp_path)
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "minibert", "fill-mask", str(model), "the [MASK] ."],
                              stdout=full, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "minibert fill-mask: error: stdout could not be written (No space left on device): its output is lost"]
    gone = subprocess.run(f"{sys.executable} -m minibert fill-mask {model} 'the [MASK] .' | head -c 0",
                          shell=True, capture_output=True, text=True, cwd=ROOT)
    assert gone.returncode == 0 and gone.stderr == ""


def test_a_folder_where_a_file_belongs_is_called_a_folder(tmp_path):
    # "vocab.txt not found" and "no such file: DIR/gelu.py", of paths that exist as folders
    model = _tiny_model_dir(tmp_path)
    (model / "vocab.txt").unlink()
    (model / "vocab.txt").mkdir()
    done = subprocess.run([sys.executable, "-m", "minibert", "fill-mask", str(model), "the [MASK] ."],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"minibert fill-mask: error: {model / 'vocab.txt'} is a folder, not a file: "
                                   f"fill-mask needs the model's vocabulary beside it")
    (tmp_path / "ex" / "gelu.py").mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "exercises", "check", "gelu", "--path", str(tmp_path / "ex")],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 1
    assert f"{tmp_path / 'ex' / 'gelu.py'} is a folder, not a file" in done.stdout


def test_an_unknown_gpu_switch_is_named_once():
    # MINIBERT_ATTENTION=flahs (or Flash) left the fused attention off without a word
    # read when a GPU model's ops are imported; the CPU imports the module all the same
    show = "import minibert.accel.cuda.flash as flash; print(flash.ENABLED)"
    unknown = ("minibert: warning: MINIBERT_ATTENTION='flahs' is not a value it takes: 'flash' (fused attention "
               "in mixed precision on a GPU) or unset (unfused attention); using the unfused attention")
    for value, enabled, said in (("flahs", "False", unknown), ("flash", "True", ""), ("", "False", "")):
        done = subprocess.run([sys.executable, "-c", show], capture_output=True, text=True, cwd=ROOT,
                              env={**os.environ, "MINIBERT_ATTENTION": value})
        assert done.returncode == 0 and done.stdout.strip() == enabled, done
        assert done.stderr.strip() == said, done.stderr
    # MINIBERT_CUBLAS=Direct likewise left the products to CuPy without a word
    show = "import minibert.accel.cuda.gemm as gemm; print(gemm.DIRECT)"
    for value, enabled, said in (("Direct", "False", "MINIBERT_CUBLAS='Direct' is not a value it takes: 'direct'"),
                                 ("direct", "True", ""), ("", "False", "")):
        done = subprocess.run([sys.executable, "-c", show], capture_output=True, text=True, cwd=ROOT,
                              env={**os.environ, "MINIBERT_CUBLAS": value})
        assert done.returncode == 0 and done.stdout.strip() == enabled, done
        assert said in done.stderr and (said or not done.stderr.strip()), done.stderr


@pytest.mark.parametrize("script", sorted(str(p.relative_to(ROOT)) for p in (*ROOT.glob("tools/*.py"),
                                                                              *ROOT.glob("benchmarks/*.py"))
                                          if "argparse" in p.read_text()))
def test_every_scripts_help_prints(script):
    # tools/make_ablation_results.py --help raised ValueError: an ablation's name holds a '%'
    done = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("usage:"), done.stderr[-500:]
