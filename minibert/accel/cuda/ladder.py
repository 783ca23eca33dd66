"""Attention's forward pass, several ways: a ladder of CUDA kernels to read from the bottom up.

Every version computes, for each head and each query row t,

    out[t] = sum_j softmax_j(q[t] . k[j] / sqrt(D) + bias[j]) v[j]

and ``benchmarks/bench_attention.py`` times each against PyTorch's fused
attention.  They differ in what they write to memory, and that is the lesson:

v1  naive: one thread per query row.  It writes the row's scores to a scratch
    row in global memory, reads them back for the maximum, again for the sum
    of exponentials, and again for the weighted sum of v.  Every query reads
    every key and value from global memory, and nothing is shared between
    threads.
v2a two products and a fused softmax: the products q k^T and P v go to
    cuBLAS, and one block of threads per score row does scale, mask and
    softmax, reducing through shared memory with barriers (__syncthreads).
    The (B, A, T, T) weights are written once and read once.
v2b v2a's work with one warp per score row that reads its row once and keeps
    it in registers (16 values a thread, rows of up to 512 keys), for the
    maximum, the exponentials and the write: a row is read once and each
    exponential computed once.
v2  the same with one warp per score row: a row of a few hundred keys
    leaves a block's threads one or two values each and most of their time
    at barriers; 32 threads reduce with register shuffles and no barrier, 8
    rows to a block.  This is minibert's own attention
    (``accel.cuda.attention_forward``, ``attention_fwd`` of ``source.py``).
v3  online softmax: one thread per query row again, but it streams over the
    keys once, keeping a running maximum m, the running sum l of exp(z - m)
    and the running output acc.  When a new score raises the maximum, the
    old l and acc are rescaled by exp(m_old - m_new), so that at the end
    acc / l is the softmax's weighted sum exactly (Milakov and Gimelshein,
    2018, "Online normalizer calculation for softmax").  The (T, T) scores
    never exist in memory.
v4  tiled online softmax: v3, but a block of TILE queries (one thread each)
    loads TILE keys and values at a time into shared memory, together, and
    every thread of the block reads them from there: each key and value is
    read from global memory once per block instead of once per query.  This
    is FlashAttention's idea (Dao et al., 2022) without its tensor-core
    products.

v5  training: ``flash.py`` (``flash_source.py``), v4's online softmax with the
    products on the tensor cores, in mixed precision, and a backward that
    recomputes the weights a tile at a time from each row's maximum and sum
    (FlashAttention-2, Dao, 2023).  Timed by ``bench_attention.py --training``.

v1, v2a, v2b, v3 and v4 are forward passes only (inference, or the lesson); the
model trains with v2, whose weights its backward pass reads, or, where
``flash.ENABLED``, with v5.  v2a and v2b do the
same work, so their times compare a block per row with a warp per row; v2
also keeps the weights for the backward and writes the operand of P v.
"""
from __future__ import annotations

import math

import numpy as np

from ...ops.attention import check_attention
from . import kernels
from . import ops as cuda_ops

MAX_HEAD_SIZE = 128            # v3 keeps one query's output in registers: D at most this

# v2a: the softmax of v2 with one block per score row (rows of s, (B * A * T, Tk), in place)
BLOCK_SOFTMAX = r"""
extern "C" __global__ void softmax_block_rows(T* s, const T* bias, const int has_bias, const int Tk,
                                              const long long rows_per_batch, const T scale) {
    __shared__ T sh[32];
    const long long row = blockIdx.x;
    T* sr = s + row * Tk;
    const T* br = has_bias ? bias + (row / rows_per_batch) * Tk : 0;
    T m = neg_inf(T(0));
    for (int j = threadIdx.x; j < Tk; j += blockDim.x) m = fmax(m, sr[j] * scale + (br ? br[j] : T(0)));
    m = block_max(m, sh);
    T total = 0;
    for (int j = threadIdx.x; j < Tk; j += blockDim.x) total += exp(sr[j] * scale + (br ? br[j] : T(0)) - m);
    total = block_sum(total, sh);
    for (int j = threadIdx.x; j < Tk; j += blockDim.x)
        sr[j] = exp(sr[j] * scale + (br ? br[j] : T(0)) - m) / total;
}
"""

# v2b: v2a's work, a warp per score row; each lane keeps its share of the row (lane, lane + 32, ...) in
# registers, ROW_REGISTERS values at most, and reads the rest of a longer row again where it needs it
ROW_REGISTERS = 16
WARP_SOFTMAX = r"""
extern "C" __global__ void softmax_warp_rows(T* s, const T* bias, const int has_bias, const int Tk,
                                             const long long rows_per_batch, const long long rows, const T scale) {
    const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;              // the whole warp: its shuffles below have all 32 lanes
    const int lane = threadIdx.x & 31;
    T* sr = s + row * Tk;
    const T* br = has_bias ? bias + (row / rows_per_batch) * Tk : 0;
    T z[ROW_REGISTERS];                   // -inf past the row's end: exp gives those 0
    T m = neg_inf(T(0));
#pragma unroll
    for (int c = 0; c < ROW_REGISTERS; ++c) {
        const int j = lane + 32 * c;
        z[c] = j < Tk ? sr[j] * scale + (br ? br[j] : T(0)) : neg_inf(T(0));
        m = fmax(m, z[c]);
    }
    for (int j = lane + 32 * ROW_REGISTERS; j < Tk; j += 32) m = fmax(m, sr[j] * scale + (br ? br[j] : T(0)));
    m = warp_max(m);
    T total = 0;
#pragma unroll
    for (int c = 0; c < ROW_REGISTERS; ++c) { z[c] = exp(z[c] - m); total += z[c]; }
    for (int j = lane + 32 * ROW_REGISTERS; j < Tk; j += 32) total += exp(sr[j] * scale + (br ? br[j] : T(0)) - m);
    total = warp_sum(total);
#pragma unroll
    for (int c = 0; c < ROW_REGISTERS; ++c) {
        const int j = lane + 32 * c;
        if (j < Tk) sr[j] = z[c] / total;
    }
    for (int j = lane + 32 * ROW_REGISTERS; j < Tk; j += 32) sr[j] = exp(sr[j] * scale + (br ? br[j] : T(0)) - m) / total;
}
""".replace("ROW_REGISTERS", str(ROW_REGISTERS))

# v1: one thread per query row r of (B * A * T); scratch holds one row of Tk scores per thread
NAIVE = r"""
extern "C" __global__ void attention_naive(const T* q, const T* k, const T* v, const T* bias,
                                           const int has_bias, T* scratch, T* out, const long long rows,
                                           const int A, const int Tq, const int Tk, const int D,
                                           const T scale) {
    const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const long long head = r / Tq;                     // (b, a): which q, k, v it reads
    const T* qr = q + r * D;
    const T* kh = k + head * Tk * D;
    const T* vh = v + head * Tk * D;
    const T* br = has_bias ? bias + (head / A) * Tk : 0;
    T* s = scratch + r * Tk;
    T m = neg_inf(T(0));
    for (int j = 0; j < Tk; ++j) {                     // the scores, to memory
        T dot = 0;
        for (int d = 0; d < D; ++d) dot += qr[d] * kh[j * D + d];
        T z = dot * scale + (br ? br[j] : T(0));
        s[j] = z;
        m = fmax(m, z);
    }
    T l = 0;
    for (int j = 0; j < Tk; ++j) {                     // read back: exponentials and their sum
        T e = exp(s[j] - m);
        s[j] = e;
        l += e;
    }
    for (int d = 0; d < D; ++d) {                      // read back again: the weighted sum of v
        T acc = 0;
        for (int j = 0; j < Tk; ++j) acc += s[j] * vh[j * D + d];
        out[r * D + d] = acc / l;
    }
}
"""

# v3 and v4 fold one key at a time into a query's running maximum m, sum l and output acc
ONLINE_STEP = r"""
__device__ __forceinline__ void online_step(const T z, const T* vj, const int D, T& m, T& l, T* acc) {
    const T m_new = fmax(m, z);
    const T rescale = exp(m - m_new);                  // 0 at the first key (m = -inf), else <= 1
    const T p = exp(z - m_new);
    l = l * rescale + p;
    for (int d = 0; d < D; ++d) acc[d] = acc[d] * rescale + p * vj[d];
    m = m_new;
}
"""

# v3: one thread per query row, one pass over the keys, nothing written but the output
ONLINE = ONLINE_STEP + r"""
#define MAX_D MAX_HEAD_SIZE
extern "C" __global__ void attention_online(const T* q, const T* k, const T* v, const T* bias,
                                            const int has_bias, T* out, const long long rows,
                                            const int A, const int Tq, const int Tk, const int D,
                                            const T scale) {
    const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const long long head = r / Tq;
    const T* qr = q + r * D;
    const T* kh = k + head * Tk * D;
    const T* vh = v + head * Tk * D;
    const T* br = has_bias ? bias + (head / A) * Tk : 0;
    T acc[MAX_D];
    for (int d = 0; d < D; ++d) acc[d] = 0;
    T m = neg_inf(T(0)), l = 0;
    for (int j = 0; j < Tk; ++j) {
        T dot = 0;
        for (int d = 0; d < D; ++d) dot += qr[d] * kh[j * D + d];
        online_step(dot * scale + (br ? br[j] : T(0)), vh + j * D, D, m, l, acc);
    }
    for (int d = 0; d < D; ++d) out[r * D + d] = acc[d] / l;
}
"""

# v4: one block of TILE threads per (head, TILE queries); keys and values staged in shared memory
TILED = ONLINE_STEP + r"""
#define TILE TILE_SIZE
#define MAX_D TILED_MAX_HEAD_SIZE
extern "C" __global__ void attention_tiled(const T* q, const T* k, const T* v, const T* bias,
                                           const int has_bias, T* out, const int tiles_per_head,
                                           const int A, const int Tq, const int Tk, const int D,
                                           const T scale) {
    __shared__ T ks[TILE * MAX_D];
    __shared__ T vs[TILE * MAX_D];
    const long long head = blockIdx.x / tiles_per_head;
    const int t = (blockIdx.x % tiles_per_head) * TILE + threadIdx.x;   // this thread's query
    const bool active = t < Tq;             // the last tile's spare threads still help to load
    const T* qr = q + (head * Tq + (active ? t : 0)) * D;
    const T* kh = k + head * Tk * D;
    const T* vh = v + head * Tk * D;
    const T* br = has_bias ? bias + (head / A) * Tk : 0;
    T acc[MAX_D];
    for (int d = 0; d < D; ++d) acc[d] = 0;
    T m = neg_inf(T(0)), l = 0;
    for (int j0 = 0; j0 < Tk; j0 += TILE) {
        const int nj = Tk - j0 < TILE ? Tk - j0 : TILE;
        __syncthreads();                    // everyone is done with the previous tile
        for (int x = threadIdx.x; x < nj * D; x += blockDim.x) {
            ks[x] = kh[j0 * D + x];
            vs[x] = vh[j0 * D + x];
        }
        __syncthreads();                    // the tile is loaded
        if (!active) continue;
        for (int jj = 0; jj < nj; ++jj) {
            T dot = 0;
            for (int d = 0; d < D; ++d) dot += qr[d] * ks[jj * D + d];
            online_step(dot * scale + (br ? br[j0 + jj] : T(0)), vs + jj * D, D, m, l, acc);
        }
    }
    if (active)
        for (int d = 0; d < D; ++d) out[(head * Tq + t) * D + d] = acc[d] / l;
}
"""

THREADS = 128                  # v1 and v3: threads per block, one query row each
TILE = 32                      # v4: queries per block, and keys per tile
TILED_MAX_HEAD_SIZE = 64       # two tiles of 32 rows of D doubles in shared memory: 32 KiB at D = 64


def _prepare(q, k, v, mask_bias):
    """Contiguous q, k, v, the (B, Tk) bias (or a dummy), and the sizes every rung takes last:
    (A, Tq, Tk, D, scale)."""
    import cupy
    check_attention(q, k, v)
    q, k, v = (cupy.ascontiguousarray(a) for a in (q, k, v))
    B, A, T, D = q.shape
    Tk = k.shape[-2]
    has_bias = mask_bias is not None
    bias = cupy.ascontiguousarray(mask_bias.reshape(B, Tk), dtype=q.dtype) if has_bias else kernels.dummy(q.dtype)
    sizes = (np.int32(A), np.int32(T), np.int32(Tk), np.int32(D), q.dtype.type(1.0 / math.sqrt(D)))
    return q, k, v, bias, np.int32(has_bias), sizes


def _rows(q):
    """One thread per query row: the row count and a grid of THREADS-thread blocks covering it."""
    rows = q.shape[0] * q.shape[1] * q.shape[2]
    return np.int64(rows), ((rows + THREADS - 1) // THREADS,)


def attention_naive(q, k, v, mask_bias=None):
    """v1: scores to a scratch row per query, read back twice."""
    import cupy
    q, k, v, bias, has_bias, sizes = _prepare(q, k, v, mask_bias)
    rows, grid = _rows(q)
    out = cupy.empty_like(q)
    scratch = cupy.empty((int(rows), k.shape[-2]), dtype=q.dtype)
    kernels.kernel("attention_naive", NAIVE, q.dtype)(grid, (THREADS,), (q, k, v, bias, has_bias, scratch, out,
                                                                         rows, *sizes))
    return out


def attention_block_rows(q, k, v, mask_bias=None):
    """v2a: cuBLAS products around a softmax kernel of one block per score row."""
    q, k, v, bias, has_bias, (A, T, Tk, D, scale) = _prepare(q, k, v, mask_bias)
    s = q @ k.swapaxes(-1, -2)
    kernels.kernel("softmax_block_rows", BLOCK_SOFTMAX, q.dtype)(
        (s.size // Tk,), (kernels.threads_per_row(Tk),), (s, bias, has_bias, Tk, np.int64(A * T), scale))
    return s @ v


def attention_warp_rows(q, k, v, mask_bias=None):
    """v2b: cuBLAS products around a softmax kernel of one warp per score row, the row in registers."""
    q, k, v, bias, has_bias, (A, T, Tk, D, scale) = _prepare(q, k, v, mask_bias)
    s = q @ k.swapaxes(-1, -2)
    rows = s.size // Tk
    kernels.kernel("softmax_warp_rows", WARP_SOFTMAX, q.dtype)(
        *kernels.warp_rows(rows), (s, bias, has_bias, Tk, np.int64(A * T), np.int64(rows), scale))
    return s @ v


def attention_fused(q, k, v, mask_bias=None):
    """v2: minibert's attention: cuBLAS products around a fused softmax kernel, a warp per row."""
    return cuda_ops.attention_forward(q, k, v, mask_bias)[0]


def attention_online(q, k, v, mask_bias=None):
    """v3: one pass over the keys with a running maximum; no scores in memory."""
    import cupy
    if q.shape[-1] > MAX_HEAD_SIZE:
        raise ValueError(f"attention_online keeps a head's output in registers: head size at most "
                         f"{MAX_HEAD_SIZE}, got {q.shape[-1]}")
    q, k, v, bias, has_bias, sizes = _prepare(q, k, v, mask_bias)
    rows, grid = _rows(q)
    out = cupy.empty_like(q)
    source = ONLINE.replace("MAX_HEAD_SIZE", str(MAX_HEAD_SIZE))
    kernels.kernel("attention_online", source, q.dtype)(grid, (THREADS,), (q, k, v, bias, has_bias, out, rows,
                                                                           *sizes))
    return out


def attention_tiled(q, k, v, mask_bias=None):
    """v4: v3 with the keys and values of each tile shared by a block of queries."""
    import cupy
    if q.shape[-1] > TILED_MAX_HEAD_SIZE:
        raise ValueError(f"attention_tiled keeps a tile of keys and values in shared memory: head size at "
                         f"most {TILED_MAX_HEAD_SIZE}, got {q.shape[-1]}")
    q, k, v, bias, has_bias, sizes = _prepare(q, k, v, mask_bias)
    B, A, T, _ = q.shape
    tiles = (T + TILE - 1) // TILE
    out = cupy.empty_like(q)
    source = TILED.replace("TILED_MAX_HEAD_SIZE", str(TILED_MAX_HEAD_SIZE)).replace("TILE_SIZE", str(TILE))
    kernels.kernel("attention_tiled", source, q.dtype)((B * A * tiles,), (TILE,),
                                                       (q, k, v, bias, has_bias, out, np.int32(tiles), *sizes))
    return out


# the rungs that take any float dtype and run a forward pass alone (bench_attention.py times them); the
# top rung, v5, is float16 and trains, forward and backward: flash.py, timed by bench_attention.py --training
LADDER = {"v1 naive": attention_naive, "v2a products + block-per-row softmax": attention_block_rows,
          "v2b products + warp-per-row softmax in registers": attention_warp_rows,
          "v2 products + fused softmax": attention_fused,
          "v3 online softmax": attention_online, "v4 tiled online softmax": attention_tiled}
