"""The pre-training loop: exact resume, signals, crashes, NaN, bad arguments, outputs."""
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from minibert.train.checkpoint_files import list_checkpoints, load_checkpoint
from minibert.cli import main
from minibert.train import TrainArgs, TrainingError, pretrain
from conftest import hold_lock_elsewhere

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIBERT_CACHE", str(tmp_path / "cache"))


def small_args(corpus_file, out, **kw):
    base = dict(corpus=str(corpus_file), vocab_size=400, config="tiny", steps=12, batch_size=4, seq_len=32,
                lr=1e-3, warmup=2, eval_every=6, save_every=3, log_every=1, eval_instances=8,
                progress=False, plot=False, out=str(out))
    base.update(kw)
    return TrainArgs(**base)


def train_losses(out):
    rows = [json.loads(l) for l in (Path(out) / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"]) for r in rows if r["kind"] == "train"]


def test_resume_is_bit_identical(corpus_file, tmp_path, either_path):
    pretrain(small_args(corpus_file, tmp_path / "once", kernels=either_path), log=lambda *a: None)
    first = pretrain(small_args(corpus_file, tmp_path / "twice", stop_at=6, kernels=either_path),
                     log=lambda *a: None)
    assert first.stopped_by == "stop_at" and first.step == 6
    assert not (tmp_path / "twice" / "model").exists()
    result = pretrain(small_args(corpus_file, tmp_path / "twice", resume=True, kernels=either_path),
                      log=lambda *a: None)
    assert result.model.ops.__name__ == ("minibert.ops" if either_path == "reference" else "minibert.accel.cpu")
    once, twice = train_losses(tmp_path / "once"), train_losses(tmp_path / "twice")
    assert [s for s, _ in once] == list(range(1, 13))
    assert once == twice  # every step's loss, bit for bit
    a = load_checkpoint(list_checkpoints(tmp_path / "once")[-1])[0]["params"]
    b = load_checkpoint(list_checkpoints(tmp_path / "twice")[-1])[0]["params"]
    np.testing.assert_array_equal(a, b)


def test_outputs_load_in_transformers(corpus_file, tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    result = pretrain(small_args(corpus_file, tmp_path, plot=True, keep=2), log=lambda *a: None)
    assert (tmp_path / "loss.png").stat().st_size > 10_000
    assert len(list_checkpoints(tmp_path)) == 2  # only the last --keep
    kinds = [json.loads(l)["kind"] for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert kinds.count("eval") == 3 and kinds.count("train") == 12  # steps 0, 6, 12
    ev = result.final_eval
    assert {"mlm_loss", "mlm_acc", "nsp_acc", "unigram_baseline", "nsp_majority"} <= set(ev)
    hf = transformers.BertForPreTraining.from_pretrained(tmp_path / "model").eval()
    tok = transformers.BertTokenizer.from_pretrained(tmp_path / "model")
    enc = tok("the function returns a value", return_tensors="pt")
    ours = result.model.forward(enc["input_ids"].numpy(), enc["token_type_ids"].numpy(),
                                enc["attention_mask"].numpy(), train=False)
    with torch.no_grad():
        ref = hf(**enc)
    np.testing.assert_allclose(ours.mlm_logits, ref.prediction_logits.numpy(), rtol=1e-4, atol=1e-4)
    assert result.tokenizer.encode("the function returns a value")["input_ids"] == enc["input_ids"][0].tolist()


def test_nan_loss_stops_without_a_poisoned_checkpoint(corpus_file, tmp_path):
    with pytest.raises(TrainingError) as err:
        pretrain(small_args(corpus_file, tmp_path, lr=1e30, warmup=0, save_every=1), log=lambda *a: None)
    msg = str(err.value)
    step = int(msg.split()[1].rstrip(":"))
    assert "Last good checkpoint" in msg and f"checkpoint-{step - 1:08d}.npz" in msg
    saved = list_checkpoints(tmp_path)
    assert saved and int(saved[-1].stem.split("-")[1]) == step - 1
    for path in saved:
        assert np.isfinite(load_checkpoint(path)[0]["params"]).all()


def _gpu_usable():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def _run_cli(args, capsys):
    code = main(args)
    err = capsys.readouterr().err.strip()
    return code, err


@pytest.mark.parametrize("extra,expected", [
    (["--config", "huge"], "--config 'huge' is neither a preset"),
    (["--batch-size", "0"], "--batch-size must be a positive integer"),
    (["--seq-len", "513"], "--seq-len must be between 5"),
    (["--steps", "-3"], "--steps must be a positive integer"),
    (["--lr", "0"], "--lr must be a positive number"),
    (["--device", "cuda"], "CuPy"),
])
def test_bad_arguments_fail_in_one_line(corpus_file, tmp_path, capsys, extra, expected):
    if extra[0] == "--device" and _gpu_usable():
        pytest.skip("a GPU is usable here: --device cuda is not an error")
    code, err = _run_cli(["pretrain", "--corpus", str(corpus_file), "--out", str(tmp_path / "o")] + extra, capsys)
    assert code == 2
    assert expected in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "o" / "vocab.txt").exists()  # failed before any work


def test_unwritable_out(corpus_file, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, err = _run_cli(["pretrain", "--corpus", str(corpus_file), "--out", str(blocker / "run")], capsys)
    assert code == 2 and f"{blocker} is a file, not a folder" in err and len(err.splitlines()) == 1


def test_resume_refuses_another_run_and_damaged_checkpoints(corpus_file, tmp_path, capsys):
    pretrain(small_args(corpus_file, tmp_path, steps=4, save_every=2), log=lambda *a: None)
    code, err = _run_cli(["pretrain", "--corpus", str(corpus_file), "--out", str(tmp_path), "--resume",
                          "--config", "mini", "--vocab-size", "400", "--steps", "4", "--batch-size", "4",
                          "--seq-len", "32", "--warmup", "2", "--lr", "1e-3", "--no-progress"], capsys)
    assert code == 2 and "different run" in err and "config differs" in err, err
    last = list_checkpoints(tmp_path)[-1]
    last.write_bytes(last.read_bytes()[:-100])  # a truncated file
    code, err = _run_cli(["pretrain", "--corpus", str(corpus_file), "--out", str(tmp_path), "--resume",
                          "--vocab-size", "400", "--steps", "4", "--batch-size", "4", "--seq-len", "32",
                          "--warmup", "2", "--lr", "1e-3", "--no-progress"], capsys)
    assert code == 2 and "damaged" in err and len(err.splitlines()) == 1, err
    code, err = _run_cli(["pretrain", "--corpus", str(corpus_file), "--out", str(tmp_path)], capsys)
    assert code == 2 and "--resume" in err  # an existing run is never overwritten silently


def _spawn(corpus_file, out, *extra):
    cmd = [sys.executable, "-m", "minibert", "pretrain", "--corpus", str(corpus_file), "--out", str(out),
           "--vocab-size", "400", "--config", "tiny", "--steps", "100000", "--batch-size", "4",
           "--seq-len", "32", "--save-every", "5", "--eval-every", "100000", "--log-every", "1",
           "--no-progress", "--no-plot", *extra]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def _wait_for_checkpoints(out, n, proc, timeout=120):
    deadline = time.time() + timeout
    while len(list_checkpoints(out)) < n or not list_checkpoints(out):
        assert proc.poll() is None, proc.stdout.read()
        assert time.time() < deadline, "no checkpoint appeared in time"
        time.sleep(0.2)


def _last_logged_step(out):
    steps = [s for s, _ in train_losses(out)]
    return steps[-1] if steps else 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signals_save_and_exit_cleanly(corpus_file, tmp_path, sig):
    proc = _spawn(corpus_file, tmp_path)
    _wait_for_checkpoints(tmp_path, 1, proc)
    proc.send_signal(sig)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, output
    assert f"{signal.Signals(sig).name} received: saved" in output
    last = int(list_checkpoints(tmp_path)[-1].stem.split("-")[1])
    assert last == _last_logged_step(tmp_path)  # the step in flight was finished and saved


def test_kill_9_loses_at_most_save_every_steps(corpus_file, tmp_path):
    proc = _spawn(corpus_file, tmp_path)
    _wait_for_checkpoints(tmp_path, 2, proc)
    proc.kill()  # SIGKILL: no handler runs
    proc.wait(timeout=30)
    done = _last_logged_step(tmp_path)
    last = int(list_checkpoints(tmp_path)[-1].stem.split("-")[1])
    assert done - last <= 5
    proc = _spawn(corpus_file, tmp_path, "--resume")
    deadline = time.time() + 120
    # the killed run logged up to step `done`: only the resumed run can log past it
    while _last_logged_step(tmp_path) <= done + 2:
        assert proc.poll() is None and time.time() < deadline
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert f"resumed from {tmp_path / 'checkpoint-'}{last:08d}.npz at step {last}" in output
    steps = [s for s, _ in train_losses(tmp_path)]
    assert steps == list(range(1, steps[-1] + 1))  # the log was rewound to the checkpoint: no gap, no repeat


def test_fill_mask_and_train_tokenizer_commands(corpus_file, tmp_path, capsys):
    pretrain(small_args(corpus_file, tmp_path / "run", steps=3), log=lambda *a: None)
    assert main(["fill-mask", str(tmp_path / "run" / "model"), "the [MASK] returns a value", "--top-k", "3"]) == 0
    out = capsys.readouterr().out
    assert "[MASK] #1:" in out and out.count("(0.") == 3
    assert main(["fill-mask", str(tmp_path / "run" / "model"), "no mask here"]) == 2
    assert "no [MASK]" in capsys.readouterr().err
    assert main(["train-tokenizer", "--corpus", str(corpus_file), "--vocab-size", "300",
                 "--out", str(tmp_path / "v.txt")]) == 0
    vocab = (tmp_path / "v.txt").read_text().splitlines()
    assert len(vocab) <= 300 and vocab[0] == "[PAD]" and "[MASK]" in vocab


def test_help_reads_like_a_manual(capsys):
    with pytest.raises(SystemExit):
        main(["pretrain", "--help"])
    text = capsys.readouterr().out
    for piece in ("--corpus", "--resume", "--stop-at", "examples:", "metrics.jsonl", "SIGTERM"):
        assert piece in text


def test_plot_keeps_the_matplotlib_backend_and_records_reach_a_callback(corpus_file, tmp_path):
    import matplotlib
    backend = matplotlib.get_backend()
    seen = []
    pretrain(small_args(corpus_file, tmp_path, steps=3, eval_every=3, plot=True), log=lambda *a: None,
             on_record=seen.append)
    assert matplotlib.get_backend() == backend
    assert [(r["kind"], r["step"]) for r in seen] == [("eval", 0), ("train", 1), ("train", 2), ("train", 3),
                                                      ("eval", 3)]


def test_demo_runs_end_to_end(tmp_path, capsys):
    from minibert.demo import run_demo
    assert run_demo(tmp_path / "demo", steps=2) == 0
    out = capsys.readouterr().out
    assert "held-out after 2 steps" in out and "MLM loss" in out and "MLM top-5 accuracy" in out
    assert "under minibert" in out and "by frequency" in out     # the held-out examples
    assert (tmp_path / "demo" / "loss.png").is_file() and (tmp_path / "demo" / "model" / "vocab.txt").is_file()
    assert run_demo(tmp_path / "demo", steps=1) == 0  # its own earlier run is replaced
    precious = tmp_path / "thesis"
    precious.mkdir()
    (precious / "chapter1.tex").write_text("years of work")
    with pytest.raises(ValueError, match="no earlier demo wrote it"):
        run_demo(precious, steps=1)
    assert (precious / "chapter1.tex").read_text() == "years of work"


def test_demo_never_deletes_what_it_did_not_make(corpus_file, tmp_path, monkeypatch):
    from minibert.demo import run_demo
    # a pre-training run has a metrics.jsonl too: it is not the demo's to delete
    run = tmp_path / "run"
    pretrain(small_args(corpus_file, run, steps=2, save_every=2), log=lambda *a: None)
    before = sorted(p.name for p in run.iterdir())
    with pytest.raises(ValueError, match="no earlier demo wrote it"):
        run_demo(run, steps=1)
    assert sorted(p.name for p in run.iterdir()) == before
    # nor the current folder, even one that holds a demo marker
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / ".minibert-demo").write_text("")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="current folder"):
        run_demo(".", steps=1)
    assert (tmp_path / "notes.txt").is_file()
    # a bad setting is refused before anything is deleted
    demo = tmp_path / "demo"
    assert run_demo(demo, steps=1) == 0
    with pytest.raises(ValueError, match="--steps must be a positive integer"):
        run_demo(demo, steps=0)
    assert (demo / "model").is_dir()


def test_a_fresh_run_never_replaces_files_no_run_wrote(corpus_file, tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "vocab.txt").write_text("my own vocabulary\n")
    code, err = _run_cli(["pretrain", "--corpus", str(corpus_file), "--out", str(mine)], capsys)
    assert code == 2 and "vocab.txt" in err and "no minibert run wrote" in err, err
    assert (mine / "vocab.txt").read_text() == "my own vocabulary\n"
    code, err = _run_cli(["pretrain", "--corpus", str(corpus_file), "--out", ""], capsys)
    assert code == 2 and "--out must name a folder" in err


def test_a_run_that_died_before_its_first_checkpoint_is_replaced_cleanly(corpus_file, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(TrainingError):          # diverges at once: no checkpoint written
        pretrain(small_args(corpus_file, out, lr=1e30, warmup=0, save_every=100), log=lambda *a: None)
    assert (out / "metrics.jsonl").is_file() and not list_checkpoints(out)
    pretrain(small_args(corpus_file, out, steps=3, seed=5), log=lambda *a: None)
    rows = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["step"]) for r in rows].count(("eval", 0)) == 1   # no record of the dead run


def test_resume_refuses_other_held_out_settings(corpus_file, tmp_path, capsys):
    pretrain(small_args(corpus_file, tmp_path / "r", steps=4, stop_at=2, save_every=2), log=lambda *a: None)
    for extra, name in [(dict(heldout_fraction=0.3), "heldout_fraction"), (dict(eval_instances=16), "eval_instances")]:
        with pytest.raises(Exception, match=f"different run.*{name}"):
            pretrain(small_args(corpus_file, tmp_path / "r", steps=4, save_every=2, resume=True, **extra),
                     log=lambda *a: None)
    # a non-default value is kept by its own resume
    pretrain(small_args(corpus_file, tmp_path / "h", steps=4, stop_at=2, save_every=2, heldout_fraction=0.2),
             log=lambda *a: None)
    pretrain(small_args(corpus_file, tmp_path / "h", steps=4, save_every=2, heldout_fraction=0.2, resume=True),
             log=lambda *a: None)


def test_resume_survives_a_last_metrics_line_cut_short(corpus_file, tmp_path):
    out = tmp_path / "r"
    pretrain(small_args(corpus_file, out, steps=4, stop_at=2, save_every=2), log=lambda *a: None)
    with open(out / "metrics.jsonl", "a") as f:
        f.write('{"kind": "train", "step": 3, "lo')
    notes = []
    pretrain(small_args(corpus_file, out, steps=4, save_every=2, resume=True), log=notes.append)
    assert any("incomplete" in str(n) for n in notes)
    assert [s for s, _ in train_losses(out)] == [1, 2, 3, 4]
    (out / "metrics.jsonl").write_text('{"my": "notes"}\n' + (out / "metrics.jsonl").read_text())
    with pytest.raises(ValueError, match=r"metrics.jsonl, line 1: not a record"):
        pretrain(small_args(corpus_file, out, steps=4, save_every=2, resume=True), log=lambda *a: None)


@pytest.mark.parametrize("extra,expected", [
    (["--seed", "-1"], "--seed must be an integer >= 0"),
    (["--eval-instances", "1"], "--eval-instances must be at least 2"),
    (["--seq-len", "8"], "raise --seq-len"),
    (["--data-dir", "/tmp"], "--data-dir is where WikiText-2 is read from"),
    (["--vocab", "/tmp/any-vocab.txt"], "--vocab-size sets the size of a vocabulary trained"),
])
def test_more_bad_settings_name_their_cause(corpus_file, tmp_path, capsys, extra, expected):
    code, err = _run_cli(["pretrain", "--corpus", str(corpus_file), "--out", str(tmp_path / "o"),
                          "--vocab-size", "400", "--no-progress", "--no-plot"] + extra, capsys)
    assert code == 2 and expected in err, err


def test_prefetch_hands_out_the_stream_in_order_and_reports_the_consumed_position(corpus_file, tmp_path):
    from minibert.train import BatchStream, Prefetch, prepare_data
    a = small_args(corpus_file, tmp_path)
    _, _, stream, _ = prepare_data(a, tmp_path)
    plain = BatchStream(stream.dataset, a.batch_size, a.seed)
    pre = Prefetch(stream)
    try:
        for i in range(stream.per_epoch + 3):          # across an epoch boundary
            got, want = pre.next_batch(), plain.next_batch()
            for k in want:
                np.testing.assert_array_equal(got[k], want[k])
            assert pre.state_dict() == plain.state_dict()  # not the stream's, which runs ahead
        assert pre.wait_s >= 0.0
    finally:
        pre.close()


@pytest.mark.parametrize("mixed", [False, True])
def test_accumulation_averages_the_micro_batch_gradients(corpus_file, tmp_path, monkeypatch, mixed):
    """The gradient AdamW receives after --accum 3 is the mean of the three micro-batches' gradients."""
    from minibert.model import BertForPreTraining
    from minibert.optim import AdamW
    from minibert.train import prepare_data
    seen = []
    real_step = AdamW.step
    monkeypatch.setattr(AdamW, "step", lambda self, lr=None, **kw: (seen.append(self.store.grad.copy()),
                                                                    real_step(self, lr, **kw)))
    args = small_args(corpus_file, tmp_path / "run", accum=3, steps=2, warmup=1, max_grad_norm=0.0, dropout=0.0,
                      mixed_precision=mixed)
    result = pretrain(args, log=lambda *a: None)
    assert len(seen) == 2
    # the same three batches by hand, each through a fresh copy of the initial model
    _, _, stream, _ = prepare_data(args, tmp_path / "by-hand")
    expected = 0
    for _ in range(3):
        model = BertForPreTraining(result.model.config, seed=args.seed, mixed_precision=mixed)
        model.seed_dropout((args.seed, 0))
        model.forward(**stream.next_batch(), train=True)
        model.backward(loss_scale=1024.0 if mixed else 1.0)
        expected = expected + model.params.grad / (1024.0 if mixed else 1.0)
    expected /= 3
    rel = np.linalg.norm(seen[0] - expected) / np.linalg.norm(expected)
    assert rel < (2e-3 if mixed else 1e-6), rel


def test_a_cased_vocabulary_is_used_cased(tmp_path):
    from minibert.data.tokenizer import WordPieceTokenizer, train_wordpiece
    text = ["The Python Software Foundation"] * 5 + ["the python software foundation"] * 5
    path = train_wordpiece(text, vocab_size=200, do_lower_case=False).save_vocabulary(tmp_path)
    tok = WordPieceTokenizer.from_vocab_file(path)
    assert not tok.do_lower_case and tok.tokenize("Python")[0] == "Python"
    path = train_wordpiece(text, vocab_size=200).save_vocabulary(tmp_path / "uncased")
    assert WordPieceTokenizer.from_vocab_file(path).do_lower_case


def test_a_vocabulary_that_does_not_fit_is_reported(corpus_file, tmp_path):
    notes = []
    pretrain(small_args(corpus_file, tmp_path / "o", vocab_size=110, steps=1, warmup=0), log=notes.append)
    assert any("[UNK]" in str(n) and "--vocab-size 110 is too small" in str(n) for n in notes), notes
    specials = tmp_path / "specials.txt"
    specials.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
    with pytest.raises(ValueError, match="only special tokens"):
        pretrain(small_args(corpus_file, tmp_path / "p", vocab=str(specials)), log=lambda *a: None)


def test_stop_at_says_how_to_go_on(corpus_file, tmp_path):
    notes = []
    pretrain(small_args(corpus_file, tmp_path, steps=4, stop_at=2, save_every=2), log=notes.append)
    assert any("stopped at step 2 (--stop-at)" in str(n) and "--resume" in str(n) for n in notes)


def test_fill_mask_and_train_tokenizer_messages(corpus_file, tmp_path, capsys):
    run = tmp_path / "run"
    pretrain(small_args(corpus_file, run, steps=2, stop_at=1, save_every=1), log=lambda *a: None)
    code, err = _run_cli(["fill-mask", str(run), "a [MASK] b"], capsys)
    assert code == 2 and "folder of a pre-training run" in err and "model" in err, err
    code, err = _run_cli(["train-tokenizer", "--corpus", str(corpus_file), "--vocab-size", "50",
                          "--out", str(tmp_path / "v.txt")], capsys)
    assert code == 2 and "at least 105" in err, err
    code, err = _run_cli(["train-tokenizer", "--corpus", str(corpus_file), "--vocab-size", "300",
                          "--out", str(corpus_file)], capsys)
    assert code == 2 and "is the corpus itself" in err, err
    assert corpus_file.read_text().count("\n") > 100
    # a run's or a model's own vocabulary is not replaced: its checkpoints or weights hold those token ids
    pretrain(small_args(corpus_file, run, steps=2, resume=True), log=lambda *a: None)
    for vocab, whose in ((run / "vocab.txt", "of the run in"), (run / "model" / "vocab.txt", "of the model in")):
        before = vocab.read_bytes()
        code, err = _run_cli(["train-tokenizer", "--corpus", str(corpus_file), "--vocab-size", "300",
                              "--out", str(vocab)], capsys)
        assert code == 2 and f"is the vocabulary {whose}" in err and "another --out" in err, err
        assert vocab.read_bytes() == before
    for args, says in ((["--out", str(tmp_path / "new") + "/"], "names a folder; name the vocabulary file"),
                       (["--out", str(tmp_path / "v.txt"), "--data-dir", str(tmp_path)],
                        "--data-dir is where WikiText-2 is read from")):
        code, err = _run_cli(["train-tokenizer", "--corpus", str(corpus_file), "--vocab-size", "300", *args], capsys)
        assert code == 2 and says in err, err
    assert not (tmp_path / "new").exists() and not (tmp_path / "v.txt").exists()


def test_a_resumed_run_keeps_its_vocabulary(corpus_file, tmp_path):
    # a --vocab that differs was refused only after it had replaced the run's vocab.txt: no resume was left
    from minibert.data.tokenizer import train_wordpiece
    run, other = tmp_path / "run", tmp_path / "other.txt"
    train_wordpiece(["one more text to learn other pieces from"] * 4, 140).write_vocab_file(other)
    pretrain(small_args(corpus_file, run, steps=4, stop_at=2), log=lambda *a: None)
    before = (run / "vocab.txt").read_bytes()
    with pytest.raises(ValueError, match=r"--vocab .*other.txt is not the vocabulary of the run in .*: a resumed run "
                                         r"keeps its own; leave --vocab out"):
        pretrain(small_args(corpus_file, run, steps=4, resume=True, vocab=str(other)),
                 log=lambda *a: None)
    assert (run / "vocab.txt").read_bytes() == before
    same = tmp_path / "same.txt"                 # the run's own vocabulary under another name: resumed
    same.write_bytes(before)
    pretrain(small_args(corpus_file, run, steps=4, resume=True, vocab=str(same)), log=lambda *a: None)
    assert (run / "model").is_dir()


def test_a_truncated_mask_is_named(tmp_path):
    import minibert as mb
    from minibert.data.tokenizer import train_wordpiece
    from minibert.train import fill_mask
    tok = train_wordpiece(["word after word"] * 5, vocab_size=120)
    model = mb.BertForPreTraining(mb.BertConfig.from_preset("tiny", vocab_size=tok.vocab_size,
                                                            max_position_embeddings=16))
    with pytest.raises(ValueError, match="beyond the model's 16 positions"):
        fill_mask(model, tok, "word " * 40 + "[MASK]")
    with pytest.raises(ValueError, match=r"no \[MASK\] in 'word word.*\(\d+ characters\)"):
        fill_mask(model, tok, "word " * 40)


@pytest.mark.parametrize("message", ["Unable to allocate 1.32 GiB", "", "numpy"])
def test_out_of_memory_is_one_line(corpus_file, tmp_path, capsys, monkeypatch, message):
    import minibert.train.loop as train_module   # where pretrain looks up BertForPreTraining

    def no_memory(*a, **k):
        if message == "numpy":           # NumPy's own error, which writes its text from the shape it was given
            np.zeros(2 ** 60, np.float32)
        raise MemoryError(message) if message else MemoryError()
    monkeypatch.setattr(train_module, "BertForPreTraining", no_memory)
    code, err = _run_cli(["pretrain", "--corpus", str(corpus_file), "--out", str(tmp_path / "o"),
                          "--vocab-size", "400", "--no-progress"], capsys)
    assert code == 2 and "out of memory" in err and "--batch-size" in err and len(err.splitlines()) == 1
    said = {"": "an allocation failed", "numpy": "Unable to allocate 4.00 EiB for an array with shape"}
    assert f"({said.get(message, message)}" in err, err


def test_two_runs_never_share_a_folder(corpus_file, tmp_path):
    pytest.importorskip("fcntl")
    from minibert.demo import run_demo
    out = tmp_path / "run"
    out.mkdir()
    other = hold_lock_elsewhere(out)
    try:
        with pytest.raises(ValueError, match="another run is using --out"):
            pretrain(small_args(corpus_file, out, steps=2), log=lambda *a: None)
    finally:
        other.kill()
        other.wait()
    pretrain(small_args(corpus_file, out, steps=2), log=lambda *a: None)      # free again
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []
    # the demo takes the lock before it clears its folder: a demo in progress keeps its files
    demo = tmp_path / "demo"
    assert run_demo(demo, steps=1) == 0
    before = sorted(p.name for p in demo.iterdir())
    other = hold_lock_elsewhere(demo)
    try:
        with pytest.raises(ValueError, match="another run is using --out"):
            run_demo(demo, steps=1)
    finally:
        other.kill()
        other.wait()
    assert sorted(p.name for p in demo.iterdir()) == before


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o027, 0o640)])
def test_checkpoints_are_ordinary_files(corpus_file, tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        pretrain(small_args(corpus_file, tmp_path / "r", steps=2, save_every=2), log=lambda *a: None)
    finally:
        os.umask(old)
    assert list_checkpoints(tmp_path / "r")[-1].stat().st_mode & 0o777 == mode    # as any file made then


def test_poisoned_weights_name_the_last_good_checkpoint(corpus_file, tmp_path):
    # step 1 runs at the warm-up's learning rate 0 (a good checkpoint), step 2 at 5e299
    with pytest.raises(TrainingError, match=r"NaN or inf.*Last good checkpoint: .*checkpoint-00000001.*lower --lr"):
        pretrain(small_args(corpus_file, tmp_path, steps=6, save_every=1, warmup=2, lr=1e300),
                 log=lambda *a: None)


def test_checkpoints_past_step_99_999_999_are_found_in_order(tmp_path):
    from minibert.train.checkpoint_files import checkpoint_path
    for step in (99_999_999, 100_000_001, 7):
        checkpoint_path(tmp_path, step).write_bytes(b"")
    assert [p.name for p in list_checkpoints(tmp_path)] == [
        "checkpoint-00000007.npz", "checkpoint-99999999.npz", "checkpoint-100000001.npz"]


def test_a_checkpoint_of_an_earlier_identity_version_is_refused_in_one_line(corpus_file, tmp_path):
    # written before the held-out settings were part of a run's identity: no run of today continues it
    from minibert.train.checkpoint_files import CheckpointError, save_checkpoint
    out = tmp_path / "r"
    kw = dict(steps=4, save_every=2, heldout_fraction=0.2, eval_instances=16)
    pretrain(small_args(corpus_file, out, stop_at=2, **kw), log=lambda *a: None)
    path = list_checkpoints(out)[-1]
    arrays, meta = load_checkpoint(path)
    for key in ("identity_version", "heldout_fraction", "eval_instances", "mixed_precision"):
        del meta["run"][key]
    step = meta.pop("step")
    path.unlink()
    save_checkpoint(out, step, arrays, meta)
    with pytest.raises(CheckpointError, match=r"was written by an earlier minibert.*identity version 1, now 2"):
        pretrain(small_args(corpus_file, out, resume=True, **kw), log=lambda *a: None)


def test_a_run_may_read_its_own_vocabulary(corpus_file, tmp_path):
    out = tmp_path / "r"
    pretrain(small_args(corpus_file, tmp_path / "first", steps=1, warmup=0), log=lambda *a: None)
    out.mkdir()
    (out / "vocab.txt").write_bytes((tmp_path / "first" / "vocab.txt").read_bytes())
    pretrain(small_args(corpus_file, out, steps=1, warmup=0, vocab=str(out / "vocab.txt")), log=lambda *a: None)


def test_an_old_demo_folder_is_still_the_demos(tmp_path):
    from minibert.demo import MARKER, run_demo
    demo = tmp_path / "demo"
    assert run_demo(demo, steps=1) == 0
    (demo / MARKER).unlink()                 # as the demo left it before it wrote a marker
    (demo / "run.json").unlink()
    assert run_demo(demo, steps=1) == 0
    (demo / "notes.txt").write_text("mine")  # anything a run does not write keeps the folder safe
    with pytest.raises(ValueError, match="notes.txt"):
        run_demo(demo, steps=1)
    assert (demo / "notes.txt").is_file()


def test_train_tokenizer_reports_a_vocabulary_too_small_in_one_line(corpus_file, tmp_path, capsys):
    code, err = _run_cli(["train-tokenizer", "--corpus", str(corpus_file), "--vocab-size", "110",
                          "--out", str(tmp_path / "v.txt")], capsys)
    assert code == 0 and (tmp_path / "v.txt").is_file()
    assert "warning: train_wordpiece: vocab_size=110 holds only 6 of the" in err and "UserWarning" not in err, err
