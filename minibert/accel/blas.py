"""Matrix products on the thread pool: BLAS held to one thread, the pool sharing out the work.

Between two matrix products minibert runs its own elementwise work on the
same cores (GELU, LayerNorm, softmax), and a multi-threaded BLAS keeps its
threads spinning on them for a while after every product, waiting for the
next one.  Here every product is cut into pieces by the shapes alone, each
piece is a single-threaded BLAS call (through threadpoolctl), and the pool
of ``pool.py`` shares the pieces out, so one pool does all the work.
"""
from __future__ import annotations

import math

import numpy as np

from . import pool

_blas = None


def _blas_controller():
    """threadpoolctl's controller of the BLAS thread pool, or False where it is not installed."""
    global _blas
    if _blas is None:
        try:
            from threadpoolctl import ThreadpoolController
            _blas = ThreadpoolController()
        except ImportError:
            _blas = False
    return _blas


def matmul(a, b, out=None):
    """a @ b for stacks of small matrices: (S, ..., m, k) @ (S, ..., k, n) -> (S, ..., m, n).

    Attention multiplies B * A small matrices (T x D by D x T).  NumPy hands
    them to BLAS one by one, and a multi-threaded BLAS splits each small
    product over the cores and synchronises its threads for every one of
    them, which costs more than the arithmetic.  Here the stack is split over
    the thread pool along its first axis instead, and BLAS runs one thread per
    product (through threadpoolctl; without it, this is plain ``np.matmul``).
    Each product is computed by the same single-threaded call whatever the
    split, so results do not depend on the number of threads.
    """
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    if out is None:
        out = np.empty(shape, dtype=np.result_type(a, b))
    ctl = _blas_controller()
    if not ctl or a.ndim < 3 or a.shape[0] != b.shape[0] or a.shape[0] != shape[0]:
        return np.matmul(a, b, out=out)

    def block(s0, s1):
        np.matmul(a[s0:s1], b[s0:s1], out=out[s0:s1])
    with ctl.limit(limits=1, user_api="blas"):
        pool.for_rows(block, shape[0], math.prod(shape[1:]))
    return out


_GEMM_BLOCK_ROWS = 256   # a block of rows this long costs BLAS no more per row than the whole product
_GEMM_MIN_ROWS = 64      # ...and a product is cut at all only if each block keeps this many
_GEMM_MAX_BLOCKS = 16


def gemm_blocks(M: int) -> list:
    """The runs of rows (r0, r1) that ``gemm`` cuts an M-row product into: a function of M alone.

    A power of two of equal runs (so 2, 4, 8 or 16 threads share them evenly),
    each about ``_GEMM_BLOCK_ROWS`` rows long, at most ``_GEMM_MAX_BLOCKS`` of
    them; two runs as soon as each keeps ``_GEMM_MIN_ROWS`` rows, one below that.
    """
    n = 1
    while n < _GEMM_MAX_BLOCKS and M // (2 * n) >= _GEMM_BLOCK_ROWS:
        n *= 2
    if n == 1 and M // 2 >= _GEMM_MIN_ROWS:
        n = 2
    return [(M * i // n, M * (i + 1) // n) for i in range(n)]


def gemm(a, b, bias=None):
    """a @ b (+ bias) for 2-D float32 arrays: (M, K) @ (K, N) -> (M, N), rows split over the pool.

    A multi-threaded OpenBLAS keeps its worker threads spinning for a while
    after every product, waiting for the next one.  Between two products
    minibert runs its own elementwise work on the same cores (GELU,
    LayerNorm, softmax), and the spinning threads take the cores from it:
    a quarter of a ``mini`` step was lost that way on a 2-core machine.
    Here the rows of ``a`` are cut into fixed runs (``gemm_blocks``: they
    depend on M alone), each run is one single-threaded BLAS call, and the
    threads of the pool take contiguous shares of the runs, so BLAS never
    starts threads of its own and one pool does all the work.  The bias is
    added per run, while those rows are still in cache.

    Bits: every run is the same BLAS call on the same numbers whatever the
    number of threads, so the result is the same bit for bit with 1 or N
    threads, on any CPU and BLAS kernel.  It is *not* promised to equal one
    whole ``a @ b`` bit for bit: a BLAS kernel may round a product of 128
    rows differently from the same rows inside a product of 512 (OpenBLAS's
    Haswell kernel does), so it equals the reference code's product within
    float32 rounding.
    """
    M = a.shape[0]
    out = np.empty((M, b.shape[1]), dtype=np.result_type(a, b))
    runs = gemm_blocks(M)

    def block(i0, i1):
        for r0, r1 in runs[i0:i1]:
            o = np.matmul(a[r0:r1], b, out=out[r0:r1])
            if bias is not None:
                o += bias
    ctl = _blas_controller()
    if not ctl:          # no threadpoolctl: BLAS cannot be held to one thread, so one call
        np.matmul(a, b, out=out)
        if bias is not None:
            out += bias
        return out
    n = min(pool.num_threads(), len(runs))
    with ctl.limit(limits=1, user_api="blas"):
        if n <= 1:
            block(0, len(runs))
        else:
            pool.in_parallel(block, [len(runs) * i // n for i in range(n + 1)])
    return out


