"""Dropout's uniform numbers from a counter: element i of draw n is a hash of (key, n, i), nothing stored.

A stateful generator (NumPy's PCG64, CuPy's RandomState) hands out numbers in
sequence, so a GPU step that wants them must first fill a whole array of
uniforms and read it back in the dropout kernel.  A counter-based generator
computes the number for element i directly from a key and i, so the kernel
that applies dropout computes its own numbers, with no array and no state
beyond the key: the model's step seeds one key (``seed_dropout``), and each
dropout of the step takes the next key in turn.

The hash is SplitMix64's finaliser (Steele, Lea and Flood, 2014) over
``key + (i + 1) * golden``: two xor-shift-multiply rounds that send every
input bit to every output bit.  The top 24 bits make a float32 uniform in
[0, 1), the top 53 a float64 one, both exact, so the same number comes out of
NumPy here, out of CuPy's arrays, and out of the CUDA kernels
(``accel/cuda/source.py``, ``COUNTER_UNIFORM``), which compute it in C.
"""
from __future__ import annotations

import numpy as np

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15          # 2^64 / golden ratio, odd: i * GOLDEN visits every 64-bit value
MIX1, MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def mix64(z: int) -> int:
    """SplitMix64's finaliser on one Python int (mod 2^64)."""
    z = ((z ^ (z >> 30)) * MIX1) & MASK
    z = ((z ^ (z >> 27)) * MIX2) & MASK
    return z ^ (z >> 31)


def counter_uniform(key: int, shape, xp=np, dtype=np.float32):
    """The uniforms of one draw: element i (in C order) is mix64(key + (i + 1) * GOLDEN) scaled to [0, 1)."""
    n = int(np.prod(shape, dtype=np.int64))
    u64 = xp.uint64
    z = u64(key) + xp.arange(1, n + 1, dtype=u64) * u64(GOLDEN)     # wraps mod 2^64, as in C
    z = (z ^ (z >> u64(30))) * u64(MIX1)
    z = (z ^ (z >> u64(27))) * u64(MIX2)
    z = z ^ (z >> u64(31))
    if np.dtype(dtype) == np.float64:
        u = (z >> u64(11)).astype(xp.float64) * 2.0 ** -53
    else:
        u = ((z >> u64(40)).astype(xp.float64) * 2.0 ** -24).astype(xp.float32)
    return u.reshape(shape).astype(dtype, copy=False)


class CounterUniform:
    """Dropout's source of uniforms for one step: each call (each dropout) takes the next key.

    Draw n's key is mix64(base + n * golden), base = mix64(seed).  ``rng(shape)``
    returns the uniforms as an array (for the reference ops); ``rng.next_key()``
    returns the key alone; ``rng.next_draw()`` returns (base, n) with the base
    in device memory, for a kernel that makes the key and the numbers itself.
    All three advance the same counter, so a model whose ops mix them draws
    exactly the numbers of a model that uses one.

    ``reseed`` starts the next step's draws and writes its base into the same
    device array: a step captured into a CUDA graph, which keeps reading that
    array, draws the next step's numbers when it is replayed.
    """

    def __init__(self, seed: int, xp=np, dtype=np.float32):
        self.xp, self.dtype = xp, dtype
        self.base_on_device = None
        self.reseed(seed)

    def reseed(self, seed: int) -> None:
        self.base = mix64(int(seed) & MASK)
        self.calls = 0
        if self.base_on_device is not None:
            self.base_on_device[...] = np.uint64(self.base)

    def next_key(self) -> int:
        key = mix64((self.base + self.calls * GOLDEN) & MASK)
        self.calls += 1
        return key

    def next_draw(self):
        """(base, n): a 0-d uint64 array on the device holding the base, and the draw's number."""
        if self.base_on_device is None:
            self.base_on_device = self.xp.full((), np.uint64(self.base), dtype=np.uint64)
        n, self.calls = self.calls, self.calls + 1
        return self.base_on_device, n

    def __call__(self, shape):
        return counter_uniform(self.next_key(), shape, self.xp, self.dtype)
