"""Runs in a hostile world: stops between log steps, unreadable or incomplete checkpoints,
runs started at once on one folder, an --out that is a file, a disk that fills up."""
import builtins
import dataclasses
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import minibert.train.loop as train_module   # where pretrain looks up the names patched here
from minibert.train.checkpoint_files import CheckpointError, list_checkpoints, load_checkpoint, save_checkpoint
from minibert.cli import main
from minibert.train import TrainArgs, TrainingError, pretrain
from conftest import hold_lock_elsewhere

ROOT = Path(__file__).resolve().parents[1]
TIMING = ("tokens_per_s", "data_wait")       # the only fields of a record that may differ between runs
KW = dict(steps=12, log_every=5, save_every=3, eval_every=6)   # log steps 5, 10, 12; checkpoints every 3


def quiet(*args):
    pass


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def _cache(cache_dir, monkeypatch):
    monkeypatch.setenv("MINIBERT_CACHE", str(cache_dir))


def small_args(corpus_file, out, **kw):
    base = dict(corpus=str(corpus_file), vocab_size=400, config="tiny", batch_size=4, seq_len=32, lr=1e-3,
                warmup=2, eval_instances=8, progress=False, plot=False, out=str(out), **KW)
    base.update(kw)
    return TrainArgs(**base)


def as_command(a: TrainArgs, *extra) -> list:
    """The command line of the run ``a`` (the settings small_args sets)."""
    flags = ["pretrain", "--corpus", a.corpus, "--out", a.out, "--no-progress", "--no-plot"]
    for name in ("vocab_size", "steps", "batch_size", "seq_len", "warmup", "eval_every", "save_every",
                 "log_every", "eval_instances", "keep"):
        flags += [f"--{name.replace('_', '-')}", str(getattr(a, name))]
    return flags + list(extra)


def run_cli(argv, capsys):
    code = main(argv)
    return code, capsys.readouterr().err.strip()


def records(history_or_out):
    """Every record of a run (a folder's metrics.jsonl, or a RunResult's history), timing left out."""
    if isinstance(history_or_out, (str, Path)):
        lines = (Path(history_or_out) / "metrics.jsonl").read_text().splitlines()
        history_or_out = [json.loads(line) for line in lines]
    return [{k: v for k, v in r.items() if k not in TIMING} for r in history_or_out]


@pytest.fixture(scope="module")
def once(corpus_file, tmp_path_factory, cache_dir):
    """The run of KW that nothing stopped."""
    with pytest.MonkeyPatch.context() as m:
        m.setenv("MINIBERT_CACHE", str(cache_dir))
        result = pretrain(small_args(corpus_file, tmp_path_factory.mktemp("once")), log=quiet)
    assert records(result.out) == records(result.history)
    assert [r["step"] for r in result.history if r["kind"] == "train"] == [5, 10, 12]
    return result


@pytest.fixture
def uninterrupted(once):
    """The records of the run of KW that nothing stopped."""
    return records(once.history)


def newest_step(out) -> int:
    return int(list_checkpoints(out)[-1].stem.split("-")[1])


def leftovers(out) -> list:
    """Temporary files a write leaves behind if it does not clean up after a failure."""
    return sorted(p.name for p in Path(out).iterdir() if p.name.endswith(".tmp") or p.name.startswith(".write"))


# ------------------------------------------------------- stops between log steps
@pytest.mark.parametrize("how", ["stop_at", "SIGTERM", "kill -9"])
def test_metrics_after_a_stop_between_log_steps_match_an_uninterrupted_run(corpus_file, tmp_path, monkeypatch,
                                                                          uninterrupted, how):
    out = tmp_path / "run"
    if how == "SIGTERM":             # arrives while step 7 runs
        real = train_module.linear_warmup_decay

        def lr_and_a_signal(step, *rest):
            if step == 6:
                assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None), "no handler: not sent"
                os.kill(os.getpid(), signal.SIGTERM)
            return real(step, *rest)
        with monkeypatch.context() as m:
            m.setattr(train_module, "linear_warmup_decay", lr_and_a_signal)
            first = pretrain(small_args(corpus_file, out), log=quiet)
    else:
        first = pretrain(small_args(corpus_file, out, stop_at=7), log=quiet)
    assert first.step == 7 and first.stopped_by in ("stop_at", "SIGTERM")
    assert newest_step(out) == 7
    if how == "kill -9":             # as a run killed in step 8 leaves it: the newest checkpoint is step 6's
        list_checkpoints(out)[-1].unlink()
    resumed = pretrain(small_args(corpus_file, out, resume=True), log=quiet)
    assert records(out) == uninterrupted                 # metrics.jsonl, record for record
    assert records(resumed.history) == uninterrupted     # what loss.png is drawn from


def test_a_checkpoint_without_the_log_window_is_refused_in_one_line(corpus_file, tmp_path):
    # every checkpoint holds the sums since the last train record: one without them is not a whole one
    out = tmp_path / "run"
    pretrain(small_args(corpus_file, out, stop_at=7), log=quiet)
    path = list_checkpoints(out)[-1]
    arrays, meta = load_checkpoint(path)
    meta = {k: v for k, v in meta.items() if k in ("run", "adam_t", "data", "step")}
    step = meta.pop("step")
    path.unlink()
    save_checkpoint(out, step, arrays, meta)
    with pytest.raises(CheckpointError, match=r"lacks usable log_window: it is not a whole checkpoint"):
        pretrain(small_args(corpus_file, out, resume=True), log=quiet)


# --------------------------------------------------------- unreadable checkpoints
def test_an_unreadable_checkpoint_is_not_called_damaged(corpus_file, tmp_path, monkeypatch, capsys):
    a = small_args(corpus_file, tmp_path / "run", stop_at=6)
    pretrain(a, log=quiet)
    newest = list_checkpoints(a.out)[-1]
    real_open = builtins.open

    def no_permission(file, *args, **kw):      # as chmod 000 does for anyone but root
        if isinstance(file, (str, os.PathLike)) and Path(file) == newest:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(file))
        return real_open(file, *args, **kw)
    monkeypatch.setattr(builtins, "open", no_permission)
    code, err = run_cli(as_command(a, "--resume"), capsys)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert str(newest) in err and "permission denied" in err and "permissions" in err, err
    assert "damaged" not in err and "delete" not in err, err
    assert newest.is_file()


@pytest.mark.parametrize("arrays_gone,meta_gone", [
    (("adam_m", "adam_v"), ()),
    ((), ("data",)),
    (("params",), ("adam_t", "run")),
])
def test_an_incomplete_checkpoint_names_what_it_lacks(corpus_file, tmp_path, capsys, arrays_gone, meta_gone):
    a = small_args(corpus_file, tmp_path / "run", stop_at=3)
    pretrain(a, log=quiet)
    path = list_checkpoints(a.out)[-1]
    arrays, meta = load_checkpoint(path)
    arrays = {k: v for k, v in arrays.items() if k not in arrays_gone}
    meta = {k: v for k, v in meta.items() if k not in meta_gone}
    step = meta.pop("step")
    path.unlink()
    save_checkpoint(a.out, step, arrays, meta)           # a valid checksum over what is left
    code, err = run_cli(as_command(a, "--resume"), capsys)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert str(path) in err and all(name in err for name in arrays_gone + meta_gone), err
    with pytest.raises(CheckpointError, match="lacks"):
        pretrain(dataclasses.replace(a, resume=True), log=quiet)


def test_a_checkpoint_with_weights_of_another_shape_is_refused(corpus_file, tmp_path):
    a = small_args(corpus_file, tmp_path / "run", stop_at=3)
    pretrain(a, log=quiet)
    path = list_checkpoints(a.out)[-1]
    arrays, meta = load_checkpoint(path)
    arrays["adam_v"] = arrays["adam_v"][:-1]
    step = meta.pop("step")
    path.unlink()
    save_checkpoint(a.out, step, arrays, meta)
    with pytest.raises(CheckpointError, match=r"adam_v holds \d+ values.*needs \d+"):
        pretrain(dataclasses.replace(a, resume=True), log=quiet)


# ----------------------------------------------------------- one --out, many runs
def test_runs_started_at_once_on_one_folder_all_hear_that_another_run_uses_it(corpus_file, tmp_path):
    pytest.importorskip("fcntl")
    out = tmp_path / "run"
    out.mkdir()
    holder = hold_lock_elsewhere(out)
    errors, threads, starts = [], 6, 40
    together = threading.Barrier(threads)

    def start_runs():
        together.wait()
        for _ in range(starts):
            try:
                pretrain(small_args(corpus_file, out), log=quiet)
            except Exception as exc:      # noqa: BLE001 -- every start must fail, each is checked below
                errors.append(f"{type(exc).__name__}: {exc}")
    try:
        workers = [threading.Thread(target=start_runs) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        holder.kill()
        holder.wait()
    wrong = [e for e in errors if "another run is using --out" not in e]
    assert len(errors) == threads * starts and not wrong, wrong[:3]
    assert leftovers(out) == []


def test_an_out_that_is_a_file_is_called_a_file(corpus_file, tmp_path, capsys):
    blocker = tmp_path / "notes.txt"
    blocker.write_text("mine")
    code, err = run_cli(["pretrain", "--corpus", str(corpus_file), "--out", str(blocker)], capsys)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"--out {blocker} is a file, not a folder" in err, err
    code, err = run_cli(["pretrain", "--corpus", str(corpus_file), "--out", str(blocker / "run")], capsys)
    assert code == 2 and f"{blocker} is a file, not a folder" in err, err
    assert blocker.read_text() == "mine"


# ---------------------------------------------------------------- a full disk
def no_space():
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_at_a_checkpoint_keeps_the_last_good_one(corpus_file, tmp_path, monkeypatch, capsys,
                                                             uninterrupted):
    a = small_args(corpus_file, tmp_path / "run")
    from minibert.train import checkpoint_files as checkpoint_module
    real_write, calls = checkpoint_module._write_npz, []

    def write_on_a_full_disk(file, arrays):          # the third checkpoint (step 9) fills the disk
        calls.append(True)
        if len(calls) == 3:
            file.write(b"PK\x03\x04 half a checkpoint")
            raise no_space()
        return real_write(file, arrays)
    with monkeypatch.context() as m:
        m.setattr(checkpoint_module, "_write_npz", write_on_a_full_disk)
        code, err = run_cli(as_command(a), capsys)
    assert code != 0 and len(err.splitlines()) == 1, err
    for piece in ("step 9", "checkpoint-00000009.npz", "the disk is full", "checkpoint-00000006.npz",
                  "steps 7 to 9 are lost", "free some space", "--resume"):
        assert piece in err, (piece, err)
    assert leftovers(a.out) == [] and newest_step(a.out) == 6
    load_checkpoint(list_checkpoints(a.out)[-1])
    pretrain(dataclasses.replace(a, resume=True), log=quiet)           # space freed: it goes on
    assert records(a.out) == uninterrupted


def _fds_writing(path):
    """This process's descriptors open on ``path``."""
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(path):
                fds.append(int(fd))
        except OSError:
            pass
    return fds


@pytest.mark.parametrize("how", ["nothing written", "half a line written"])
def test_a_full_disk_at_a_metrics_record_stops_cleanly(corpus_file, tmp_path, monkeypatch, uninterrupted, how):
    a = small_args(corpus_file, tmp_path / "run")
    metrics = (tmp_path / "run" / "metrics.jsonl").resolve()
    with monkeypatch.context() as m:
        if how == "nothing written":     # from the eval of step 6 on, metrics.jsonl's descriptor is /dev/full
            if not (Path("/proc/self/fd").is_dir() and Path("/dev/full").exists()):
                pytest.skip("needs Linux's /proc/self/fd and /dev/full")

            def fill_the_disk(entry):
                if entry["kind"] == "eval" and entry["step"] == 6:
                    full = os.open("/dev/full", os.O_WRONLY)
                    for fd in _fds_writing(metrics):
                        os.dup2(full, fd)
                    os.close(full)
            on_record = fill_the_disk
        else:                            # the record of step 10 is cut off half-way
            real_write, on_record = os.write, None

            def write_half(fd, data):
                if bytes(data).startswith(b'{"kind": "train", "step": 10,'):
                    real_write(fd, bytes(data)[:len(data) // 2])
                    raise no_space()
                return real_write(fd, data)
            m.setattr(os, "write", write_half)
        with pytest.raises(TrainingError) as err:
            pretrain(a, log=quiet, on_record=on_record)
    msg = str(err.value)
    for piece in ("step 10", "metrics.jsonl", "the disk is full", "checkpoint-00000009.npz", "step 10 is lost",
                  "free some space", "--resume"):
        assert piece in msg, (piece, msg)
    if how == "half a line written":     # the half line was taken back
        lines = metrics.read_text().splitlines()
        assert [json.loads(line)["step"] for line in lines][-1] == 6
    assert leftovers(a.out) == []
    pretrain(dataclasses.replace(a, resume=True), log=quiet)
    assert records(a.out) == uninterrupted


def test_a_full_disk_at_the_export_leaves_no_half_model(corpus_file, tmp_path, monkeypatch):
    from minibert.model import BertForPreTraining
    a = small_args(corpus_file, tmp_path / "run", steps=3, save_every=3, log_every=1, eval_every=3)
    with monkeypatch.context() as m:
        def save_half(self, directory):
            Path(directory).mkdir(parents=True, exist_ok=True)
            (Path(directory) / "config.json").write_text("{}")
            raise no_space()
        m.setattr(BertForPreTraining, "save_pretrained", save_half)
        with pytest.raises(TrainingError) as err:
            pretrain(a, log=quiet)
    msg = str(err.value)
    for piece in ("model", "the disk is full", "checkpoint-00000003.npz", "no step is lost", "--resume"):
        assert piece in msg, (piece, msg)
    assert not (tmp_path / "run" / "model").exists() and leftovers(a.out) == []
    pretrain(dataclasses.replace(a, resume=True), log=quiet)     # space freed: the model is written
    assert BertForPreTraining.from_pretrained(tmp_path / "run" / "model").config.hidden_size == 128


def test_a_full_disk_before_the_first_step_says_how_to_go_on(corpus_file, tmp_path, monkeypatch, capsys):
    a = small_args(corpus_file, tmp_path / "run")
    real_write_text = Path.write_text

    def full(self, *args, **kw):
        if self.name == "run.json":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real_write_text(self, *args, **kw)
    monkeypatch.setattr(Path, "write_text", full)
    code, err = run_cli(as_command(a), capsys)
    assert code != 0 and len(err.splitlines()) == 1, err
    for piece in ("run.json", "the disk is full", "free some space", "same command"):
        assert piece in err, (piece, err)


def test_a_real_full_disk(corpus_file, tmp_path, once):
    """The run in a small tmpfs of its own (a private mount namespace): the third checkpoint does not fit."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux) to mount a small tmpfs")
    size = list_checkpoints(once.out)[-1].stat().st_size
    disk, keep = tmp_path / "disk", 2
    disk.mkdir()
    a = small_args(corpus_file, disk / "run", keep=keep)
    script = f"""
import json
from pathlib import Path
from minibert.cli import main
from minibert.train.checkpoint_files import list_checkpoints, load_checkpoint
out, ballast = Path({a.out!r}), Path({str(disk)!r}) / "ballast"
ballast.write_bytes(bytes({size}))
code = main({as_command(a)!r})
names = sorted(p.name for p in out.iterdir())
load_checkpoint(list_checkpoints(out)[-1])
ballast.unlink()                                   # space freed
again = main({as_command(a, "--resume")!r})
metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
print(json.dumps(dict(code=code, names=names, again=again, metrics=metrics)))
"""
    # room for two checkpoints and a half beside the ballast (one checkpoint), and the small files:
    # the checkpoint of step 9 does not fit beside those of steps 3 and 6 until the ballast is gone
    room = 3 * size + size // 2 + 256 * 1024
    proc = subprocess.run(["unshare", "--mount", "sh", "-c",
                           f'mount -t tmpfs -o size={room} tmpfs "$0" || exit 97; exec "$1" -c "$2"',
                           str(disk), sys.executable, script],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          timeout=300)
    if proc.returncode == 97:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    err = proc.stderr.strip()
    assert seen["code"] != 0 and seen["again"] == 0, err
    assert len(err.splitlines()) == 1 and "step 9" in err and "the disk is full" in err and "--resume" in err, err
    assert seen["names"] == ["checkpoint-00000003.npz", "checkpoint-00000006.npz", "metrics.jsonl", "run.json",
                             "vocab.txt"], seen["names"]
    assert records(seen["metrics"]) == records(once.history)


def test_a_resume_with_another_thread_count_continues_the_same_bits(corpus_file, tmp_path):
    # the README's promise: on one machine, with any number of threads, a resumed run logs the
    # same numbers and ends with the same weights as an uninterrupted one
    from minibert import accel
    was = accel.num_threads()
    try:
        accel.set_num_threads(1)
        whole = pretrain(small_args(corpus_file, tmp_path / "whole", batch_size=8, seq_len=48), log=quiet)
        pretrain(small_args(corpus_file, tmp_path / "cut", batch_size=8, seq_len=48, stop_at=7), log=quiet)
        accel.set_num_threads(3)
        cut = pretrain(small_args(corpus_file, tmp_path / "cut", batch_size=8, seq_len=48, resume=True),
                       log=quiet)
    finally:
        accel.set_num_threads(was)
    assert records(tmp_path / "cut") == records(tmp_path / "whole")
    (a1, _), (a2, _) = (load_checkpoint(list_checkpoints(tmp_path / run)[-1]) for run in ("whole", "cut"))
    assert {"params", "adam_m", "adam_v"} <= set(a1) and set(a1) == set(a2)
    for name in ("params", "adam_m", "adam_v"):
        np.testing.assert_array_equal(a1[name], a2[name])
    assert whole.final_eval == cut.final_eval


@pytest.fixture
def sigint_as_in_a_terminal():
    """Python's own SIGINT handler, which a terminal's Ctrl-C meets. A suite started in the
    background (`&`, nohup) inherits an ignored SIGINT, which a run rightly keeps ignoring."""
    old = signal.getsignal(signal.SIGINT)
    if old == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_data_preparation_stops_with_one_line(corpus_file, tmp_path, monkeypatch, capsys, sig,
                                                              sigint_as_in_a_terminal):
    # before the loop there is nothing to save: one line, the signal's exit status, and the same
    # command then starts the run afresh
    real, before = train_module.prepare_data, signal.getsignal(signal.SIGTERM)

    def prepare_then_signal(*args, **kwargs):
        os.kill(os.getpid(), sig)        # as if a scheduler or Ctrl-C hit the tokenizing
        return real(*args, **kwargs)
    monkeypatch.setattr(train_module, "prepare_data", prepare_then_signal)
    a = small_args(corpus_file, tmp_path / "run")
    code, err = run_cli(as_command(a), capsys)
    assert code == 128 + sig
    assert err.splitlines()[-1].startswith(f"minibert pretrain: interrupted ({signal.Signals(sig).name})")
    assert "Traceback" not in err
    monkeypatch.setattr(train_module, "prepare_data", real)
    code, err = run_cli(as_command(a), capsys)
    assert code == 0, err
    assert list_checkpoints(a.out)
    assert signal.getsignal(signal.SIGTERM) is before         # the command's handler is gone again


def test_a_late_ctrl_c_after_a_run_saved_on_one_changes_nothing(corpus_file, tmp_path, monkeypatch, capsys,
                                                               sigint_as_in_a_terminal):
    # the run saves on a first Ctrl-C; a second arrives as the command prints its last line.  The
    # handler that holds signals while the run ends once forgot the first (it started afresh), and
    # the second then failed the saved run with "interrupted" (now and then, in a test that sends
    # Ctrl-C again and again to a data-parallel job)
    from minibert.train import doctor
    real_step, real_summary = train_module.train_step, doctor.summary_after_run

    def step_then_ctrl_c(run, lr):
        real_step(run, lr)
        if run.step == 2:
            os.kill(os.getpid(), signal.SIGINT)

    def late_ctrl_c(out):
        os.kill(os.getpid(), signal.SIGINT)
        return real_summary(out)
    monkeypatch.setattr(train_module, "train_step", step_then_ctrl_c)
    a = small_args(corpus_file, tmp_path / "run", steps=6, save_every=6, eval_every=6, log_every=6)
    code = main(as_command(a))
    out, err = capsys.readouterr()
    assert "SIGINT received: saved" in out and "Traceback" not in err, out + err
    monkeypatch.setattr(doctor, "summary_after_run", late_ctrl_c)
    code2 = main(as_command(dataclasses.replace(a, out=str(tmp_path / "run2"))))
    out2, err2 = capsys.readouterr()
    assert code2 == code and "interrupted" not in err2 and "Traceback" not in err2, err2
    assert "SIGINT received: saved" in out2 and "doctor:" in out2, out2


def test_a_resume_after_the_corpus_or_vocab_changed_says_which(corpus_file, tmp_path, capsys):
    a = small_args(corpus_file, tmp_path / "run", stop_at=3)
    pretrain(a, log=quiet)
    (tmp_path / "run" / "vocab.txt").write_text((tmp_path / "run" / "vocab.txt").read_text().replace("\nthe\n", "\nthee\n"))
    code, err = run_cli(as_command(dataclasses.replace(a, stop_at=None), "--resume"), capsys)
    assert code == 2 and "vocab.txt in the run folder, or --vocab, was changed" in err, err
    changed = tmp_path / "changed.txt"
    changed.write_text(corpus_file.read_text().replace(" the ", " the very ", 1))   # one word more
    b = small_args(changed, tmp_path / "run2", stop_at=3)
    pretrain(b, log=quiet)
    changed.write_text(corpus_file.read_text())
    code, err = run_cli(as_command(dataclasses.replace(b, stop_at=None), "--resume"), capsys)
    assert code == 2 and "corpus text differs from the one this run started on" in err, err


@pytest.mark.parametrize("value", ["abc", "0", "-2", "1.5"])
def test_a_bad_thread_count_in_the_environment_is_one_line(value, tmp_path):
    # it was a traceback at import ("abc") or silently one thread ("0")
    env = dict(os.environ, MINIBERT_NUM_THREADS=value)
    run = subprocess.run([sys.executable, "-m", "minibert", "fill-mask", str(tmp_path), "the [MASK] ."],
                         env=env, capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        f"minibert fill-mask: error: MINIBERT_NUM_THREADS must be a positive integer (the threads of the CPU "
        f"kernels), got {value!r}; unset it to use every CPU this process may use"]
