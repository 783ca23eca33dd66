"""Uniform draws for dropout, the very numbers of one serial draw, made by the whole pool."""
from __future__ import annotations

import math

import numpy as np

from . import pool

_UNIFORM_MIN = 1 << 16   # below this many numbers one thread draws them all


def uniform(gen, shape, dtype=np.float32):
    """``gen.random(shape, dtype=float32)``, the very same numbers, drawn by the whole pool.

    Dropout needs a uniform number per element (17 million per ``mini``
    step), and one NumPy generator draws them on one core.  NumPy's default
    generator (PCG64) can jump ahead: ``advance(k)`` puts it where it would
    be after k more 64-bit outputs, and each 64-bit output gives two float32
    numbers (its low 32 bits first, then its high 32 bits).  So the run of
    numbers [i0, i1), with i0 even, is drawn by a copy of the generator
    advanced by i0 / 2, and the threads draw their runs side by side.  The
    generator itself is then moved past all of them, so the next draw
    continues the stream exactly as after one serial draw (tested).
    Anything else (another generator, another dtype, a half-used 64-bit
    output, a small array) is one serial draw.
    """
    n = math.prod(shape)
    bitgen = gen.bit_generator
    n_threads = min(pool.num_threads(), n // _UNIFORM_MIN)
    if (n_threads < 2 or np.dtype(dtype) != np.float32
            or type(bitgen) is not np.random.PCG64):
        return gen.random(shape, dtype=dtype)
    state = bitgen.state
    if state["has_uint32"]:          # half of a 64-bit output is pending: keep it simple
        return gen.random(shape, dtype=dtype)
    out = np.empty(n, dtype=np.float32)
    even = n - n % 2
    cuts = [even * i // n_threads // 2 * 2 for i in range(n_threads + 1)]

    def block(i0, i1):
        copy = np.random.PCG64(0)
        copy.state = state
        copy.advance(i0 // 2)
        np.random.Generator(copy).random(out=out[i0:i1], dtype=np.float32)
    pool.in_parallel(block, cuts)
    bitgen.advance(even // 2)
    if n % 2:                        # the last number: the low half of the next output, as serially
        out[-1] = gen.random(dtype=np.float32)
    return out.reshape(shape)

