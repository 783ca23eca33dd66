"""The thread pool of the CPU kernels, and the fixed blocks of rows they share out over it.

Work is cut into blocks of whole rows of about ``BLOCK`` elements, small
enough that the temporaries of a block stay in the core's cache, and the
blocks are spread over a small thread pool (NumPy releases the GIL inside
its loops, so the threads really run in parallel).

Determinism: the blocks depend only on the array shapes, never on the
number of threads, and every block is computed the same way whichever
thread runs it, so a kernel's result is the same bit for bit with 1 or N
threads.  Row-wise operations (softmax, LayerNorm) never split a row.

The pool's size: ``MINIBERT_NUM_THREADS`` (or ``set_num_threads``),
default the CPUs this process may use.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..checks import is_int

BLOCK = 1 << 15        # elements per block: a few float32/float64 block buffers fit in L2
# the float64 erf runs ~30 NumPy operations per block: larger blocks pay the per-call cost less often
ERF_BLOCK = 1 << 16


def _default_threads():
    env = os.environ.get("MINIBERT_NUM_THREADS")
    if env is not None and env.strip():
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(f"MINIBERT_NUM_THREADS must be a positive integer (the threads of the CPU "
                             f"kernels), got {env!r}; unset it to use every CPU this process may use")
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


_threads = None          # read from the environment at first use: a bad value is an error there, not at import
_pool = None


def set_num_threads(n: int) -> None:
    """Threads used for elementwise work (1 = run every block in the calling thread)."""
    global _threads, _pool
    if not is_int(n) or n < 1:
        raise ValueError(f"set_num_threads needs a positive integer, got {n!r}")
    if _pool is not None:
        _pool.shutdown()
        _pool = None
    _threads = int(n)


def num_threads() -> int:
    global _threads
    if _threads is None:
        _threads = _default_threads()
    return _threads


def _run_blocks(fn, blocks, results, first):
    for i, (r0, r1) in enumerate(blocks):
        results[first + i] = fn(r0, r1)


def in_parallel(fn, cuts):
    """Run ``fn(cuts[i], cuts[i + 1])`` for every i, one call per thread; the caller takes the first."""
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=num_threads() - 1, thread_name_prefix="minibert")
    # NumPy's error state (np.errstate) belongs to the calling thread: hand it on to the workers
    err = np.geterr()

    def run(r0, r1):
        with np.errstate(**err):
            fn(r0, r1)
    futures = [_pool.submit(run, cuts[i], cuts[i + 1]) for i in range(1, len(cuts) - 1)]
    fn(cuts[0], cuts[1])
    for f in futures:
        f.result()


def for_rows(fn, n_rows, row_len, block=None):
    """Call ``fn(r0, r1)`` on fixed blocks of rows covering [0, n_rows), over the thread pool.

    A block holds about ``block`` elements (default ``BLOCK``; at least one
    whole row).  The blocks are a function of (n_rows, row_len) alone; threads
    take contiguous runs of them.  Returns the results of ``fn``, in block order.
    """
    step = max(1, (block or BLOCK) // max(row_len, 1))
    blocks = [(r, min(r + step, n_rows)) for r in range(0, n_rows, step)]
    results = [None] * len(blocks)
    n = min(num_threads(), len(blocks))
    if n <= 1:
        _run_blocks(fn, blocks, results, 0)
        return results
    cuts = [len(blocks) * i // n for i in range(n + 1)]
    in_parallel(lambda c0, c1: _run_blocks(fn, blocks[c0:c1], results, c0), cuts)
    return results


def rows(a):
    """A C-contiguous array as 2-D (rows, last axis)."""
    return a.reshape(-1, a.shape[-1]) if a.ndim else a.reshape(1, 1)

