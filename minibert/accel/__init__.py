"""Accelerated implementations of the ops of ``minibert.ops``, kept apart from the reference.

``cpu/``   float32 NumPy: the same formulas in cache-sized blocks of rows
           over a thread pool (``pool.py``), products cut into fixed runs of
           rows (``blas.py``), a float64 rational erf (``erf.py``), dropout's
           uniform draws on all cores (``rng.py``).
``cuda/``  CuPy: one CUDA kernel per formula instead of one per expression.

``cpu`` and ``cuda`` are each a complete set of ops (their kernels, and the
reference ops where they have none), the set a model built with
``kernels="fast"`` runs on its device (``minibert.kernels``).
Each kernel is tested against its reference op (``tests/test_accel.py``).
Choosing ``cpu`` also makes the one process-wide setting of the CPU path
(glibc's malloc keeps the memory a step frees: ``memory.py``); BLAS is held
to one thread per product by the products themselves (``blas.py``), only
while they run.  ``MINIBERT_NUM_THREADS`` sets the pool's size.
"""
from __future__ import annotations

from .memory import keep_freed_memory
from .pool import num_threads, set_num_threads

__all__ = ["keep_freed_memory", "num_threads", "set_num_threads"]
