"""Data parallelism: N MPI processes compute the run that one process computes.

Each test starts real jobs with ``mpiexec`` (MPICH, from the ``dist`` extra) on
this machine's cores, as a user does, and compares them with one-process runs
of the same settings: float64 and no dropout, so that the only difference left
is the order in which the ranks' sums are added.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, hold_lock_elsewhere
from minibert.train.errors import AgreedError

BIN = Path(sys.executable).parent
MPIEXEC = BIN / "mpiexec"
# small enough for 2 cores: ~2 s a run, most of it starting Python
COMMON = ("--corpus builtin --config tiny --steps 6 --seq-len 32 --batch-size 8 --dtype float64 --dropout 0 "
          "--log-every 1 --eval-every 3 --save-every 3 --eval-instances 16 --no-progress --no-plot").split()
LOSSES = ("loss", "mlm_loss", "nsp_loss", "mlm_acc", "nsp_acc")


@pytest.fixture(scope="module", autouse=True)
def mpi_installed():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.fail('mpi4py is missing: the test extra installs the dist extra (pip install -e ".[test]")')
    assert MPIEXEC.exists(), f"{MPIEXEC} is missing: the mpich wheel provides it (the dist extra)"


def options(**changes) -> list[str]:
    """COMMON with some flags changed or added: options(batch_size=7, out=path)."""
    args = list(COMMON)
    for name, value in changes.items():
        flag = "--" + name.replace("_", "-")
        if flag in args:
            args[args.index(flag) + 1] = str(value)
        else:
            args += [flag, str(value)]
    return args


def environment():
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("MINIBERT_NUM_THREADS", None)
    return env


def command(n: int, args) -> list[str]:
    minibert = [sys.executable, "-m", "minibert", "pretrain", *map(str, args)]
    if n == 1:
        return minibert
    return [str(MPIEXEC), "-n", str(n), sys.executable, "-m", "mpi4py", *minibert[1:]]


def job(n: int, args, timeout=120, check=True) -> subprocess.CompletedProcess:
    """Run ``minibert pretrain`` with n processes (1: no mpiexec) and wait for it."""
    done = subprocess.run(command(n, args), capture_output=True, text=True, timeout=timeout, env=environment())
    if check:
        assert done.returncode == 0, f"{n} processes failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def assert_same_records(a: list[dict], b: list[dict], rtol=1e-9):
    assert [(r["kind"], r["step"]) for r in a] == [(r["kind"], r["step"]) for r in b]
    for x, y in zip(a, b):
        for k in LOSSES:
            assert abs(x[k] - y[k]) <= rtol * abs(x[k]), f"{x['kind']} step {x['step']} {k}: {x[k]} vs {y[k]}"
        for k in ("n_pairs", "n_masked"):
            assert x.get(k) == y.get(k)


def final_weights(out: Path) -> dict:
    from safetensors.numpy import load_file
    return load_file(str(out / "model" / "model.safetensors"))


def assert_same_weights(a: dict, b: dict):
    # atol: the attention key bias gets a gradient that is 0 in exact arithmetic (softmax ignores a
    # constant added to a row), so it holds rounding noise (~1e-18) that any two summation orders differ in
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-9, atol=1e-12, err_msg=name)


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    """The uninterrupted one-process runs the others are compared with: {accum: out}."""
    runs = {}
    for accum in (1, 2):
        out = tmp_path_factory.mktemp(f"single-accum{accum}")
        job(1, [*COMMON, "--accum", accum, "--out", out])
        runs[accum] = out
    return runs


@pytest.mark.parametrize("accum", [1, 2])
def test_two_processes_log_the_losses_and_reach_the_weights_of_one(one_process, tmp_path, accum):
    out = tmp_path / "two"
    # with --accum 2 each rank's batches come from a data process of its own (the default on a GPU)
    worker = ["--data-worker", "process"] if accum == 2 else []
    done = job(2, [*COMMON, "--accum", accum, "--out", out, *worker])
    assert_same_records(records(one_process[accum]), records(out))
    assert_same_weights(final_weights(one_process[accum]), final_weights(out))
    # one voice: rank 0 alone prints
    assert done.stdout.count("data parallel: 2 processes, 4 of the 8 sequences") == 1
    assert done.stdout.count("model saved to") == 1


def test_the_comparison_can_fail(one_process, tmp_path):
    # the same check catches a run that differs by one batch's worth: another seed
    out = tmp_path / "other"
    job(2, [*COMMON, "--seed", 1, "--out", out])
    with pytest.raises(AssertionError):
        assert_same_records(records(one_process[1]), records(out))


@pytest.mark.parametrize("first, then", [(2, 1), (1, 2)])
def test_a_run_stopped_and_resumed_with_another_number_of_processes_logs_the_same(one_process, tmp_path,
                                                                                  first, then):
    out = tmp_path / "run"
    job(first, [*COMMON, "--stop-at", 3, "--out", out])
    assert [r["step"] for r in records(out)][-1] == 3
    job(then, [*COMMON, "--resume", "--out", out])
    assert_same_records(records(one_process[1]), records(out))
    assert_same_weights(final_weights(one_process[1]), final_weights(out))


def rank_pid(out: Path, rank: int) -> int | None:
    """The pid of the job's rank ``rank`` (found by its --out and the launcher's PMI_RANK)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            env = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(out).encode() in cmdline and b"mpi4py" in cmdline and f"PMI_RANK={rank}".encode() in env:
            return int(proc.name)
    return None


def start_long_job(out: Path) -> subprocess.Popen:
    return subprocess.Popen(command(2, options(steps=100000, save_every=2, out=out)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment())


def wait_for_checkpoints(out: Path, proc: subprocess.Popen, count=2, timeout=90):
    deadline = time.monotonic() + timeout
    while len(list(out.glob("checkpoint-*.npz"))) < count:
        assert proc.poll() is None, f"the job ended early:\n{proc.communicate()}"
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.2)


def test_kill_9_of_one_rank_ends_the_job_and_leaves_the_last_checkpoint_whole(tmp_path):
    from minibert.train.checkpoint_files import latest_checkpoint, load_checkpoint
    from minibert.train import check_complete
    out = tmp_path / "run"
    proc = start_long_job(out)
    try:
        wait_for_checkpoints(out, proc)
        pid = rank_pid(out, 1)
        assert pid is not None, "rank 1 not found"
        os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        stdout, err = proc.communicate(timeout=30)
        assert time.monotonic() - t0 < 30
    finally:
        proc.kill()
    assert proc.returncode != 0
    # MPICH's launcher names the rank that died and how, then ends the others
    assert "BAD TERMINATION" in stdout + err and "signal 9" in stdout + err, stdout + err
    last = latest_checkpoint(out)
    check_complete(last, *load_checkpoint(last))


def test_sigterm_to_mpiexec_saves_once_and_the_run_resumes(tmp_path):
    from minibert.train.checkpoint_files import checkpoint_step, latest_checkpoint
    out = tmp_path / "run"
    proc = start_long_job(out)
    try:
        wait_for_checkpoints(out, proc)
        proc.send_signal(signal.SIGTERM)
        stdout, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    said = re.findall(r"SIGTERM received: saved (\S+) at step (\d+)", stdout)
    assert len(said) == 1, stdout
    step = int(said[0][1])
    assert checkpoint_step(latest_checkpoint(out)) == step
    assert records(out)[-1]["step"] <= step


def one_error_line(done: subprocess.CompletedProcess, status=2) -> str:
    assert done.returncode == status, (done.returncode, done.stdout, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert re.match(r"minibert [a-z-]+: error: ", lines[0]), lines[0]
    return lines[0]


def test_a_batch_that_does_not_divide_among_the_processes_is_one_line(tmp_path):
    done = job(2, options(batch_size=7, out=tmp_path / "r"), timeout=60, check=False)
    line = one_error_line(done)
    assert "--batch-size 7 (the global batch) does not divide among 2 processes" in line
    assert "e.g. 8" in line


def test_a_diverging_run_stops_every_rank_with_one_line(tmp_path):
    done = job(2, options(lr=1e30, out=tmp_path / "r"), timeout=60, check=False)
    assert "stopped without saving" in one_error_line(done, status=1)


def test_ranks_started_with_different_settings_are_one_line(tmp_path):
    one = [sys.executable, "-m", "mpi4py", "-m", "minibert", "pretrain", *COMMON, "--out", str(tmp_path / "r")]
    mpmd = [str(MPIEXEC), "-n", "1", *one, "--seed", "1", ":", "-n", "1", *one, "--seed", "2"]
    done = subprocess.run(mpmd, capture_output=True, text=True, timeout=60, env=environment())
    line = one_error_line(done)
    assert "rank 1 was started differently from rank 0: --seed: 2 vs 1" in line


def test_ranks_running_different_minibert_code_are_one_line(tmp_path):
    other = tmp_path / "other"
    shutil.copytree(ROOT / "minibert", other / "minibert", ignore=shutil.ignore_patterns("__pycache__"))
    with open(other / "minibert" / "checks.py", "a") as f:
        f.write("\n# an edited copy\n")
    one = [sys.executable, "-m", "mpi4py", "-m", "minibert", "pretrain", *COMMON, "--out", str(tmp_path / "r")]
    mpmd = [str(MPIEXEC), "-n", "1", *one, ":", "-n", "1", "env", f"PYTHONPATH={other}", *one]
    # (not from the repository's folder: python -m would find the package there first)
    done = subprocess.run(mpmd, capture_output=True, text=True, timeout=60, env=environment(), cwd=tmp_path)
    line = one_error_line(done)
    assert "rank 1 was started differently from rank 0: minibert:" in line


def test_a_failure_on_rank_0_alone_is_one_line_and_no_hang(tmp_path):
    out = tmp_path / "r"
    out.mkdir()
    holder = hold_lock_elsewhere(out)
    try:
        done = job(2, [*COMMON, "--out", out], timeout=60, check=False)
    finally:
        holder.kill()
    assert "another run is using" in one_error_line(done)


def test_cuda_without_gpus_is_one_line(tmp_path):
    done = job(2, [*COMMON, "--device", "cuda", "--out", tmp_path / "r"], timeout=60, check=False)
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() >= 2:
            pytest.skip("this machine has the GPUs: tests/test_gpu.py runs the job")
    except Exception:
        pass
    assert "cuda" in one_error_line(done).lower()


def test_mpiexec_without_mpi4py_is_one_line(tmp_path):
    code = ("import sys; sys.modules['mpi4py'] = None; from minibert.cli import main; "
            f"sys.exit(main(sys.argv[1:]))")
    args = [str(MPIEXEC), "-n", "2", sys.executable, "-c", code, "pretrain", *options(out=tmp_path / "r")]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, env=environment())
    line = one_error_line(done)
    assert "started as 2 processes, but mpi4py is not installed" in line and "minibert[dist]" in line


@pytest.mark.parametrize("words", [["demo", "--steps", "2"], ["train-tokenizer", "--vocab-size", "200"]])
def test_the_other_commands_refuse_several_processes_in_one_line(tmp_path, words):
    args = [str(MPIEXEC), "-n", "2", sys.executable, "-m", "mpi4py", "-m", "minibert", *words,
            "--out", str(tmp_path / "x")]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, env=environment())
    assert "only pretrain runs as several" in one_error_line(done)
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("runner", [["-m", "mpi4py"], []], ids=["with -m mpi4py", "without"])
def test_a_process_that_fails_before_the_others_start_ends_the_job(tmp_path, runner):
    # rank 1 fails while minibert starts (a bad setting of its own), before any collective: the
    # others must not wait for it forever
    one = [sys.executable, *runner, "-m", "minibert", "pretrain", *options(out=tmp_path / "r")]
    mpmd = [str(MPIEXEC), "-n", "1", *one, ":", "-n", "1", "env", "MINIBERT_NUM_THREADS=abc", *one]
    t0 = time.monotonic()
    done = subprocess.run(mpmd, capture_output=True, text=True, timeout=60, env=environment())
    assert time.monotonic() - t0 < 30
    assert done.returncode != 0
    assert "(rank 1 of 2) MINIBERT_NUM_THREADS must be a positive integer" in done.stderr


def test_a_nan_setting_is_named_as_with_one_process(tmp_path):
    done = job(2, options(lr="nan", out=tmp_path / "r"), timeout=60, check=False)
    assert "--lr must be a positive number, got nan" in one_error_line(done)


def test_a_resume_with_a_number_of_processes_that_does_not_divide_the_batch_says_which_do(tmp_path):
    out = tmp_path / "r"
    job(1, options(batch_size=9, stop_at=2, out=out))
    done = job(2, [*options(batch_size=9, out=out), "--resume"], timeout=60, check=False)
    line = one_error_line(done)
    assert "a resumed run keeps its batch: use a number of processes that divides 9 (1, 3, 9)" in line


def test_another_mpis_launcher_is_named_not_run_twice(tmp_path):
    # a process told by its environment that it is one of 2, while MPI sees only itself
    env = dict(environment(), OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_RANK="0")
    done = subprocess.run(command(1, options(out=tmp_path / "r")), capture_output=True, text=True, timeout=60,
                          env=env)
    # (mpi4py warns of the same, in its own words, before minibert's line)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].startswith("minibert pretrain: error: the launcher started 2 processes, "
                                                   "but MPI sees 1")
    assert not (tmp_path / "r").exists()


def test_a_checkpoint_cut_short_by_kill_9_is_swept_at_the_next_start(one_process, tmp_path):
    out = tmp_path / "r"
    job(1, options(stop_at=3, out=out))
    partial = out / ".checkpoint-4242-deadbeef.tmp"
    partial.write_bytes(b"half a checkpoint")
    job(2, [*COMMON, "--resume", "--out", out])
    assert not partial.exists()
    assert_same_records(records(one_process[1]), records(out))


def readme_command() -> list[str]:
    text = (ROOT / "README.md").read_text()
    found = re.findall(r"^\s*(mpiexec -n \d+ python -m mpi4py -m minibert pretrain[^\n]*)$", text, re.M)
    assert found, "the README shows no multi-process command"
    return shlex.split(found[0])


def test_the_readme_command_runs_as_printed(tmp_path):
    words = readme_command()
    words[0], words[3] = str(MPIEXEC), sys.executable
    done = subprocess.run(words, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=environment())
    assert done.returncode == 0, done.stderr
    out = tmp_path / words[words.index("--out") + 1]
    assert (out / "model" / "model.safetensors").is_file() and (out / "loss.png").is_file()
    assert done.stdout.count("data parallel: 2 processes") == 1


# ---------------------------------------------------------------- in one process

def small_model():
    import minibert as mb
    config = mb.BertConfig(vocab_size=50, hidden_size=12, num_hidden_layers=2, num_attention_heads=3,
                           intermediate_size=20, max_position_embeddings=16, hidden_dropout_prob=0.0,
                           attention_probs_dropout_prob=0.0)
    return mb.BertForPreTraining(config, seed=3, dtype="float64")


def gradient(model, batches, loss_counts=None) -> np.ndarray:
    for i, part in enumerate(batches):
        model.forward(**part, train=True)
        model.backward(accumulate=i > 0, loss_counts=loss_counts)
    return model.params.grad.copy()


def halves(batch):
    return [{k: v[:2] for k, v in batch.items()}, {k: v[2:] for k, v in batch.items()}]


def test_slices_with_the_global_counts_add_up_to_the_whole_batch(rng):
    from conftest import padded_batch
    # 3 + 1 masked tokens in the first half, 1 + 1 in the second: the halves' counts differ
    batch = padded_batch(rng, 50, B=4, T=11, n_labels=(3, 1, 1, 1))
    model = small_model()
    whole = gradient(model, [batch])
    counts = (int((batch["mlm_labels"] != -100).sum()), 4)
    summed = gradient(model, halves(batch), loss_counts=counts)
    assert np.abs(summed - whole).max() <= 1e-12 * np.abs(whole).max()
    # the trap: each half divided by its own count, then averaged, is another gradient
    mean_of_means = gradient(model, halves(batch)) / 2
    assert np.abs(mean_of_means - whole).max() > 1e-3 * np.abs(whole).max()


@pytest.mark.parametrize("bad", [(0, 4), (3,), (2.5, 4), "ab", (True, 4), (-1, 2)])
def test_loss_counts_are_checked(rng, bad):
    from conftest import padded_batch
    model = small_model()
    model.forward(**padded_batch(rng, 50, B=2, T=8))
    with pytest.raises(ValueError, match="loss_counts"):
        model.backward(loss_counts=bad)


class FakeMPI:
    """The calls MPIComm makes of an mpi4py communicator, for rank ``rank`` of ``size``."""

    def __init__(self, rank, size):
        self.rank, self.size = rank, size

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size

    def bcast(self, value, root=0):
        return value


def test_each_rank_takes_its_rows_and_divides_by_the_global_counts(rng):
    from conftest import padded_batch
    from minibert.train.dist import MPIComm
    batch = padded_batch(rng, 50, B=6, T=9, n_labels=(2, 1, 3))
    parts = [MPIComm(FakeMPI(r, 3)).share(batch) for r in range(3)]
    for k in batch:
        np.testing.assert_array_equal(np.concatenate([p[k] for p in parts]), batch[k])
    assert [len(p["nsp_labels"]) for p in parts] == [2, 2, 2]
    masked = [int((p["mlm_labels"] != -100).sum()) for p in parts]
    assert len(set(masked)) > 1        # the ranks' counts differ; every rank divides by their sum
    assert MPIComm(FakeMPI(1, 3)).loss_counts(batch) == (sum(masked), 6)
    assert MPIComm(FakeMPI(1, 3)).dropout_seed(7, 5) == (7, 5, 1)


def fake_cupy(monkeypatch, gpus=2, nccl_available=True):
    """A stand-in for CuPy's device and NCCL calls, recording them: no GPU is needed to follow the path."""
    import types
    calls = []

    class Communicator:
        def __init__(self, size, uid, rank):
            calls.append(("init", size, uid, rank))

        def allReduce(self, send, recv, count, dtype, op, stream):
            calls.append(("allReduce", send, recv, count, dtype, op, stream))

        def destroy(self):
            calls.append(("destroy",))

    nccl = types.SimpleNamespace(available=nccl_available, get_unique_id=lambda: "uid-of-rank-0",
                                 NcclCommunicator=Communicator, NCCL_FLOAT32="f32", NCCL_FLOAT64="f64",
                                 NCCL_FLOAT16="f16", NCCL_SUM="sum")
    def device(i):
        calls.append(("device", i))
        return types.SimpleNamespace(use=lambda: None, pci_bus_id=f"0000:{i:02d}:00.0")

    cuda = types.SimpleNamespace(
        nccl=nccl, runtime=types.SimpleNamespace(getDeviceCount=lambda: gpus), Device=device,
        get_current_stream=lambda: types.SimpleNamespace(ptr=1234))
    cupy = types.ModuleType("cupy")
    cupy.cuda = cuda
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
    monkeypatch.setitem(sys.modules, "cupy.cuda.nccl", nccl)
    return calls


def test_the_nccl_path_joins_with_rank_0s_id_and_sums_the_buffer_in_place(monkeypatch):
    import types

    from minibert.train import dist, nccl
    calls = fake_cupy(monkeypatch)
    comm = dist.MPIComm(FakeMPI(1, 2))
    assert nccl.select_gpu(1, 2) == "0000:01:00.0"
    grads = nccl.NcclGrads(comm)
    buf = types.SimpleNamespace(flags=types.SimpleNamespace(c_contiguous=True), size=10, dtype=np.dtype("float32"),
                                data=types.SimpleNamespace(ptr=99))
    grads(buf)
    grads.close()
    assert calls == [("device", 1), ("init", 2, None, 1), ("allReduce", 99, 99, 10, "f32", "sum", 1234),
                     ("destroy",)]


def test_the_nccl_path_refuses_fewer_gpus_than_ranks_and_a_cupy_without_nccl(monkeypatch):
    from minibert.train import dist, nccl
    fake_cupy(monkeypatch, gpus=2, nccl_available=False)
    comm = dist.MPIComm(FakeMPI(0, 2))
    with pytest.raises(ValueError, match="this node starts 3 processes and CUDA sees 2 GPUs;"):
        nccl.select_gpu(0, 3)
    # one GPU visible to each process (CUDA_VISIBLE_DEVICES per process): each takes its own
    calls = fake_cupy(monkeypatch, gpus=1, nccl_available=False)
    assert nccl.select_gpu(1, 2) == "0000:00:00.0" and calls == [("device", 0)]
    # ... but two processes that share one GPU are refused, naming both
    nccl.check_one_per_gpu([("a", "0000:00:00.0"), ("b", "0000:00:00.0")])      # two machines: fine
    # every rank sees the same list and raises the same error: rank 0 alone will say it
    with pytest.raises(AgreedError, match="ranks 0 and 1 both got GPU 0000:00:00.0 on a") as caught:
        nccl.check_one_per_gpu([("a", "0000:00:00.0"), ("a", "0000:00:00.0")])
    assert type(caught.value.error) is ValueError and caught.value.kind == "ValueError"
    with pytest.raises(AgreedError, match="built without it") as caught:
        nccl.NcclGrads(comm)
    assert type(caught.value.error) is RuntimeError
