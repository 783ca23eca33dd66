"""Data-parallel jobs as they run across nodes: each process in a working folder of its own (as on
nodes without a shared disk), reading its own copy of the corpus and the vocabulary, and signals
that reach one process more than once. Real ``mpiexec`` jobs, as in test_dist.py."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_dist import (MPIEXEC, assert_same_records, environment, one_error_line, rank_pid, records, start_long_job,
                       wait_for_checkpoints)

ROOT = Path(__file__).resolve().parents[1]
SMALL = ("--config tiny --steps 4 --seq-len 32 --batch-size 8 --eval-instances 8 --log-every 1 "
         "--no-progress --no-plot").split()


@pytest.fixture(scope="module", autouse=True)
def mpi_installed():
    pytest.importorskip("mpi4py")
    assert MPIEXEC.exists(), f"{MPIEXEC} is missing: the mpich wheel provides it (the dist extra)"


def env():
    return dict(environment(), PYTHONPATH=str(ROOT))


def two_folders(tmp_path, corpus_file, corpus_b=None, vocab_b=None):
    """Working folders A and B holding corpus.txt (and vocab.txt), the same unless told otherwise."""
    text = corpus_file.read_text()
    vocab = None
    if vocab_b is not None:
        from minibert.data.tokenizer import train_wordpiece
        vocab = "".join(t + "\n" for t in train_wordpiece(text.split("\n\n"), 1000).vocab)
    for name, corpus, vocab_text in (("A", text, vocab), ("B", corpus_b or text, vocab_b and vocab_b(vocab))):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "corpus.txt").write_text(corpus)
        if vocab_text is not None:
            (folder / "vocab.txt").write_text(vocab_text)
    return tmp_path / "A", tmp_path / "B"


def mpmd(a: Path, b: Path, *flags) -> subprocess.CompletedProcess:
    """``mpiexec -n 1 -wdir A CMD : -n 1 -wdir B CMD``: one process in each folder, one command."""
    one = [sys.executable, "-m", "mpi4py", "-m", "minibert", "pretrain", "--corpus", "corpus.txt", *SMALL, *flags]
    cmd = [str(MPIEXEC), "-n", "1", "-wdir", str(a), *one, ":", "-n", "1", "-wdir", str(b), *one]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env())


def test_a_bad_pair_of_flags_is_one_line_from_rank_0(corpus_file, tmp_path):
    # each rank refused it on its own: two lines and an MPI_Abort
    a, b = two_folders(tmp_path, corpus_file)
    line = one_error_line(mpmd(a, b, "--vocab", "v.txt", "--vocab-size", "400", "--out", tmp_path / "run"))
    assert "--vocab-size sets the size of a vocabulary trained on the corpus" in line


def test_ranks_that_read_different_corpora_are_one_line_from_rank_0(corpus_file, tmp_path):
    # it trained, exit 0, each rank on its own text
    other = corpus_file.read_text().replace(" the ", " a ", 1)
    a, b = two_folders(tmp_path, corpus_file, corpus_b=other)
    line = one_error_line(mpmd(a, b, "--vocab-size", "400", "--out", tmp_path / "run"))
    assert line.startswith("minibert pretrain: error: rank 1: the corpus 'corpus.txt' differs from rank 0's "
                           "(fingerprint "), line
    assert "a relative --corpus is read from each process's own working folder" in line


def test_ranks_that_read_different_vocabularies_are_one_line_from_rank_0(corpus_file, tmp_path):
    # it was two chained tracebacks from Bcast: the ranks built models of different sizes
    a, b = two_folders(tmp_path, corpus_file, vocab_b=lambda v: v + "zzzextra\n")
    line = one_error_line(mpmd(a, b, "--vocab", "vocab.txt", "--out", tmp_path / "run"))
    n = len((b / "vocab.txt").read_text().splitlines())
    assert line.startswith(f"minibert pretrain: error: rank 1: the vocabulary 'vocab.txt' ({n:,} tokens) differs "
                           f"from rank 0's (fingerprint "), line


def test_ranks_in_folders_of_their_own_train_on_copies_of_one_corpus(corpus_file, tmp_path):
    # nodes without a shared disk: the same file copied to each; the vocabulary rank 0 trains
    # reaches the others from rank 0, not from a run folder that only rank 0's node has
    a, b = two_folders(tmp_path, corpus_file)
    done = mpmd(a, b, "--vocab-size", "400", "--out", "run")
    assert done.returncode == 0, done.stderr
    assert (a / "run" / "model" / "model.safetensors").is_file() and not (b / "run").exists()


def test_a_run_in_folders_of_their_own_stops_and_resumes(corpus_file, tmp_path):
    # rank 1 read the checkpoint itself on resume: "rank 1: checkpoint not found" where it cannot see --out
    a, b = two_folders(tmp_path, corpus_file)
    flags = ["--vocab-size", "400", "--steps", "6"]
    for extra in (["--stop-at", "3", "--out", "run"], ["--resume", "--out", "run"], ["--out", "whole"]):
        done = mpmd(a, b, *flags, *extra)
        assert done.returncode == 0, done.stderr
    assert not (b / "run").exists()
    assert_same_records(records(a / "run"), records(a / "whole"))


@pytest.mark.parametrize("rank", [0, 1])
def test_a_second_ctrl_c_to_one_rank_changes_nothing(tmp_path, rank):
    # the first signal saves; the second, arriving while the job winds down, ended it with
    # MPICH's "BAD TERMINATION" and status 2 (one process exited 130)
    out = tmp_path / "run"
    proc = start_long_job(out)
    try:
        wait_for_checkpoints(out, proc)
        pid = rank_pid(out, rank)
        sent = 0
        while proc.poll() is None and sent < 200:     # again and again, until the job has ended
            try:
                os.kill(pid, signal.SIGINT)
            except ProcessLookupError:
                break
            sent += 1
            time.sleep(0.02)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert sent >= 2
    assert proc.returncode == 0, stdout + stderr
    assert "BAD TERMINATION" not in stdout + stderr
    assert len(re.findall(r"SIGINT received: saved \S+ at step \d+", stdout)) == 1, stdout


@pytest.mark.parametrize("which", [0, 1])
def test_a_thread_count_set_on_one_rank_only_neither_hangs_nor_differs(corpus_file, tmp_path, which):
    # use_device counted the ranks of a node (a collective) only where MINIBERT_NUM_THREADS was
    # unset: a rank with it set skipped the collective and the job waited forever
    out = tmp_path / "run"
    one = [sys.executable, "-m", "mpi4py", "-m", "minibert", "pretrain", "--corpus", str(corpus_file),
           "--vocab-size", "400", *SMALL, "--out", str(out)]
    ranks = [[*one], ["env", "MINIBERT_NUM_THREADS=1", *one]][::1 if which == 1 else -1]
    cmd = [str(MPIEXEC), "-n", "1", *ranks[0], ":", "-n", "1", *ranks[1]]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env())
    assert done.returncode == 0, done.stderr[-2000:]
    assert [r["step"] for r in records(out) if r["kind"] == "train"] == [1, 2, 3, 4]
