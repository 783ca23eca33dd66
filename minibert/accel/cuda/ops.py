"""The ops of ``minibert.ops`` as fused CUDA kernels for CuPy arrays: one pass over memory instead of many.

On the GPU, the reference code runs one CUDA kernel per array expression:
the exact GELU forward is five kernels, each reading and writing the whole
activation, and the attention softmax with its mask and dropout is about
ten passes over a (B, A, T, T) tensor (400 MB per layer for BERT-base at
T = 512).  Matrix products aside, a GPU step is limited by memory traffic
and by the number of kernel launches, so each formula here is one kernel:

====================  ==============================================================
``layernorm_*``       in ``layernorm.py``: one warp per row, mean, variance and the
                      normalised row in the forward, the two row means of the
                      backward; with dropout and the residual sum before it
                      (``dropout_add_layernorm_*``), in the same kernels
``linear_*``,         in ``linear.py``: the products by cuBLAS; the gradients of
``column_sums``       gamma, beta and a linear layer's bias as sums down the
                      columns, each warp reading along a row; in mixed precision
                      the same pass rounds a linear layer's dy to the float16
                      operand of its two products, or reads a float16 dy as it is
``gelu_*``, ``tanh_*``  in ``activations.py``: exact (erf) and tanh GELU, and tanh,
                      forward and backward, one kernel each; the forward adds the
                      linear layer's bias first, and in mixed precision reads the
                      float16 product and (GELU) writes the next product's operand
``dropout_forward``   mask and product in one kernel.  A GPU model's generator is
                      counter-based (``accel/counter_rng.py``): the kernel
                      computes each element's uniform from the step's key and
                      the element's index, so no array of draws is made; given
                      any other generator it reads the draws.  Either way the
                      numbers are those the reference would use, so the same
                      seed drops the same entries on both paths
``split_qkv``,        q, k, v from their one product: the bias added and the copy
``merge_qkv``         into heads (rounded to float16 in mixed precision) in one
                      kernel; their gradients put back in one
``attention_*``       the mask bias in one elementwise kernel; scale, mask bias,
                      softmax and dropout (its uniforms computed in place from the
                      key, as above) in one kernel, a warp per score row; the
                      backward's dropout and softmax Jacobian in one more; in
                      mixed precision the four products on float16 operands
                      (tensor cores, by ``gemm.py``'s direct cuBLAS call), and the
                      kernels read the float16 product before them and write the
                      float16 operand after them, computing in float32; with
                      ``flash.ENABLED``, mixed precision's attention fused into
                      one kernel forward and two backward (``flash.py``)
``adamw_update``      the whole AdamW update of the flat parameter buffer
``unscale``, ``clip_by_norm``  the gradients scaled by a factor each thread makes from a
                      number on the device (mixed precision's loss scale, the norm)
``softmax_cross_*``   in ``loss.py``: forward and mean in one launch, backward in one
====================  ==============================================================

Each kernel repeats its formula with the same operations (the reductions
sum in a different order).  Arrays the kernels do not take (not
C-contiguous, or of another dtype than float32 and float64) go to the
reference op, whose cache the kernels' backward also reads, except in
attention: its inputs are made contiguous, and its cache is its own (the
dropout mask as one byte per entry).
``tests/test_accel.py`` checks every one against the reference, on a GPU
or, without one, compiled for the CPU by ``tests/cuda_on_cpu.py``.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ... import ops as ref
from ...ops.attention import check_attention, operand
from ...ops.common import get_array_module
from . import flash, kernels, source
from .gemm import half_matmul, matmul   # the products by cuBLAS (float16: float32 sums)
from .kernels import applies, warp_rows


# -------------------------------------------------------------------------- dropout
def dropout_forward(x, p, rng, train):
    if not train or p == 0.0 or not applies(x):
        return ref.dropout_forward(x, p, rng, train)
    t = x.dtype.type
    u, key, how = kernels.dropout_draws(rng, x.shape, x.dtype)
    if how == 2:                      # a counter-based generator: the kernel makes its own numbers
        return kernels.elementwise()["dropout_fwd_keyed"](x, *key, t(p), t(1.0 / (1.0 - p)))
    return kernels.elementwise()["dropout_fwd"](x, u, t(p), t(1.0 / (1.0 - p)))


# ------------------------------------------------------------------------ attention
class AttentionCache(NamedTuple):
    """The CUDA kernels' own attention cache: ``ops.AttentionCache`` with the dropout mask as bytes."""
    q: object            # (B, A, T, D)
    k: object
    v: object
    probs: object        # (B, A, T, T) softmax of the scores
    probs_d: object      # probs after dropout (probs itself without dropout; float16 in mixed precision)
    keep: object         # None, or (B, A, T, T) uint8: 1 where dropout kept a probability (a quarter
                         # of the memory of the reference's multipliers)
    inv_keep: float      # 1 / (1 - p), what a kept probability was multiplied by
    scale: float         # 1 / sqrt(D)
    dead: object         # (B,) bool: sequences whose every key is masked, or None


# q, k, v from the one product, its bias added, each head's (T, D) block made contiguous:
#   out[w, b, a, t, d] = qkv[b, t, w, a, d] + bias[w, a, d]     (w: 0 q, 1 k, 2 v)
# read from xh as float16 bits where x_half (mixed precision's product), written rounded to float16
# into outh where out_half; one thread an output element
SPLIT_QKV = r"""
extern "C" __global__ void split_qkv(const T* x, const unsigned short* xh, const int x_half, const T* bias,
                                     T* out, unsigned short* outh, const int out_half, const long long n,
                                     const int B, const int Tn, const int A, const int D) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        long long r = i;
        const int d = (int)(r % D); r /= D;
        const int t = (int)(r % Tn); r /= Tn;
        const int a = (int)(r % A); r /= A;
        const int b = (int)(r % B), w = (int)(r / B);
        const long long src = (((long long)b * Tn + t) * 3 + w) * ((long long)A * D) + (long long)a * D + d;
        const T v = (x_half ? T(half_to_float(xh[src])) : x[src]) + bias[((long long)w * A + a) * D + d];
        if (out_half) outh[i] = float_to_half((float)v); else out[i] = v;
    }
}
"""


def split_qkv(qkv, bias, num_heads, half_out=False):
    """``ops.split_qkv`` in one kernel: the bias add, the copy into heads and, in mixed precision,
    the rounding to float16, where the reference's expressions are two or three launches."""
    x_half = qkv.dtype == np.float16
    dtype = np.dtype(np.float32) if x_half else qkv.dtype
    if not (kernels.on_device(qkv) and qkv.flags.c_contiguous and qkv.ndim == 3 and qkv.size and applies(bias)
            and bias.dtype == dtype and bias.shape == qkv.shape[2:] and qkv.shape[2] % (3 * num_heads) == 0):
        return ref.split_qkv(qkv, bias, num_heads, half_out)
    import cupy
    B, T, H3 = qkv.shape
    D = H3 // (3 * num_heads)
    out = cupy.empty((3, B, num_heads, T, D), np.float16 if half_out else dtype)
    kernels.kernel("split_qkv", SPLIT_QKV, dtype)(
        *kernels.grid_stride(out.size),
        (*kernels.float_or_half(qkv, dtype), bias, *kernels.float_or_half(out, dtype), np.int64(out.size),
         np.int32(B), np.int32(T), np.int32(num_heads), np.int32(D)))
    return out[0], out[1], out[2]


# its backward: dqkv[b, t, w, a, d] = g_w[b, a, t, d], one thread an output element, ELEM_T the
# gradients' type (float16 as its bits in mixed precision); three copies' work in one launch
MERGE_QKV = r"""
extern "C" __global__ void merge_qkv(const ELEM_T* g0, const ELEM_T* g1, const ELEM_T* g2, ELEM_T* out,
                                     const long long n, const int Tn, const int A, const int D) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        long long r = i;
        const int d = (int)(r % D); r /= D;
        const int a = (int)(r % A); r /= A;
        const int w = (int)(r % 3); r /= 3;
        const int t = (int)(r % Tn);
        const long long b = r / Tn;
        const long long src = ((b * A + a) * Tn + t) * D + d;
        out[i] = (w == 0 ? g0 : (w == 1 ? g1 : g2))[src];
    }
}
"""


def merge_qkv(dq, dk, dv):
    """``ops.merge_qkv`` in one kernel (CuPy's stack of three arrays is a copy each)."""
    if not (all(kernels.on_device(g) and g.flags.c_contiguous for g in (dq, dk, dv)) and dq.size and dq.ndim == 4
            and dq.shape == dk.shape == dv.shape and dq.dtype == dk.dtype == dv.dtype
            and dq.dtype in (np.float16, np.float32, np.float64)):
        return ref.merge_qkv(dq, dk, dv)
    import cupy
    B, A, T, D = dq.shape
    out = cupy.empty((B, T, 3 * A * D), dq.dtype)
    elem = {2: "unsigned short", 4: "float", 8: "double"}[dq.dtype.itemsize]
    kernels.kernel("merge_qkv", MERGE_QKV.replace("ELEM_T", elem), np.float32)(
        *kernels.grid_stride(out.size),
        (dq, dk, dv, out, np.int64(out.size), np.int32(T), np.int32(A), np.int32(D)))
    return out


def attention_mask_bias(attention_mask, dtype):
    """``ops.attention_mask_bias`` in one elementwise kernel, (1 - mask) * the most negative float, where
    the reference's expression is three launches."""
    dtype = np.dtype(dtype)
    if not (kernels.on_device(attention_mask) and dtype in kernels.CTYPES):
        return ref.attention_mask_bias(attention_mask, dtype)
    bias = kernels.elementwise()["mask_bias"](attention_mask, dtype.type(np.finfo(dtype).min),
                                               get_array_module(attention_mask).empty(attention_mask.shape, dtype))
    return bias[:, None, None, :]


def raw_product(a, b):
    """``ops.attention.product(a, b, widen=False)`` with the GPU's own float16 product (tensor cores):
    in mixed precision the float16 product, not widened (a kernel reads float16 and computes in
    float32, as the reference's widening followed by its kernel would)."""
    return matmul(a, b)


def attention_forward(q, k, v, mask_bias, dropout_p=0.0, rng=None, train=False):
    """``ops.attention_forward``: the products by cuBLAS (float16 operands in mixed precision),
    scale, mask, softmax and dropout in one float32 kernel per score row, which in mixed precision
    reads the float16 scores and writes the float16 operand of the second product itself."""
    check_attention(q, k, v)
    if flash.applies(q, k, v, mask_bias, dropout_p, rng, train):      # fused, when enabled (flash.py)
        return flash.forward(q, k, v, mask_bias, dropout_p, rng, train)
    xp = get_array_module(q)
    q, k, v = (xp.ascontiguousarray(a) for a in (q, k, v))
    scale = 1.0 / math.sqrt(q.shape[-1])
    probs, probs_d, keep, inv_keep, dead = attention_probs(raw_product(q, k.swapaxes(-1, -2)), scale, mask_bias,
                                                           dropout_p, rng, train)
    out = raw_product(probs_d, v)             # float16 in mixed precision, as the reference's
    return out, AttentionCache(q, k, v, probs, probs_d, keep, inv_keep, scale, dead)


def attention_backward(dout, cache):
    """``ops.attention_backward``: dropout and softmax backward in one kernel per score row."""
    if isinstance(cache, flash.FlashCache):
        return flash.backward(dout, cache)
    q, k, v = cache.q, cache.k, cache.v
    # one copy of a transposed dout (float32: split_heads' view), where each product would make its own
    dout = get_array_module(q).ascontiguousarray(operand(dout, q))
    dv = raw_product(cache.probs_d.swapaxes(-1, -2), dout)
    dscores = attention_dscores(raw_product(dout, v.swapaxes(-1, -2)), cache.probs, cache.keep,
                                cache.inv_keep, cache.scale, cache.dead)     # float16 in mixed precision
    return raw_product(dscores, k), raw_product(dscores.swapaxes(-1, -2), q), dv


def attention_probs(scores, scale, mask_bias, dropout_p, rng, train):
    """scores: (B, A, T, Tk) raw q k^T (float16 in mixed precision); mask_bias: (B, 1, 1, Tk) or None.

    Returns probs (the softmax, kept for the backward), probs_d (after
    dropout; the same array without dropout; in mixed precision rounded to
    float16, the operand of the next product), the uint8 keep mask (or None),
    1 / (1 - p), and (B,) bool on the device, True for a sequence whose every key
    is masked (None without a mask: the reference asks the host whether any
    sequence is; the kernel writes the answer where a step need not wait for it).
    """
    import cupy
    B, A, T, Tk = scores.shape
    half = scores.dtype == np.float16
    dtype = np.dtype(np.float32) if half else scores.dtype
    # written in place where it can: each thread rewrites only what it read
    probs = cupy.empty(scores.shape, dtype) if half else scores
    drop = train and dropout_p > 0.0
    t = dtype.type
    dummy = kernels.dummy(dtype)          # stands in for the arrays a call does not use
    if drop:                              # how: 1 read the uniforms u, 2 compute them from key
        u, key, how = kernels.dropout_draws(rng, scores.shape, dtype)
        keep = cupy.empty(scores.shape, dtype=cupy.uint8)
    else:
        u, key, how, keep = dummy, kernels.no_key(), 0, kernels.dummy(np.uint8)
    probs_d = cupy.empty(scores.shape, scores.dtype) if drop or half else dummy
    bias, dead = dummy, kernels.dummy(np.bool_)
    if mask_bias is not None:
        bias = cupy.ascontiguousarray(mask_bias.reshape(B, Tk), dtype=dtype)
        dead = cupy.empty(B, dtype=np.bool_)
    inv_keep = 1.0 / (1.0 - dropout_p) if drop else 1.0
    rows = B * A * T
    kernels.kernel("attention_fwd", source.typed(source.ATTENTION_FWD, half), dtype)(
        *warp_rows(rows),
        (scores, bias, np.int32(mask_bias is not None), u, *key, np.int32(how), probs, probs_d,
         np.int32(half), keep, dead, np.int32(Tk), np.int64(A * T), np.int64(rows), t(scale), t(dropout_p),
         t(inv_keep)))
    dead = dead if mask_bias is not None else None
    if not drop:
        return probs, probs_d if half else probs, None, 1.0, dead
    return probs, probs_d, keep, inv_keep, dead


def attention_dscores(dprobs_d, probs, keep, inv_keep, scale, dead):
    """Gradient of the raw scores from that of the dropped probabilities (in place; float16 in and out
    in mixed precision, the arithmetic in float32 with probs).

    keep: the uint8 keep mask, or None without dropout."""
    has_drop = keep is not None
    if not has_drop:
        keep, inv_keep = kernels.dummy(np.uint8), 1.0
    Tk = probs.shape[-1]
    t = probs.dtype.type
    B = probs.shape[0]
    has_dead = dead is not None
    dead = kernels.dummy(np.bool_) if dead is None else dead
    rows = probs.size // Tk
    kernels.kernel("attention_bwd", source.typed(source.ATTENTION_BWD, dprobs_d.dtype == np.float16), probs.dtype)(
        *warp_rows(rows),
        (dprobs_d, probs, keep, np.int32(has_drop), np.int32(Tk), np.int64(rows), t(scale), t(inv_keep),
         dead, np.int32(has_dead), np.int64(probs.size // (Tk * B))))
    return dprobs_d


# ---------------------------------------------------------------------------- AdamW
def adamw_update(p, g, m, v, b1, b2, step_size, root_c2, eps, decay, n_decay, go=None):
    """``ops.adamw_update`` as one elementwise kernel over the flat buffers.

    ``step_size``, ``root_c2`` and ``go`` may be numbers or 0-d arrays on the device (computed
    there from a step count the host does not read); the kernel takes either."""
    if not applies(p, g, m, v):
        return ref.adamw_update(p, g, m, v, b1, b2, step_size, root_c2, eps, decay, n_decay, go)
    t = p.dtype.type

    def number(x):              # a device number as it is (of the kernel's type), a host one converted
        return x.astype(p.dtype, copy=False) if kernels.on_device(x) else t(x)
    kernels.elementwise()["adamw"](g, t(b1), t(1.0 - b1), t(b2), t(1.0 - b2), number(step_size),
                                   number(root_c2), t(eps), number(decay), np.int64(n_decay),
                                   t(1) if go is None else number(go), p, m, v)


def unscale(g, loss_scale, accum=1):
    """``ops.unscale`` in one elementwise kernel, the factor made in double by each thread from the
    scale on the device (the reference makes it in three launches of one number each)."""
    if not (applies(g) and kernels.on_device(loss_scale) and loss_scale.shape == ()
            and loss_scale.dtype == np.float64):
        return ref.unscale(g, loss_scale, accum)
    kernels.elementwise()["unscale"](loss_scale, np.int64(accum), g)


def clip_by_norm(g, norm, max_norm):
    """``ops.clip_by_norm`` in one elementwise kernel, the factor computed by each thread from the norm
    on the device (the reference makes it in four launches of one number each)."""
    if not (applies(g) and kernels.on_device(norm) and norm.shape == () and norm.dtype == g.dtype):
        return ref.clip_by_norm(g, norm, max_norm)
    kernels.elementwise()["clip"](norm, g.dtype.type(max_norm), g)
