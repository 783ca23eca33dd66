"""The linear layer on the GPU, and the column sums that make its bias gradient (and LayerNorm's).

float32 (and float64): the reference's products, the bias gradient by ``column_sums``.  Mixed
precision (a float16 W): the products by cuBLAS on float16 operands (``gemm.half_matmul``); the
bias gradient summed down the columns of dy in float32 by ``column_sums``, which also rounds a
float32 dy to the float16 operand of the two products in the same pass, and reads a float16 dy
(attention's gradients, which come so) as it is.
"""
from __future__ import annotations

import numpy as np

from ...ops.common import get_array_module
from ...ops.linear import check_linear, to_half
from ..half import half_linear_backward, half_linear_forward
from . import kernels, source
from .gemm import half_matmul, matmul   # the products by cuBLAS (float16: float32 sums)
from .kernels import applies

# Column sums of (rows, H) arrays, for the parameters every row shares (LayerNorm's gamma and
# beta, a linear layer's bias):
#   prod[j] = sum_r a[r, j] * b[r, j]  (when has_b);   plain[j] = sum_r a[r, j]
# (a float16 a, a_half, is read from ah as its bits and summed in float).
# The sum runs along the slow axis.  A block of 256 threads is 32 columns by 8 row lanes, so that
# each warp reads 32 neighbouring values of one row (one 128-byte line); the G blocks stacked
# along the rows each write one partial sum per column into part (G, 2, H).  Each group of 32
# columns has a ticket: the last of its G blocks to finish (each takes a number once its partials
# are written) adds the group's partials in a fixed order, writes them to out (2, H) and puts the
# ticket back to 0 for the next launch.  One launch, and no atomics on the sums: the same input
# gives the same bits.
COLSUM = r"""
extern "C" __global__ void colsum(const T* a, const unsigned short* ah, const int a_half, const T* b, const int has_b,
                                  unsigned short* a16, const int has_a16,
                                  T* part, unsigned int* ticket, T* out, const long long rows, const int H,
                                  const int col_blocks) {
    __shared__ T sp[256];
    __shared__ T sq[256];
    __shared__ bool last;
    const int lane = threadIdx.x & 31, lane_row = threadIdx.x >> 5;
    const int G = gridDim.x / col_blocks, g = blockIdx.x / col_blocks, cb = blockIdx.x % col_blocks;
    const int j = cb * 32 + lane;
    T p = 0, q = 0;
    if (j < H)
        for (long long r = (long long)g * 8 + lane_row; r < rows; r += (long long)G * 8) {
            const T x = a_half ? T(half_to_float(ah[r * H + j])) : a[r * H + j];
            q += x;
            if (has_b) p += x * b[r * H + j];
            if (has_a16) a16[r * H + j] = float_to_half((float)x);     // each element read once: its copy
        }
    sp[threadIdx.x] = p;
    sq[threadIdx.x] = q;
    __syncthreads();
    if (lane_row == 0 && j < H) {
        for (int k = 1; k < 8; ++k) { p += sp[k * 32 + lane]; q += sq[k * 32 + lane]; }
        part[(long long)g * 2 * H + j] = p;
        part[(long long)g * 2 * H + H + j] = q;
        __threadfence();                  // the partials reach global memory before the ticket is taken
    }
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(ticket + cb, 1u) == (unsigned int)(G - 1);
    __syncthreads();
    if (!last) return;
    // every block of this group has written its partials: read them from L2, past this SM's own cache
    const int c = cb * 32 + (threadIdx.x & 31), which = threadIdx.x >> 5;    // which 0: prod, 1: plain
    if (which < 2 && c < H) {
        T s = 0;
        for (int k = 0; k < G; ++k) s += __ldcg(part + (long long)k * 2 * H + which * H + c);
        out[which * H + c] = s;
    }
    if (threadIdx.x == 0) ticket[cb] = 0u;
}
"""


def linear_forward(x, W, b):
    """``ops.linear_forward`` with the GPU's products (``gemm.matmul``), float16 in mixed precision."""
    if W.dtype == np.float16:
        return half_linear_forward(x, W, b, half_matmul)
    check_linear(x, W, b)
    y = matmul(x.reshape(-1, x.shape[-1]), W.T)
    if b is not None:
        y += b
    return y.reshape(x.shape[:-1] + (W.shape[0],)), (x, W)


def linear_backward(dy, cache, half_dx=False):
    """``ops.linear_backward``, the bias gradient by ``column_sums`` and, in mixed precision,
    the products by the GPU's own float16 product, their operand dy rounded to float16 by the
    same pass that sums it, and dW left in float16: ``add_grads`` widens it as it adds it to the
    float32 gradient (one pass over it, not two)."""
    x, W = cache
    if W.dtype == np.float16:
        return half_linear_backward(dy, cache, half_matmul, sum_and_half=_sum_and_half, widen_dW=False,
                                    half_dx=half_dx)
    dy2 = dy.reshape(-1, dy.shape[-1])
    dx = matmul(dy2, W).reshape(x.shape)
    dW = matmul(dy2.T, x.reshape(-1, x.shape[-1]))
    return dx, dW, column_sums(dy2)[1]


def _sum_and_half(dy2):
    """dy2 (N, out) -> (its column sums in float32, dy2 in float16), in one pass where ``column_sums``
    can; a float16 dy2 is its own operand."""
    if dy2.dtype == np.float16:
        return column_sums(dy2)[1], dy2
    xp = get_array_module(dy2)
    dy16 = xp.empty_like(dy2, dtype=np.float16)       # (of dy2's kind: the CPU stand-in needs that)
    return column_sums(dy2, a16=dy16)[1], dy16


def column_sums(a, b=None, a16=None):
    """Sums over the rows of a (rows, H) array: (sum of a * b or None, sum of a), each (H,).

    CuPy's own reduction along the rows of a C-ordered array runs one column per group of
    threads, reading with a stride of H; this kernel reads along the rows instead, and its last
    block adds the partial sums (one launch).  ``a16``: None, or a float16 array of a's shape
    that the same pass fills with a rounded to float16 (``ops.linear.to_half``'s numbers) for a
    float32 a: mixed precision's operand of a linear layer's backward products.  A float16 a
    (without b or a16) is summed in float32."""
    import cupy
    both, half, a_half = b is not None, a16 is not None, a.dtype == np.float16
    if a_half:
        ok = kernels.on_device(a) and a.flags.c_contiguous and not (both or half)
    else:
        ok = (applies(a, b) if both else applies(a)) and (not half or (
            a.dtype == np.float32 and a16.dtype == np.float16 and a16.shape == a.shape and a16.flags.c_contiguous))
    if not ok or a.ndim != 2 or not a.size or a.shape[1] > 32 * source.COLSUM_MAX_GROUPS:
        if half:
            a16[...] = to_half(a)
        a = a.astype(np.float32) if a_half else a
        return ((a * b).sum(axis=0) if both else None), a.sum(axis=0)
    rows, H = a.shape
    dtype = np.dtype(np.float32) if a_half else a.dtype
    col_blocks = (H + 31) // 32
    G = int(max(1, min((rows + 7) // 8, 1024 // col_blocks)))     # about 1024 blocks in all
    part = cupy.empty((G, 2, H), dtype=dtype)
    out = cupy.empty(2 * H, dtype=dtype)
    kernels.kernel("colsum", COLSUM, dtype)(
        (G * col_blocks,), (256,),
        (*kernels.float_or_half(a, dtype), b if both else kernels.dummy(dtype), np.int32(both),
         a16 if half else kernels.dummy(np.float16),
         np.int32(half), part, kernels.tickets(), out, np.int64(rows), np.int32(H), np.int32(col_blocks)))
    return (out[:H] if both else None), out[H:]
