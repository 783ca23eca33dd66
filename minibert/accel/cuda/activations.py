"""GELU and tanh on the GPU with the bias of the linear layer before them: one kernel each way.

The feed-forward block is h W_in^T + b, GELU, then the next product; the pooler is x W^T + b, then
tanh.  The reference adds the bias in the linear layer, a pass of its own; here the activation's
kernel adds it as it reads the product (``linear_forward(x, W, None)`` makes the product alone).
In mixed precision the same kernel reads the float16 product, computes in float32, and (GELU)
writes the float16 operand of the next product; the backward reads the float16 gradient that
product gives back.  Three passes over the (tokens, intermediate) activation where there were
five in mixed precision.

``act_fwd``  u = x + b, then by ``form``: 0 the exact GELU, aux = Phi(u), y = u aux; 1 the tanh
             GELU, aux = tanh(sqrt(2/pi) (u + c u^3)), y = u (1 + aux) / 2; 2 tanh, y = tanh(u).
             The reference's expressions in its order.  u is kept for the GELU's backward
``act_bwd``  dx = dy * f'(u), from u and aux (GELU) or y (tanh: 1 - y^2)
"""
from __future__ import annotations

import numpy as np

from ... import ops as ref
from ...constants import GELU_TANH_C, INV_SQRT_2PI, SQRT_2_OVER_PI
from ...ops.activations import GeluCache
from ...ops.common import check_bias
from . import kernels
from .kernels import applies

ACT_FWD = r"""
extern "C" __global__ void act_fwd(const T* x, const unsigned short* xh, const int x_half, const T* b, const int has_b,
                                   T* u, T* aux, T* y, unsigned short* yh, const int y_half, const int form,
                                   const long long n, const int H) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        T v = x_half ? T(half_to_float(xh[i])) : x[i];
        if (has_b) v = v + b[i % H];
        T out;
        if (form == 2) {          // tanh (the pooler): the backward needs y alone
            out = tanh(v);
        } else if (form == 1) {   // t = tanh(sqrt(2/pi) (u + c u^3));  y = u (1 + t) / 2
            u[i] = v;
            const T t = tanh(T(SQRT_2_OVER_PI) * (v + T(GELU_TANH_C) * v * v * v));
            aux[i] = t;
            out = T(0.5) * v * (T(1) + t);
        } else {                  // cdf = (1 + erf(u / sqrt 2)) / 2;  y = u cdf (1/sqrt 2 correctly rounded)
            u[i] = v;
            const T cdf = T(0.5) * (T(1) + erf(v * T(0.70710678118654752440)));
            aux[i] = cdf;
            out = v * cdf;
        }
        if (y_half) yh[i] = float_to_half((float)out); else y[i] = out;
    }
}
""".replace("SQRT_2_OVER_PI", repr(SQRT_2_OVER_PI)).replace("GELU_TANH_C", repr(GELU_TANH_C))

ACT_BWD = r"""
extern "C" __global__ void act_bwd(const T* dy, const unsigned short* dyh, const int dy_half, const T* u,
                                   const T* aux, T* dx, const int form, const long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const T d = dy_half ? T(half_to_float(dyh[i])) : dy[i];
        if (form == 2) {          // tanh: 1 - y^2, y held in aux (y^2 rounded, as the reference's)
            dx[i] = d * (T(1) - mul_rn(aux[i], aux[i]));
        } else if (form == 1) {   // (1 + t) / 2 + u (1 - t^2) sqrt(2/pi) (1 + 3 c u^2) / 2
            const T v = u[i], t = aux[i], dudx = T(SQRT_2_OVER_PI) * (T(1) + T(3) * T(GELU_TANH_C) * v * v);
            dx[i] = d * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * dudx);
        } else {                  // Phi(u) + u phi(u),  phi(u) = exp(-u^2 / 2) / sqrt(2 pi)
            const T v = u[i];
            dx[i] = d * (aux[i] + v * (T(INV_SQRT_2PI) * exp(T(-0.5) * v * v)));
        }
    }
}
""".replace("SQRT_2_OVER_PI", repr(SQRT_2_OVER_PI)).replace("GELU_TANH_C", repr(GELU_TANH_C)).replace(
    "INV_SQRT_2PI", repr(INV_SQRT_2PI))

GELU_FORMS = {"none": 0, "tanh": 1}
TANH = 2


def _takes(x, bias):
    """Whether the forward kernel reads x (of its own dtype, or float16 with a float32 bias) and bias."""
    x_half = x.dtype == np.float16
    if not (kernels.on_device(x) and x.flags.c_contiguous and x.size):
        return False
    if bias is None:
        return not x_half and applies(x)
    return applies(bias) and bias.dtype == (np.float32 if x_half else x.dtype)


def _forward(x, bias, form, half_out):
    """The forward kernel: y, u (None for tanh), aux (y itself for tanh)."""
    import cupy
    dtype = np.dtype(np.float32) if x.dtype == np.float16 else x.dtype
    dummy = kernels.dummy(dtype)
    u, aux = (dummy, dummy) if form == TANH else (cupy.empty(x.shape, dtype), cupy.empty(x.shape, dtype))
    y = cupy.empty(x.shape, np.float16 if half_out else dtype)
    kernels.kernel("act_fwd", ACT_FWD, dtype)(
        *kernels.grid_stride(x.size),
        (*kernels.float_or_half(x, dtype), dummy if bias is None else bias, np.int32(bias is not None), u, aux,
         *kernels.float_or_half(y, dtype), np.int32(form), np.int64(x.size), np.int32(x.shape[-1])))
    return y, (None if form == TANH else u), (y if form == TANH else aux)


def _backward(dy, u, aux, form):
    """The backward kernel, or None where it does not take these arrays (then the reference's)."""
    like = aux
    dy_half = dy.dtype == np.float16
    if not ((u is None or applies(u, aux)) and applies(aux) and like.size and kernels.on_device(dy)
            and dy.flags.c_contiguous and dy.shape == like.shape and (dy_half or dy.dtype == like.dtype)):
        return None
    import cupy
    dx = cupy.empty(like.shape, like.dtype)
    kernels.kernel("act_bwd", ACT_BWD, like.dtype)(
        *kernels.grid_stride(like.size),
        (*kernels.float_or_half(dy, like.dtype), kernels.dummy(like.dtype) if u is None else u, aux, dx,
         np.int32(form), np.int64(like.size)))
    return dx


def gelu_forward(x, approximate="none", bias=None, half_out=False):
    """``ops.gelu_forward``: the bias add, GELU and, with ``half_out``, the rounding to float16 in one
    kernel, which reads a float16 x (mixed precision's product) as it is."""
    if approximate not in GELU_FORMS:
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    check_bias(x, bias, "gelu_forward")
    if not _takes(x, bias):
        return ref.gelu_forward(x, approximate, bias, half_out)
    y, u, aux = _forward(x, bias, GELU_FORMS[approximate], half_out)
    return y, (GeluCache(u, None, aux) if approximate == "tanh" else GeluCache(u, aux, None))


def gelu_backward(dy, cache):
    """``ops.gelu_backward`` in one kernel, which reads a float16 dy (mixed precision's product) as it is."""
    x, cdf, t = cache
    dx = _backward(dy, x, cdf if t is None else t, GELU_FORMS["none" if t is None else "tanh"])
    return ref.gelu_backward(dy, cache) if dx is None else dx


def tanh_forward(x, bias=None):
    """``ops.tanh_forward``: the bias add and tanh in one kernel (a float16 x read as it is)."""
    check_bias(x, bias, "tanh_forward")
    if not _takes(x, bias):
        return ref.tanh_forward(x, bias)
    y = _forward(x, bias, TANH, False)[0]
    return y, y


def tanh_backward(dy, cache):
    """``ops.tanh_backward`` in one kernel, where the reference's expression is three."""
    dx = _backward(dy, None, cache, TANH)
    return ref.tanh_backward(dy, cache) if dx is None else dx
