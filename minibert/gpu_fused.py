"""Fused GPU kernels for CuPy: the same math as ``layers.py``, one pass over memory instead of many.

On the GPU, the reference code in ``layers.py`` runs one CUDA kernel per NumPy
expression: the exact GELU forward is five kernels, each reading and writing
the whole activation, and the attention softmax with its mask and dropout is
about ten passes over a (B, A, T, T) tensor (400 MB per layer for BERT-base at
T = 512).  Matrix products aside, a GPU step is limited by memory traffic and
by the number of kernel launches, so this module writes each of these
formulas as one kernel:

====================  ==============================================================
``layernorm_*``       one thread block per row: mean, variance and the normalised
                      row in the forward; the two row means of the backward
``gelu_*``            exact (erf) and tanh GELU, forward and backward, one
                      elementwise kernel each
``dropout_forward``   mask and product in one kernel (the uniform draws come from
                      the model's seeded generator, as in the reference, so the
                      same seed drops the same entries on both paths)
``attention_*``       scale, mask bias, softmax and dropout in one kernel per
                      score row; the backward's dropout and softmax Jacobian in
                      one more
``adamw_step``        the whole AdamW update of the flat parameter buffer
====================  ==============================================================

The reference stays the definition: each kernel repeats its formula with
the same operations (the reductions sum in a different order), and
``tests/test_gpu.py`` checks every kernel against the reference within
stated tolerances, in float32 and float64.  Where there is no GPU,
``tests/test_gpu_kernels_on_cpu.py`` runs the same CUDA source compiled for
the CPU (``tests/cuda_on_cpu.py``) against the reference.  Switches: these paths run for
CuPy arrays of float32 or float64 when ``minibert.fast`` is enabled; set
``MINIBERT_FAST=0`` (or ``minibert.fast.set_enabled(False)``) to run the
reference code on the GPU too.

The kernels are compiled by CuPy on first use (NVRTC) and cached on disk by
CuPy, once per dtype.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from . import fast

_CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


def on_device(a) -> bool:
    """Whether ``a`` is a CuPy array.  (``tests/cuda_on_cpu.py`` swaps this for a NumPy
    test, to run these kernels, compiled for the CPU, where no GPU is present.)"""
    return type(a).__module__.split(".")[0] == "cupy"


def applies(*arrays) -> bool:
    """True for CuPy arrays, all float32 or all float64, C-contiguous, with fast paths enabled."""
    if not fast.enabled() or not arrays:
        return False
    dtype = getattr(arrays[0], "dtype", None)
    for a in arrays:
        if not on_device(a):
            return False
        if a.dtype != dtype or a.dtype not in _CTYPES or not a.flags.c_contiguous:
            return False
    return True


# ---------------------------------------------------------------------- CUDA source
# A block-wide sum and max: each warp reduces with shuffles, warp 0 reduces the
# per-warp results.  The leading __syncthreads() lets a kernel call these twice
# in a row with the same shared buffer.
_REDUCE = r"""
typedef CTYPE T;
__device__ __forceinline__ float neg_inf(float) { return __int_as_float(0xff800000); }
__device__ __forceinline__ double neg_inf(double) { return __longlong_as_double(0xfff0000000000000ULL); }
__device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ T warp_max(T v) {
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ T block_sum(T v, T* sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? sh[lane] : T(0);
        v = warp_sum(v);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}
__device__ T block_max(T v, T* sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? sh[lane] : sh[0];
        v = warp_max(v);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}
"""

# LayerNorm forward, one block per row of H:
#   mean = sum(x) / H;  var = sum((x - mean)^2) / H;  rstd = 1 / sqrt(var + eps)
#   xhat = (x - mean) * rstd;  y = xhat * gamma + beta
_LAYERNORM_FWD = r"""
extern "C" __global__ void layernorm_fwd(const T* x, const T* gamma, const T* beta, T* y, T* xhat,
                                         T* rstd, const int H, const T eps) {
    __shared__ T sh[32];
    const long long row = blockIdx.x;
    const T* xr = x + row * H;
    T s = 0;
    for (int j = threadIdx.x; j < H; j += blockDim.x) s += xr[j];
    const T mean = block_sum(s, sh) / T(H);
    T ss = 0;
    for (int j = threadIdx.x; j < H; j += blockDim.x) { T d = xr[j] - mean; ss += d * d; }
    const T var = block_sum(ss, sh) / T(H);
    const T r = T(1) / sqrt(var + eps);
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
        T xh = (xr[j] - mean) * r;
        xhat[row * H + j] = xh;
        y[row * H + j] = xh * gamma[j] + beta[j];
    }
    if (threadIdx.x == 0) rstd[row] = r;
}
"""

# LayerNorm backward (input gradient), one block per row, with g = dy * gamma:
#   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
_LAYERNORM_BWD = r"""
extern "C" __global__ void layernorm_bwd(const T* dy, const T* xhat, const T* rstd, const T* gamma,
                                         T* dx, const int H) {
    __shared__ T sh[32];
    const long long row = blockIdx.x;
    const T* d = dy + row * H;
    const T* xh = xhat + row * H;
    T a = 0, b = 0;
    for (int j = threadIdx.x; j < H; j += blockDim.x) { T g = d[j] * gamma[j]; a += g; b += g * xh[j]; }
    const T mean_g = block_sum(a, sh) / T(H);
    const T mean_gx = block_sum(b, sh) / T(H);
    const T r = rstd[row];
    for (int j = threadIdx.x; j < H; j += blockDim.x)
        dx[row * H + j] = r * (d[j] * gamma[j] - mean_g - xh[j] * mean_gx);
}
"""

# Attention probabilities, one block per score row (Tk keys):
#   z = s * scale + bias[b];  p = exp(z - max z) / sum exp(z - max z)
#   dropout: keep = u >= p_drop;  p_d = keep ? p / (1 - p_drop) : 0
# bias is (B, Tk), the additive padding mask (used when has_bias); u the uniform draws
# (used when has_drop).
_ATTENTION_FWD = r"""
extern "C" __global__ void attention_fwd(const T* s, const T* bias, const int has_bias, const T* u,
                                         const int has_drop, T* probs, T* probs_d, unsigned char* keep,
                                         const int Tk, const long long rows_per_batch,
                                         const T scale, const T p_drop, const T inv_keep) {
    __shared__ T sh[32];
    const long long row = blockIdx.x;
    const T* sr = s + row * Tk;
    const T* br = has_bias ? bias + (row / rows_per_batch) * Tk : 0;
    T m = neg_inf(T(0));
    for (int j = threadIdx.x; j < Tk; j += blockDim.x) {
        T z = sr[j] * scale;
        if (br) z += br[j];
        m = fmax(m, z);
    }
    m = block_max(m, sh);
    T total = 0;
    for (int j = threadIdx.x; j < Tk; j += blockDim.x) {
        T z = sr[j] * scale;
        if (br) z += br[j];
        total += exp(z - m);
    }
    total = block_sum(total, sh);
    for (int j = threadIdx.x; j < Tk; j += blockDim.x) {
        T z = sr[j] * scale;
        if (br) z += br[j];
        T p = exp(z - m) / total;
        long long k = row * Tk + j;
        probs[k] = p;
        if (has_drop) {
            bool kp = u[k] >= p_drop;
            keep[k] = kp;
            probs_d[k] = kp ? p * inv_keep : T(0);
        }
    }
}
"""

# Attention backward through dropout and softmax, one block per row, in place on dp:
#   dq_j = keep_j ? dp_j / (1 - p_drop) : 0      (dropout)
#   ds_j = p_j (dq_j - sum_k dq_k p_k) * scale   (softmax Jacobian, then the 1/sqrt(D) scale)
_ATTENTION_BWD = r"""
extern "C" __global__ void attention_bwd(T* dp, const T* probs, const unsigned char* keep,
                                         const int has_drop, const int Tk, const T scale, const T inv_keep) {
    __shared__ T sh[32];
    const long long row = blockIdx.x;
    T* d = dp + row * Tk;
    const T* p = probs + row * Tk;
    const unsigned char* kr = has_drop ? keep + row * Tk : 0;
    T dot = 0;
    for (int j = threadIdx.x; j < Tk; j += blockDim.x) {
        T g = kr ? (kr[j] ? d[j] * inv_keep : T(0)) : d[j];
        dot += g * p[j];
    }
    dot = block_sum(dot, sh);
    for (int j = threadIdx.x; j < Tk; j += blockDim.x) {
        T g = kr ? (kr[j] ? d[j] * inv_keep : T(0)) : d[j];
        d[j] = p[j] * (g - dot) * scale;
    }
}
"""


@lru_cache(maxsize=None)
def _raw(name, source, ctype):
    import cupy
    return cupy.RawKernel(_REDUCE.replace("CTYPE", ctype) + source, name, options=("--std=c++14",))


def _kernel(name, source, dtype):
    return _raw(name, source, _CTYPES[np.dtype(dtype)])


@lru_cache(maxsize=None)
def _dummy(dtype):
    import cupy
    return cupy.zeros(1, dtype=dtype)


def _threads(n):
    """Threads per block for rows of n: a multiple of 32, at most 256."""
    return int(min(256, max(32, 32 * math.ceil(n / 32))))


@lru_cache(maxsize=None)
def _elementwise():
    """The elementwise kernels (CuPy compiles each for the dtypes it is called with)."""
    import cupy
    ek = cupy.ElementwiseKernel
    return dict(
        # exact GELU: cdf = (1 + erf(x / sqrt 2)) / 2;  y = x * cdf
        gelu_fwd=ek("T x", "T y, T cdf",
                    "cdf = T(0.5) * (T(1) + erf(x * T(0.70710678118654752440))); y = x * cdf;",
                    "minibert_gelu_fwd"),
        # d/dx = cdf + x * phi(x),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
        gelu_bwd=ek("T dy, T x, T cdf", "T dx",
                    "dx = dy * (cdf + x * (T(0.39894228040143267794) * exp(T(-0.5) * x * x)));",
                    "minibert_gelu_bwd"),
        # tanh GELU: t = tanh(sqrt(2/pi) (x + c x^3));  y = x (1 + t) / 2
        gelu_tanh_fwd=ek("T x", "T y, T t",
                         "t = tanh(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x));"
                         "y = T(0.5) * x * (T(1) + t);", "minibert_gelu_tanh_fwd"),
        gelu_tanh_bwd=ek("T dy, T x, T t", "T dx",
                         "T dudx = T(0.79788456080286535588) * (T(1) + T(3) * T(0.044715) * x * x);"
                         "dx = dy * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dudx);",
                         "minibert_gelu_tanh_bwd"),
        # inverted dropout: mask = (u >= p) / (1 - p);  y = x * mask
        dropout_fwd=ek("T x, T u, T p, T scale", "T y, T mask",
                       "mask = u >= p ? scale : T(0); y = x * mask;", "minibert_dropout_fwd"),
        # AdamW, the same steps as optim.AdamW.step, element by element
        adamw=ek("T g, T b1, T c1, T b2, T c2, T step_size, T root_c2, T eps, T decay, int64 n_decay",
                 "T p, T m, T v",
                 "m = m * b1 + g * c1;"
                 "v = v * b2 + (g * g) * c2;"
                 "T q = i < n_decay ? p * decay : p;"
                 "p = q - (m / (sqrt(v) / root_c2 + eps)) * step_size;",
                 "minibert_adamw"),
        # dgamma and dbeta of LayerNorm: column sums over the rows
        colsum_prod=cupy.ReductionKernel("T dy, T xh", "T out", "dy * xh", "a + b", "out = a", "0",
                                         "minibert_colsum_prod"),
    )


# ------------------------------------------------------------------------ layernorm
def layernorm_forward(x, gamma, beta, eps):
    import cupy
    H = x.shape[-1]
    rows = x.size // H
    y, xhat = cupy.empty_like(x), cupy.empty_like(x)
    rstd = cupy.empty(x.shape[:-1] + (1,), dtype=x.dtype)
    if rows:                              # a grid of no blocks is a CUDA launch error
        _kernel("layernorm_fwd", _LAYERNORM_FWD, x.dtype)(
            (rows,), (_threads(H),), (x, gamma, beta, y, xhat, rstd, np.int32(H), x.dtype.type(eps)))
    return y, (xhat, rstd, gamma)


def layernorm_backward(dy, cache):
    import cupy
    xhat, rstd, gamma = cache
    H = dy.shape[-1]
    rows = dy.size // H
    dx = cupy.empty_like(dy)
    if rows:                              # none, e.g. a batch without a labelled MLM position
        _kernel("layernorm_bwd", _LAYERNORM_BWD, dy.dtype)(
            (rows,), (_threads(H),), (dy, xhat, rstd, gamma, dx, np.int32(H)))
    dy2, xh2 = dy.reshape(rows, H), xhat.reshape(rows, H)
    dgamma = _elementwise()["colsum_prod"](dy2, xh2, axis=0)
    dbeta = dy2.sum(axis=0)
    return dx, dgamma, dbeta


# ----------------------------------------------------------------------------- gelu
def gelu_forward(x, approximate):
    k = _elementwise()
    if approximate == "none":
        y, cdf = k["gelu_fwd"](x)
        return y, (x, cdf, None)
    y, t = k["gelu_tanh_fwd"](x)
    return y, (x, None, t)


def gelu_backward(dy, cache):
    x, cdf, t = cache
    k = _elementwise()
    return k["gelu_bwd"](dy, x, cdf) if t is None else k["gelu_tanh_bwd"](dy, x, t)


# -------------------------------------------------------------------------- dropout
def dropout_forward(x, u, p):
    t = x.dtype.type
    return _elementwise()["dropout_fwd"](x, u, t(p), t(1.0 / (1.0 - p)))


# ------------------------------------------------------------------------ attention
def attention_probs(scores, scale, mask_bias, dropout_p, rng, train):
    """scores: (B, A, T, Tk) raw q k^T; mask_bias: (B, 1, 1, Tk) or None.

    Returns probs (the softmax, kept for the backward), probs_d (after
    dropout; the same array without dropout) and the dropout cache (the
    uint8 keep mask, or None).
    """
    import cupy
    B, A, T, Tk = scores.shape
    probs = scores                        # written in place: each thread rewrites only what it read
    drop = train and dropout_p > 0.0
    t = scores.dtype.type
    dummy = _dummy(scores.dtype)          # stands in for the arrays a call does not use
    if drop:
        u = rng(scores.shape)
        probs_d = cupy.empty_like(scores)
        keep = cupy.empty(scores.shape, dtype=cupy.uint8)
    else:
        u, probs_d, keep = dummy, dummy, _dummy(np.uint8)
    bias = dummy
    if mask_bias is not None:
        bias = cupy.ascontiguousarray(mask_bias.reshape(B, Tk), dtype=scores.dtype)
    inv_keep = 1.0 / (1.0 - dropout_p) if drop else 1.0
    _kernel("attention_fwd", _ATTENTION_FWD, scores.dtype)(
        (B * A * T,), (_threads(Tk),),
        (scores, bias, np.int32(mask_bias is not None), u, np.int32(drop), probs, probs_d, keep,
         np.int32(Tk), np.int64(A * T), t(scale), t(dropout_p), t(inv_keep)))
    if not drop:
        return probs, probs, None
    return probs, probs_d, (keep, inv_keep)


def attention_dscores(dprobs_d, probs, do_cache, scale, dead):
    """Gradient of the raw scores from that of the dropped probabilities (in place)."""
    keep, inv_keep = do_cache if do_cache is not None else (_dummy(np.uint8), 1.0)
    Tk = probs.shape[-1]
    t = probs.dtype.type
    _kernel("attention_bwd", _ATTENTION_BWD, probs.dtype)(
        (probs.size // Tk,), (_threads(Tk),),
        (dprobs_d, probs, keep, np.int32(do_cache is not None), np.int32(Tk), t(scale), t(inv_keep)))
    if dead is not None:
        dprobs_d[dead] = 0
    return dprobs_d


# ---------------------------------------------------------------------------- AdamW
def adamw_step(p, g, m, v, b1, b2, step_size, root_c2, eps, decay, n_decay):
    t = p.dtype.type
    _elementwise()["adamw"](g, t(b1), t(1.0 - b1), t(b2), t(1.0 - b2), t(step_size), t(root_c2), t(eps),
                            t(decay), np.int64(n_decay), p, m, v)
