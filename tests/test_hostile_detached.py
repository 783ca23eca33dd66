"""A run whose terminal goes away: SIGHUP (a dropped SSH session), a pipe whose reader exits,
a terminal that hangs up. Each saves a checkpoint and stops cleanly, and ``--resume`` then
continues exactly; under ``nohup`` (SIGHUP ignored) the run keeps training."""
import errno
import fcntl
import io
import json
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import numpy as np
import pytest

from minibert.train.checkpoint_files import checkpoint_step, latest_checkpoint, load_checkpoint
from minibert.train import TrainArgs, pretrain

ROOT = Path(__file__).resolve().parents[1]
TIMING = ("tokens_per_s", "data_wait")
# long enough that only a signal or a lost output ends it; every step logged, nothing else saved
SETTINGS = dict(vocab_size=400, config="tiny", batch_size=4, seq_len=32, steps=100000, log_every=1,
                save_every=100000, eval_every=100000, eval_instances=8)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("MINIBERT_CACHE", str(tmp_path_factory.getbasetemp() / "detached-cache"))


def run_args(corpus_file, out, **kw) -> TrainArgs:
    return TrainArgs(corpus=str(corpus_file), out=str(out), progress=False, plot=False, **SETTINGS, **kw)


def command(corpus_file, out, *extra) -> list:
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in SETTINGS.items()]
    return [sys.executable, "-m", "minibert", "pretrain", "--corpus", str(corpus_file), "--out", str(out),
            "--no-plot", *flags, *extra]


TAKE_THE_TERMINAL = "import fcntl, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0)"
IGNORE_SIGHUP = "import signal; signal.signal(signal.SIGHUP, signal.SIG_IGN)"     # what nohup does
# a terminal's default, whatever this suite inherited: started under nohup, every child ignores SIGHUP
# (and minibert, rightly, keeps training)
DEFAULT_SIGHUP = "import signal; signal.signal(signal.SIGHUP, signal.SIG_DFL)"


def exec_after(code: str, cmd: list) -> list:
    """``cmd``, started by a Python that first runs ``code`` (its effect outlives the exec)."""
    return [sys.executable, "-c", f"import os, sys; {code}; os.execv(sys.argv[1], sys.argv[1:])", *cmd]


def env():
    return dict(os.environ, PYTHONPATH=str(ROOT))


def logged_steps(out: Path) -> int:
    path = out / "metrics.jsonl"
    if not path.exists():
        return 0
    return sum('"kind": "train"' in line for line in path.read_text().splitlines())


def wait_for_steps(out: Path, proc, n=3, timeout=120):
    deadline = time.monotonic() + timeout
    while logged_steps(out) < n:
        assert proc.poll() is None, f"the run ended early ({proc.returncode})"
        assert time.monotonic() < deadline, "the run logged no steps in time"
        time.sleep(0.1)


def records(out) -> list:
    lines = (Path(out) / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in lines]


def assert_resumes_exactly(corpus_file, out: Path, tmp_path: Path) -> int:
    """The stopped run, resumed for two more steps, equals a run that never stopped: records and weights."""
    saved = checkpoint_step(latest_checkpoint(out))
    assert saved >= 3 and saved == logged_steps(out)      # the step in flight was finished and saved
    pretrain(run_args(corpus_file, out, resume=True, stop_at=saved + 2), log=lambda *a: None)
    whole = pretrain(run_args(corpus_file, tmp_path / "whole", stop_at=saved + 2), log=lambda *a: None)
    assert records(out) == records(whole.out)
    (a1, _), (a2, _) = (load_checkpoint(latest_checkpoint(d)) for d in (out, whole.out))
    for name in ("params", "adam_m", "adam_v"):
        np.testing.assert_array_equal(a1[name], a2[name])
    return saved


def test_sighup_saves_a_checkpoint_and_the_run_resumes_exactly(corpus_file, tmp_path):
    # a dropped SSH session: the shell sends its jobs SIGHUP (it killed the run, with no checkpoint)
    out = tmp_path / "run"
    proc = subprocess.Popen(exec_after(DEFAULT_SIGHUP, command(corpus_file, out, "--no-progress")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        wait_for_steps(out, proc)
        proc.send_signal(signal.SIGHUP)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert "SIGHUP received: saved" in stdout and "Traceback" not in stderr, stdout + stderr
    assert_resumes_exactly(corpus_file, out, tmp_path)


def test_a_stderr_whose_reader_exits_saves_and_stops_cleanly(corpus_file, tmp_path):
    # `2> >(sleep 4; head -c 100)`: the progress bar's next write meets a broken pipe
    out = tmp_path / "run"
    proc = subprocess.Popen(command(corpus_file, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env())
    try:
        wait_for_steps(out, proc)
        proc.stderr.read(100)
        proc.stderr.close()
        stdout, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, stdout
    assert b"stderr closed: saved" in stdout, stdout
    assert_resumes_exactly(corpus_file, out, tmp_path)


def test_a_terminal_that_hangs_up_stops_the_run_with_a_checkpoint(corpus_file, tmp_path):
    # the run's controlling terminal closes, as sshd closes it when the connection drops:
    # the kernel sends SIGHUP, and every later write to the terminal fails with EIO
    out = tmp_path / "run"
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))   # a terminal's size: a bar is drawn
    # a session of its own whose controlling terminal is the pty's other end (not through a
    # preexec_fn: after the runs of this process's threads, a fork must exec at once)
    proc = subprocess.Popen(exec_after(TAKE_THE_TERMINAL, command(corpus_file, out)), stdin=slave, stdout=slave,
                            stderr=slave, env=env(), start_new_session=True)
    os.close(slave)
    try:
        deadline = time.monotonic() + 120
        while logged_steps(out) < 3:       # the terminal must be read, or its buffer fills and blocks the run
            assert proc.poll() is None and time.monotonic() < deadline
            if select.select([master], [], [], 0.1)[0]:
                os.read(master, 65536)
        os.close(master)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert_resumes_exactly(corpus_file, out, tmp_path)


@pytest.mark.parametrize("buffered", [True, False])
def test_a_stdout_closed_from_the_start_neither_crashes_nor_complains(corpus_file, tmp_path, buffered):
    # `minibert pretrain ... | head -c 0`. Buffered, the set-up lines wait in the buffer and are found
    # undeliverable at the end (that was "Exception ignored ... BrokenPipeError" and status 120);
    # unbuffered (PYTHONUNBUFFERED), the first line finds it: the run saves after one step, says so on stderr
    out = tmp_path / "run"
    environment = env()
    environment.pop("PYTHONUNBUFFERED", None)
    if not buffered:
        environment["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen(command(corpus_file, out, "--steps=6", "--no-progress"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=environment)
    proc.stdout.close()
    stderr = proc.stderr.read()
    proc.wait(timeout=120)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr and "BrokenPipe" not in stderr, stderr
    if buffered:
        assert (out / "model" / "model.safetensors").is_file()
    else:
        assert checkpoint_step(latest_checkpoint(out)) == 1
        assert stderr.splitlines()[-1] == (f"minibert pretrain: stdout closed: saved a "
                                           f"checkpoint at step 1 in {out}; continue with --resume"), stderr


@pytest.mark.parametrize("worker", ["thread", "process"])
def test_a_run_started_with_stderr_closed_trains_to_the_end(corpus_file, tmp_path, worker):
    # `2>&-`: Python starts with sys.stderr None, and the progress bar's first write ended the run (status 1);
    # the data process's socket, the first file opened, would have been descriptor 2, the worker's stderr
    out = tmp_path / "run"
    done = subprocess.run(exec_after("os.close(2)", command(corpus_file, out, "--steps=6", f"--data-worker={worker}")),
                          stdout=subprocess.PIPE, text=True, env=env(), timeout=120)
    assert done.returncode == 0, done.stdout
    assert (out / "model" / "model.safetensors").is_file()


def test_under_nohup_sighup_is_ignored_and_the_run_finishes(corpus_file, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(exec_after(IGNORE_SIGHUP, command(corpus_file, out, "--steps=40", "--no-progress")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        wait_for_steps(out, proc, n=1)
        proc.send_signal(signal.SIGHUP)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert "SIGHUP" not in stdout and checkpoint_step(latest_checkpoint(out)) == 40
    assert (out / "model" / "model.safetensors").is_file()


class Failing(io.StringIO):
    def __init__(self, code):
        super().__init__()
        self.code = code

    def write(self, text):
        raise OSError(self.code, os.strerror(self.code))


def test_a_stream_that_cannot_be_written_is_dropped_and_says_why():
    from minibert.train.signals import GuardedStream
    gone = GuardedStream(Failing(errno.EPIPE))
    assert gone.write("lost") == 4 and gone.lost == "closed"
    assert gone.write("again") == 5                 # nothing more is tried
    full = GuardedStream(Failing(errno.ENOSPC))     # `> log` on a full disk
    full.write("x")
    assert full.lost == "could not be written (No space left on device)"
    busy = GuardedStream(Failing(errno.EAGAIN))     # a full non-blocking pipe is not a lost one
    with pytest.raises(BlockingIOError):
        busy.write("x")


def test_a_log_on_a_full_disk_stops_the_run_with_a_line_that_says_so(corpus_file, tmp_path):
    # it said "could not write run: the disk is full" of the run folder, which had room
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full (a device whose writes fail as on a full disk) on this system")
    out = tmp_path / "run"
    with open("/dev/full", "w") as full:     # unbuffered: the first line of the set-up meets it
        done = subprocess.run(command(corpus_file, out, "--no-progress"), stdout=full, stderr=subprocess.PIPE,
                              text=True, env=dict(env(), PYTHONUNBUFFERED="1"), timeout=120)
    assert done.returncode == 1, done.stderr        # a full disk is a failure, not a stop on purpose
    assert done.stderr.splitlines()[-1] == (f"minibert pretrain: stdout could not be written (No space left on "
                                            f"device): saved a checkpoint at step 1 in {out}; continue with "
                                            f"--resume"), done.stderr
    assert checkpoint_step(latest_checkpoint(out)) == 1


def test_a_run_whose_output_all_goes_to_a_full_disk_fails(corpus_file, tmp_path):
    # stdout and stderr both on a full disk: the run stopped after its first step, said so nowhere,
    # and exited 0, so a script took it for a finished run
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    out = tmp_path / "run"
    with open("/dev/full", "w") as full:
        done = subprocess.run(command(corpus_file, out, "--no-progress"), stdout=full, stderr=full,
                              env=dict(env(), PYTHONUNBUFFERED="1"), timeout=120)
    assert done.returncode == 1
    assert checkpoint_step(latest_checkpoint(out)) == 1      # saved all the same


def test_an_interrupted_demo_says_it_stopped_and_fails(tmp_path):
    # it printed the untrained model's held-out numbers as the demo's results, named a model folder
    # that was never written, advised a --resume the demo does not have, and exited 0
    out = tmp_path / "demo"
    proc = subprocess.Popen([sys.executable, "-m", "minibert", "demo", "--steps", "100000", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path)
    try:
        wait_for_steps(out, proc, n=2, timeout=240)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, stdout + stderr
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("the demo stopped at step ") and "of 100000 (SIGTERM)" in last, stdout
    assert "run it again to start it over" in last
    assert "--resume" not in stdout + stderr and "held-out after" not in stdout and "Traceback" not in stderr
