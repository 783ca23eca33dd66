"""Accelerated implementations of the ops of ``minibert.ops``, kept apart from the reference.

``cpu/``   float32 NumPy: the same formulas in cache-sized blocks of rows
           over a thread pool (``pool.py``), products cut into fixed runs of
           rows (``blas.py``), a float64 rational erf (``erf.py``), dropout's
           uniform draws on all cores (``rng.py``).
``cuda/``  CuPy: one CUDA kernel per formula instead of one per expression.

``registry.py`` lists which kernel implements which op on which arrays;
``minibert.dispatch`` chooses between a kernel and the reference.  Every
kernel returns the reference's cache type, and is tested against the
reference (``tests/test_accel.py``).

Nothing runs accelerated until ``enable()`` is called: the command line,
``train.pretrain``, the demo and the benchmarks call it.  ``enable()`` also
makes the process-wide setting of the CPU path (glibc's malloc keeps the
memory a step frees: ``memory.py``); BLAS is held to one thread per
product by the products themselves (``blas.py``), only while they run.
``MINIBERT_FAST=0`` in the environment makes ``enable()`` do nothing: the
reference runs end to end.  ``MINIBERT_NUM_THREADS`` sets the pool's size.
"""
from __future__ import annotations

import os

from .memory import keep_freed_memory
from .pool import num_threads, set_num_threads

_enabled = False


def enable() -> bool:
    """Run the accelerated kernels from now on, where they apply; returns whether they are on.

    Unless ``MINIBERT_FAST=0``: then nothing changes and the reference runs.
    """
    global _enabled
    if os.environ.get("MINIBERT_FAST", "1") == "0":
        return _enabled
    num_threads()         # a bad MINIBERT_NUM_THREADS is one clear error here, before any work
    _enabled = True
    keep_freed_memory()   # each step reuses the memory the last one freed
    return True


def set_enabled(flag: bool) -> None:
    """Turn the accelerated kernels on or off (off: every op runs its reference code).

    Unlike ``enable()`` this changes no process-wide setting; tests use it to
    compare the two paths.
    """
    global _enabled
    _enabled = bool(flag)


def enabled() -> bool:
    return _enabled


__all__ = ["enable", "enabled", "keep_freed_memory", "num_threads", "set_enabled", "set_num_threads"]
