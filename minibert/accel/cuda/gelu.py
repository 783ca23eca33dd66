"""GELU on the GPU with the linear layer's bias before it: one kernel each way.

The feed-forward block is h W_in^T + b, GELU, then the next product.  The reference adds the
bias in the linear layer, a pass of its own; here the GELU kernel adds it as it reads the
product (``linear_forward(x, W, None)`` makes the product alone).  In mixed precision the same
kernel reads the float16 product, computes in float32, and writes the float16 operand of the
next product; the backward reads the float16 gradient that product gives back.  Three passes
over the (tokens, intermediate) activation where there were five in mixed precision.

``gelu_fwd``  u = x + b (kept for the backward), aux = Phi(u) (exact form) or tanh(...) (tanh
              form), y = GELU(u): the reference's expressions in its order
``gelu_bwd``  dx = dy * GELU'(u), from u and aux
"""
from __future__ import annotations

import numpy as np

from ... import ops as ref
from ...constants import GELU_TANH_C, INV_SQRT_2PI, SQRT_2_OVER_PI
from ...ops.activations import GeluCache
from . import kernels
from .kernels import applies

GELU_FWD = r"""
extern "C" __global__ void gelu_fwd(const T* x, const unsigned short* xh, const int x_half, const T* b, const int has_b,
                                    T* u, T* aux, T* y, unsigned short* yh, const int y_half, const int tanh_form,
                                    const long long n, const int H) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        T v = x_half ? T(half_to_float(xh[i])) : x[i];
        if (has_b) v = v + b[i % H];
        u[i] = v;
        T out;
        if (tanh_form) {          // t = tanh(sqrt(2/pi) (u + c u^3));  y = u (1 + t) / 2
            const T t = tanh(T(SQRT_2_OVER_PI) * (v + T(GELU_TANH_C) * v * v * v));
            aux[i] = t;
            out = T(0.5) * v * (T(1) + t);
        } else {                  // cdf = (1 + erf(u / sqrt 2)) / 2;  y = u cdf (1/sqrt 2 correctly rounded)
            const T cdf = T(0.5) * (T(1) + erf(v * T(0.70710678118654752440)));
            aux[i] = cdf;
            out = v * cdf;
        }
        if (y_half) yh[i] = float_to_half((float)out); else y[i] = out;
    }
}
""".replace("SQRT_2_OVER_PI", repr(SQRT_2_OVER_PI)).replace("GELU_TANH_C", repr(GELU_TANH_C))

GELU_BWD = r"""
extern "C" __global__ void gelu_bwd(const T* dy, const unsigned short* dyh, const int dy_half, const T* u,
                                    const T* aux, T* dx, const int tanh_form, const long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const T d = dy_half ? T(half_to_float(dyh[i])) : dy[i], v = u[i];
        if (tanh_form) {          // (1 + t) / 2 + u (1 - t^2) sqrt(2/pi) (1 + 3 c u^2) / 2
            const T t = aux[i], dudx = T(SQRT_2_OVER_PI) * (T(1) + T(3) * T(GELU_TANH_C) * v * v);
            dx[i] = d * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * dudx);
        } else {                  // Phi(u) + u phi(u),  phi(u) = exp(-u^2 / 2) / sqrt(2 pi)
            dx[i] = d * (aux[i] + v * (T(INV_SQRT_2PI) * exp(T(-0.5) * v * v)));
        }
    }
}
""".replace("SQRT_2_OVER_PI", repr(SQRT_2_OVER_PI)).replace("GELU_TANH_C", repr(GELU_TANH_C)).replace(
    "INV_SQRT_2PI", repr(INV_SQRT_2PI))


def _grid(n):
    return (int(min((n + 255) // 256, 4096)),), (256,)


def _form(approximate):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return approximate == "tanh"


def gelu_forward(x, approximate="none", bias=None, half_out=False):
    """``ops.gelu_forward``: the bias add, GELU and, with ``half_out``, the rounding to float16 in one
    kernel, which reads a float16 x (mixed precision's product) as it is."""
    tanh_form = _form(approximate)
    x_half = x.dtype == np.float16
    dtype = np.dtype(np.float32) if x_half else x.dtype
    if not (kernels.on_device(x) and x.flags.c_contiguous and x.size and (
            applies(bias) and bias.dtype == dtype and x.shape[-1:] == bias.shape if bias is not None
            else not x_half and applies(x))):
        return ref.gelu_forward(x, approximate, bias, half_out)
    import cupy
    u, aux = cupy.empty(x.shape, dtype), cupy.empty(x.shape, dtype)
    y = cupy.empty(x.shape, np.float16 if half_out else dtype)
    dummy, dummy16 = kernels.dummy(dtype), kernels.dummy(np.float16)
    kernels.kernel("gelu_fwd", GELU_FWD, dtype)(
        *_grid(x.size), (dummy if x_half else x, x if x_half else dummy16, np.int32(x_half),
                         dummy if bias is None else bias, np.int32(bias is not None), u, aux,
                         dummy if half_out else y, y if half_out else dummy16, np.int32(half_out),
                         np.int32(tanh_form), np.int64(x.size), np.int32(x.shape[-1])))
    return y, (GeluCache(u, None, aux) if tanh_form else GeluCache(u, aux, None))


def gelu_backward(dy, cache):
    """``ops.gelu_backward`` in one kernel, which reads a float16 dy (mixed precision's product) as it is."""
    x, cdf, t = cache
    aux = cdf if t is None else t
    dy_half = dy.dtype == np.float16
    if not (applies(x, aux) and x.size and kernels.on_device(dy) and dy.flags.c_contiguous and dy.shape == x.shape
            and (dy_half or dy.dtype == x.dtype)):
        return ref.gelu_backward(dy, cache)
    import cupy
    dx = cupy.empty(x.shape, x.dtype)
    dummy, dummy16 = kernels.dummy(x.dtype), kernels.dummy(np.float16)
    kernels.kernel("gelu_bwd", GELU_BWD, x.dtype)(
        *_grid(x.size), (dummy if dy_half else dy, dy if dy_half else dummy16, np.int32(dy_half), x, aux, dx,
                         np.int32(t is not None), np.int64(x.size)))
    return dx
