"""Fused attention for training in mixed precision: forward and backward without the (T, T) weights.

The unfused attention (``ops.py``) writes the (B, A, T, T) scores, weights, dropped weights and
dropout's mask to memory and reads them back, which at T = 512 is most of attention's time.  These
three kernels (``flash_source.py``) keep a tile of them in registers at a time (Dao, 2023,
FlashAttention-2): one launch forward, two backward.

They apply to float16 q, k, v of head size 64 (mixed precision at every preset) and dropout by the
counter-based generator (a GPU model's own, ``accel/counter_rng.py``), which draws the same mask as
the unfused kernel's, so the two compute the same function.  Anything else goes the unfused way.

Off unless ``ENABLED`` (MINIBERT_ATTENTION=flash, or ``benchmarks/bench_step.py``'s form
``minibert-flash``): it is the choice of the ops once it is measured faster on a GPU.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...ops.attention import operand
from . import kernels
from .flash_source import FLASH_BWD_DKDV, FLASH_BWD_DQ, FLASH_COMMON, FLASH_FWD
from .settings import switch


FROM_ENVIRONMENT = switch("MINIBERT_ATTENTION", "flash", "fused attention in mixed precision on a GPU",
                          "unfused attention")
ENABLED = FROM_ENVIRONMENT
HEAD_SIZE = 64          # the kernels' D
TILE = 64               # rows of a tile: a block of 4 warps
THREADS = 128


class FlashCache(NamedTuple):
    """What the fused backward needs: the inputs, the output and each row's softmax maximum and
    denominator, from which it recomputes the weights."""
    q: object            # (B, A, T, 64) float16
    k: object
    v: object
    out: object          # (B, T, A, 64) float16: the output, its heads merged
    stats: object        # (B, A, T, 2) float32: m and 1 / l of each query row
    bias: object         # (B, T) float32 additive mask, or a stand-in
    has_bias: bool
    dead: object         # (B,) bool (sequences with no open key), or a stand-in
    key: tuple           # dropout's key arguments (base on the device, draw number)
    p_drop: float        # 0.0: no dropout


def applies(q, k, v, mask_bias, dropout_p, rng, train) -> bool:
    """Whether the fused kernels compute this attention: float16 heads of size 64 on the GPU, one
    sequence length, and dropout (if any) by the counter-based generator."""
    if not (ENABLED and all(kernels.on_device(a) for a in (q, k, v))):
        return False
    if not (q.ndim == 4 and q.shape == k.shape == v.shape and q.shape[-1] == HEAD_SIZE and q.shape[2] > 0
            and q.dtype == k.dtype == v.dtype == np.float16):
        return False
    if mask_bias is not None and mask_bias.shape != (q.shape[0], 1, 1, q.shape[2]):
        return False
    return not (train and dropout_p > 0.0) or hasattr(rng, "next_draw")


def _kernel(name, body):
    return kernels.kernel(name, FLASH_COMMON + body, np.float32)


def _grid(B, A, T):
    return (B * A * ((T + TILE - 1) // TILE),), (THREADS,)


def _mask_args(cache):
    return cache.bias, np.int32(cache.has_bias)


def _dropout_args(cache):
    return (*cache.key, np.int32(cache.p_drop > 0.0))


def _tail(T, A, p_drop):
    """The arguments every kernel ends with: sizes, 1 / sqrt(D), dropout's rate and 1 / (1 - rate)."""
    f = np.float32
    return np.int32(T), np.int32(A), f(1.0 / math.sqrt(HEAD_SIZE)), f(p_drop), f(1.0 / (1.0 - p_drop))


def forward(q, k, v, mask_bias, dropout_p=0.0, rng=None, train=False):
    """``ops.attention_forward`` in one launch: (out (B, A, T, 64) float16, FlashCache).  out is a view
    of a (B, T, A, 64) array, written so by the kernel, which ``merge_heads`` makes (B, T, H) without a
    copy."""
    import cupy
    B, A, T, D = q.shape
    q, k, v = (cupy.ascontiguousarray(a) for a in (q, k, v))
    drop = train and dropout_p > 0.0
    key = kernels.dropout_draws(rng, None, np.float32)[1] if drop else kernels.no_key()
    if mask_bias is not None:
        bias = cupy.ascontiguousarray(mask_bias.reshape(B, T), dtype=np.float32)
        dead = cupy.empty(B, dtype=np.bool_)
    else:
        bias, dead = kernels.dummy(np.float32), kernels.dummy(np.bool_)
    cache = FlashCache(q, k, v, cupy.empty((B, T, A, D), np.float16), cupy.empty((B, A, T, 2), np.float32),
                       bias, mask_bias is not None, dead, key, dropout_p if drop else 0.0)
    _kernel("flash_fwd", FLASH_FWD)(
        *_grid(B, A, T), (q, k, v, *_mask_args(cache), *_dropout_args(cache), cache.out, cache.stats, dead,
                          *_tail(T, A, cache.p_drop)))
    return cache.out.transpose(0, 2, 1, 3), cache


def backward(dout, cache: FlashCache):
    """``ops.attention_backward`` in two launches: dq, dk, dv, (B, A, T, 64) float16 each.  The kernels
    read dout as (B, T, A, 64), the layout ``split_heads`` gives a view of: no copy then."""
    import cupy
    q = cache.q
    B, A, T, _ = q.shape
    dout = cupy.ascontiguousarray(operand(dout, q).transpose(0, 2, 1, 3))
    delta = cupy.empty((B, A, T), np.float32)
    dq, dk, dv = cupy.empty_like(q), cupy.empty_like(q), cupy.empty_like(q)
    given = (*_mask_args(cache), cache.dead, *_dropout_args(cache))
    tail = _tail(T, A, cache.p_drop)
    _kernel("flash_bwd_dq", FLASH_BWD_DQ)(
        *_grid(B, A, T), (q, cache.k, cache.v, cache.out, dout, cache.stats, delta, *given, dq, *tail))
    _kernel("flash_bwd_dkdv", FLASH_BWD_DKDV)(
        *_grid(B, A, T), (q, cache.k, cache.v, dout, cache.stats, delta, *given, dk, dv, *tail))
    return dq, dk, dv
