"""Batches made by a process of their own (``--data-worker process``, the default on a GPU).

The process must be invisible in a run's results (the same batches, positions and checkpoints as
the thread), must say plainly when it fails, and must never outlive the run however the run ends:
Ctrl-C at the terminal (SIGINT to the whole process group), or a kill that leaves no time to
close anything."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from minibert.train import BatchStream, Prefetch, TrainArgs, prepare_data, pretrain
from minibert.train.data_worker import DataWorkerError, ProcessPrefetch

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the data process is tested on POSIX systems")


def small_args(corpus_file, out, **kw):
    base = dict(corpus=str(corpus_file), vocab_size=400, config="tiny", steps=8, batch_size=4, seq_len=32,
                warmup=2, eval_every=4, save_every=4, log_every=1, eval_instances=8, progress=False, plot=False,
                out=str(out))
    base.update(kw)
    return TrainArgs(**base)


@pytest.fixture
def stream(corpus_file, tmp_path):
    a = small_args(corpus_file, tmp_path)
    return prepare_data(a, tmp_path, log=lambda *x: None)[2]


@pytest.mark.parametrize("make", [Prefetch, ProcessPrefetch])
def test_batches_come_in_the_streams_order_with_the_position_after_each(stream, make):
    plain = BatchStream(stream.dataset, stream.batch_size, stream.seed)
    ahead = make(stream)
    try:
        for _ in range(stream.per_epoch + 3):          # across an epoch boundary
            got, want = ahead.next_batch(), plain.next_batch()
            assert got.keys() == want.keys()
            for k in want:
                assert got[k].dtype == want[k].dtype
                np.testing.assert_array_equal(got[k], want[k])
            assert ahead.state_dict() == plain.state_dict()   # what was handed out, not what is made
        assert ahead.wait_s >= 0.0
    finally:
        ahead.close()


def test_a_handed_out_batch_is_the_callers_and_stays_as_it_was(stream):
    """The arrays are copied out of the shared slot: batches handed out later (which reuse the
    slots) leave an earlier one unchanged, and the caller may write into it."""
    plain = BatchStream(stream.dataset, stream.batch_size, stream.seed)
    ahead = ProcessPrefetch(stream)
    try:
        first, want = ahead.next_batch(), plain.next_batch()
        for _ in range(6):
            ahead.next_batch()
        for k in want:
            np.testing.assert_array_equal(first[k], want[k])
        first["input_ids"][0, 0] = -1
    finally:
        ahead.close()


def test_the_process_resumes_from_the_streams_position(stream):
    stream.load_state_dict({"epoch": 1, "index": 2})
    plain = BatchStream(stream.dataset, stream.batch_size, stream.seed)
    plain.load_state_dict({"epoch": 1, "index": 2})
    ahead = ProcessPrefetch(stream)
    try:
        assert ahead.state_dict() == {"epoch": 1, "index": 2}
        np.testing.assert_array_equal(ahead.next_batch()["input_ids"], plain.next_batch()["input_ids"])
    finally:
        ahead.close()
    assert ahead._proc.returncode == 0     # closed: it ended by itself, not by a kill


def test_a_killed_process_is_named_with_what_to_do(stream):
    ahead = ProcessPrefetch(stream)
    try:
        ahead.next_batch()
        ahead._proc.kill()
        ahead._proc.wait()
        with pytest.raises(DataWorkerError, match=r"was killed by signal 9; .*--data-worker thread"):
            for _ in range(5):     # a batch or two may already be on their way
                ahead.next_batch()
    finally:
        ahead.close()


class _Unmaskable:
    """A stream whose second batch fails, as a corrupt instance would (importable by the process)."""

    def __init__(self, stream):
        self.stream, self.batch_size, self.dataset, self.n = stream, stream.batch_size, stream.dataset, 0

    def next_batch(self):
        self.n += 1
        if self.n == 2:
            raise ValueError("instance 7 has no tokens")
        return self.stream.next_batch()

    def state_dict(self):
        return self.stream.state_dict()


def test_an_error_in_making_a_batch_reaches_the_run_with_its_traceback(stream):
    ahead = ProcessPrefetch(_Unmaskable(stream))
    try:
        ahead.next_batch()
        with pytest.raises(DataWorkerError, match=r"(?s)making a batch failed in the data process.*"
                                                  r"ValueError: instance 7 has no tokens"):
            ahead.next_batch()
    finally:
        ahead.close()


def test_a_run_with_the_process_writes_what_a_run_with_the_thread_writes(corpus_file, tmp_path):
    """The same losses, accuracies and checkpoint positions; and --resume continues the same run."""
    def records(out):
        rows = [json.loads(line) for line in (Path(out) / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if k not in ("tokens_per_s", "data_wait", "time")} for r in rows]
    thread = pretrain(small_args(corpus_file, tmp_path / "t", data_worker="thread"), log=lambda *a: None)
    pretrain(small_args(corpus_file, tmp_path / "p", data_worker="process", stop_at=4), log=lambda *a: None)
    pretrain(small_args(corpus_file, tmp_path / "p", data_worker="process", resume=True), log=lambda *a: None)
    assert thread.step == 8
    assert records(tmp_path / "p") == records(tmp_path / "t")


def test_a_bad_data_worker_is_refused_before_any_work(corpus_file, tmp_path):
    with pytest.raises(ValueError, match=r"--data-worker must be one of \['auto', 'thread', 'process'\]"):
        pretrain(small_args(corpus_file, tmp_path / "x", data_worker="processes"), log=lambda *a: None)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _wait(predicate, timeout=60.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _long_run(corpus_file, out) -> subprocess.Popen:
    """A run that trains until stopped, in a process group of its own, batches made by a process."""
    cmd = [sys.executable, "-m", "minibert", "pretrain", "--corpus", str(corpus_file), "--out", str(out),
           "--no-plot", "--no-progress", "--vocab-size", "400", "--config", "tiny", "--batch-size", "4",
           "--seq-len", "32", "--steps", "100000", "--log-every", "1", "--eval-every", "100000",
           "--save-every", "100000", "--eval-instances", "8", "--data-worker", "process"]
    # a terminal's SIGINT, whatever this suite inherited (started in the background, SIGINT is ignored)
    cmd = [sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
           "os.execv(sys.argv[1], sys.argv[1:])", *cmd]
    return subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def _trained(out: Path, steps: int) -> bool:
    metrics = out / "metrics.jsonl"
    return metrics.is_file() and metrics.read_text().count('"kind": "train"') >= steps


def test_ctrl_c_at_the_terminal_saves_and_leaves_no_process_behind(corpus_file, tmp_path):
    """SIGINT to the whole group, as a terminal sends it: the data process ignores it, the run saves
    and stops, and the data process ends with it."""
    run = _long_run(corpus_file, tmp_path / "run")
    try:
        assert _wait(lambda: _trained(tmp_path / "run", 3)), run.stderr.read() if run.poll() is not None else ""
        os.killpg(run.pid, signal.SIGINT)
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 0, err
    assert "SIGINT received: saved" in out + err and "Traceback" not in err, err
    assert _wait(lambda: not _group_alive(run.pid), timeout=10), "the data process outlived the run"


def test_a_killed_run_leaves_no_data_process_behind(corpus_file, tmp_path):
    """SIGKILL to the run alone: nothing of it can close the socket, the system does, and the data
    process, finding it closed, ends."""
    run = _long_run(corpus_file, tmp_path / "run")
    try:
        assert _wait(lambda: _trained(tmp_path / "run", 2)), run.stderr.read() if run.poll() is not None else ""
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=30)
        assert _wait(lambda: not _group_alive(run.pid), timeout=10), "the data process outlived the run"
    finally:
        if _group_alive(run.pid):
            os.killpg(run.pid, signal.SIGKILL)


WORKERS_STDERR = """
import os, sys, traceback
from pathlib import Path
os.close(2)
sys.excepthook = lambda *e: traceback.print_exception(*e, file=sys.stdout)   # stderr is gone
from minibert.train import TrainArgs, prepare_data
from minibert.train.data_worker import ProcessPrefetch
a = TrainArgs(corpus=sys.argv[1], vocab_size=400, batch_size=4, seq_len=32, eval_instances=8, out=sys.argv[2])
ahead = ProcessPrefetch(prepare_data(a, Path(a.out), log=lambda *x: None)[2])
ahead.next_batch()
print(os.path.exists("/proc/%d/fd/2" % ahead._proc.pid) and os.readlink("/proc/%d/fd/2" % ahead._proc.pid))
ahead.close()
"""


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads the worker's descriptors in /proc")
def test_a_run_with_stderr_closed_gives_the_worker_dev_null_as_stderr(corpus_file, tmp_path):
    """The first file a process with descriptor 2 closed opens gets 2 (in the run: the socket or the
    shared memory, which a child inherits as its stderr; in the worker: its own mapping of the
    shared memory), and messages written to stderr would land in the middle of the batches."""
    done = subprocess.run([sys.executable, "-c", WORKERS_STDERR, str(corpus_file), str(tmp_path / "run")],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert done.returncode == 0, done.stdout
    assert done.stdout.strip() == os.devnull, done.stdout
