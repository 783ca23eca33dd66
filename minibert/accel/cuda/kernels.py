"""Compiling and launching minibert's CUDA kernels with CuPy; which arrays they take.

The raw kernels (``source.py``) are compiled by CuPy on first use (NVRTC)
and cached on disk by CuPy, once per dtype; the elementwise ones are
``cupy.ElementwiseKernel``s, compiled for the dtypes they are called with.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from . import source as cuda_source

CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


def on_device(a) -> bool:
    """Whether ``a`` is a CuPy array.  (``tests/cuda_on_cpu.py`` swaps this for a NumPy
    test, to run these kernels, compiled for the CPU, where no GPU is present.)"""
    return type(a).__module__.split(".")[0] == "cupy"


def applies(*arrays) -> bool:
    """True for CuPy arrays, all float32 or all float64, C-contiguous."""
    if not arrays:
        return False
    dtype = getattr(arrays[0], "dtype", None)
    for a in arrays:
        if not on_device(a):
            return False
        if a.dtype != dtype or a.dtype not in CTYPES or not a.flags.c_contiguous:
            return False
    return True


@lru_cache(maxsize=None)
def _raw(name, source, ctype):
    import cupy
    return cupy.RawKernel(cuda_source.REDUCE.replace("CTYPE", ctype) + source, name, options=("--std=c++14",))


def kernel(name, source, dtype):
    return _raw(name, source, CTYPES[np.dtype(dtype)])


def warp_rows(rows):
    """Grid and block of a launch with one warp per row, ``source.ROWS_PER_BLOCK`` rows a block."""
    return ((rows + cuda_source.ROWS_PER_BLOCK - 1) // cuda_source.ROWS_PER_BLOCK,), (32 * cuda_source.ROWS_PER_BLOCK,)


def dropout_draws(rng, shape, dtype):
    """How a kernel gets dropout's uniforms for an array of ``shape``: (u, key, how).  how 2: a
    counter-based generator, whose numbers the kernel computes from ``key`` (u a stand-in); how 1:
    any other generator's draws, the array u (``no_key()``).  (how 0, no dropout, is the caller's.)
    A key is two kernel arguments: the step's base in device memory (a 0-d uint64 array, which a
    CUDA graph reads again at each replay) and the draw's number (``CounterUniform.next_draw``)."""
    if hasattr(rng, "next_draw"):
        base, n = rng.next_draw()
        return dummy(dtype), (base, np.uint64(n)), 2
    return rng(shape), no_key(), 1


def no_key():
    """The key arguments of a launch without counter-based dropout."""
    return dummy(np.uint64), np.uint64(0)


@lru_cache(maxsize=None)
def dummy(dtype):
    import cupy
    return cupy.zeros(1, dtype=dtype)


def float_or_half(a, dtype):
    """A kernel's three arguments for an array it takes either in ``dtype`` (T*) or as float16 bits
    (unsigned short*, mixed precision's products and operands): (a or a stand-in, a or a stand-in,
    1 where a is the float16 one)."""
    half = a.dtype == np.float16
    return (dummy(dtype) if half else a), (a if half else dummy(np.float16)), np.int32(half)


def grid_stride(n):
    """Grid and block of an elementwise launch over n elements: blocks of 256 threads, at most 4096
    blocks, each thread stepping on by the grid's size."""
    return (int(min((n + 255) // 256, 4096)),), (256,)


@lru_cache(maxsize=None)
def tickets():
    """Counters on the device, 0 between launches: the blocks of a column sum (a counter per group of
    columns) and of the loss's forward (the first counter) take a number to find the last block, which
    sets its counter back to 0.  Launches on one stream never overlap, so the kernels share them."""
    import cupy
    return cupy.zeros(cuda_source.COLSUM_MAX_GROUPS, dtype=np.uint32)


def threads_per_row(n):
    """Threads per block for rows of n: a multiple of 32, at most 256."""
    return int(min(256, max(32, 32 * math.ceil(n / 32))))


@lru_cache(maxsize=None)
def reductions():
    """The reduction kernels: the sum of squares of an array (a gradient's norm, squared)."""
    import cupy
    return dict(sum_of_squares=cupy.ReductionKernel("T x", "T out", "x * x", "a + b", "out = a", "0",
                                                    "minibert_sum_of_squares"))


@lru_cache(maxsize=None)
def elementwise():
    """The elementwise kernels (CuPy compiles each for the dtypes it is called with)."""
    import cupy
    ek = cupy.ElementwiseKernel
    return dict(
        # attention's additive mask: 0 where a key is kept (m = 1), the most negative float where padded
        mask_bias=ek("I m, T neg", "T b", "b = (T(1) - T(m)) * neg;", "minibert_mask_bias"),
        # inverted dropout: mask = (u >= p) / (1 - p);  y = x * mask
        dropout_fwd=ek("T x, T u, T p, T scale", "T y, T mask",
                       "mask = u >= p ? scale : T(0); y = x * mask;", "minibert_dropout_fwd"),
        # the same, with u = counter_uniform(key, i) computed here instead of read (counter_rng.py), the
        # key made from the step's base (a 0-d array on the device) and the draw's number
        dropout_fwd_keyed=ek("T x, uint64 base, uint64 draw, T p, T scale", "T y, T mask",
                             "unsigned long long key; {" + cuda_source.COUNTER_MIX.replace("KEY", "base").replace(
                                 "(unsigned long long)(IDX + 1)", "draw") + " key = z; } " +
                             cuda_source.COUNTER_MIX.replace("KEY", "key").replace("IDX", "i") +
                             f" T u = {cuda_source.COUNTER_TO_T};"
                             " mask = u >= p ? scale : T(0); y = x * mask;", "minibert_dropout_fwd_keyed"),
        # AdamW, the same steps as optim.AdamW.step, element by element
        # (go = 0: a step the loss scaler skips, decided on the device: nothing changes)
        adamw=ek("T g, T b1, T c1, T b2, T c2, T step_size, T root_c2, T eps, T decay, int64 n_decay, T go",
                 "T p, T m, T v",
                 "if (go != T(0)) {"
                 " m = m * b1 + g * c1;"
                 " v = v * b2 + (g * g) * c2;"
                 " T q = i < n_decay ? p * decay : p;"
                 " p = q - (m / (sqrt(v) / root_c2 + eps)) * step_size; }",
                 "minibert_adamw"),
        # mixed precision's gradients unscaled: g *= 1 / (accum * scale), the factor made here in double
        unscale=ek("float64 scale, int64 accum", "T g", "g = g * (T)(1.0 / ((double)accum * scale));",
                   "minibert_unscale"),
        # clipping: g *= min(max_norm / (norm + 1e-6), 1), the factor made here from the norm on the device
        clip=ek("T norm, T max_norm", "T g",
                "const T c = max_norm / (norm + T(1e-6)); g = g * (c > T(1) ? T(1) : c);", "minibert_clip"),
    )


