"""Shared fixtures and helpers for the minibert tests."""
import os
import subprocess
import sys
from pathlib import Path

# make test runs the tests in a process per core (pytest-xdist; README, "What is checked"): each keeps
# BLAS to one thread, it and what it starts (runs, notebook kernels).  Two processes with a BLAS
# pool of two threads each, on two cores, spin against each other: one test took 7 times as long.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")
    from threadpoolctl import threadpool_limits
    threadpool_limits(1, user_api="blas")       # (for a BLAS already loaded by a plugin)

import numpy as np  # noqa: E402 (after the thread settings above)
import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# ../shared next to the repository root holds the development data (never copied into the repo)
SHARED = Path(os.environ.get("MINIBERT_SHARED", ROOT.parent / "shared"))

# The notebooks run (nbval, after these tests) in kernels that cannot import the test-only
# packages: a notebook must work with minibert's notebooks extra alone (notebook_kernels.py)
from notebook_kernels import guard_notebook_kernels  # noqa: E402

guard_notebook_kernels()

# The student copy's recording of the usual mistakes (exercises/cases/recorded.py) costs a core about two
# minutes, once per version of the code, and the test files below need it (a second process waits on its
# lock). So it starts in the background as soon as the tests are collected, and those files run last, the
# longest first: by then it is there, and no test process has waited for it doing nothing.
NEEDS_RECORDING = ("test_notebook_exercises.py", "test_exercises.py", "test_capstone.py", "test_grader_sandbox.py",
                   "test_mutation.py", "test_student_cases.py", "test_gradescope.py", "test_nbgrader.py")
_recording = []


def pytest_collection_modifyitems(session, config, items):
    late = {name: k for k, name in enumerate(NEEDS_RECORDING)}
    if any(item.path.name in late for item in items):
        items.sort(key=lambda item: late.get(item.path.name, -1))        # stable: the others keep their order
        if os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0":       # one process starts it
            code = ("import os, sys; sys.path.insert(0, sys.argv[1]); from exercises.cases.recorded import "
                    "recorded_data; recorded_data(open(os.devnull, 'w'))")
            _recording.append(subprocess.Popen([sys.executable, "-c", code, str(ROOT)], stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL, start_new_session=True))


def pytest_sessionfinish(session, exitstatus):
    for proc in _recording:            # unfinished (the tests that needed it did not run here): no file is left
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def padded_batch(rng, vocab_size, B=3, T=11, lengths=None, n_labels=(2, 1, 1)):
    """A batch with padding, both segments, some MLM labels and NSP labels.

    Returns dict(input_ids, token_type_ids, attention_mask, mlm_labels, nsp_labels).
    """
    lengths = lengths or [T, T - 4, max(3, T // 3)][:B] + [T] * max(0, B - 3)
    ids = rng.integers(5, vocab_size, (B, T))
    mask = np.zeros((B, T), dtype=np.int64)
    types = np.zeros((B, T), dtype=np.int64)
    labels = np.full((B, T), -100, dtype=np.int64)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
        types[b, n // 2:n] = 1          # second segment
        ids[b, n:] = 0                  # [PAD]
        k = n_labels[b % len(n_labels)]
        pos = rng.choice(np.arange(1, n), size=min(k, n - 1), replace=False)
        labels[b, pos] = rng.integers(0, vocab_size, size=len(pos))
    nsp = rng.integers(0, 2, B)
    return dict(input_ids=ids, token_type_ids=types, attention_mask=mask,
                mlm_labels=labels, nsp_labels=nsp)


@pytest.fixture(params=["fast", "reference"])
def either_path(request):
    """Run a test twice: with ``kernels="fast"`` (the accelerated kernels) and with the reference ops."""
    return request.param


def hold_lock_elsewhere(folder):
    """Another process holding a run folder's lock, as a run in progress does; returns the process."""
    code = ("import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY); "
            "fcntl.flock(fd, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    """120 documents of real prose (from the built-in corpus) in BERT's one-sentence-per-line format."""
    from minibert.data.builtin import builtin_corpus
    docs = builtin_corpus(cache_dir=False).documents[:120]
    path = tmp_path_factory.mktemp("corpus") / "small.txt"
    path.write_text("\n\n".join("\n".join(d) for d in docs) + "\n")
    return path


@pytest.fixture(scope="session")
def recorded_cases(tmp_path_factory):
    """The usual mistakes recorded for the student copy (exercises/cases/recorded.py), as a file: made
    once per version of the exercises and kept in minibert's cache folder, where make-student finds it."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from exercises.cases.recorded import recorded_data
    path = tmp_path_factory.mktemp("recorded") / "recorded.data"
    path.write_bytes(recorded_data())
    return path


@pytest.fixture
def replayed(recorded_cases):
    """Make ``TABLES[name]`` read the recording, as the student copy's does; undone after the test."""
    from exercises.cases import TABLES
    from exercises.cases.recorded import exercise
    changed = []

    def replay(name):
        table = TABLES[name]
        changed.append(table)
        table.recorded = exercise(name, recorded_cases)[0].recorded
        return table
    yield replay
    for table in changed:
        table.recorded = None
