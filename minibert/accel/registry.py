"""Which accelerated kernel implements which op, for which arrays.

``KERNELS[op]`` lists the kernels of one op (an ``ops`` function name, or
``adamw_update`` / ``uniform``), each with the device it runs on and a test
``applies(*args, **kwargs)`` that takes the op's own arguments.  The first
kernel that applies runs (``minibert.dispatch``); when none does, the
reference does.  A new kernel is one more line here; ``tests/test_accel.py``
then runs it against the reference by itself.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from ..constants import IGNORE_INDEX
from .cpu import adamw as cpu_adamw, attention as cpu_attention, elementwise as cpu_elementwise
from .cpu import layernorm as cpu_layernorm, linear as cpu_linear, loss as cpu_loss
from .cuda import kernels as cuda_kernels, ops as cuda
from .rng import uniform as cpu_uniform


class Kernel(NamedTuple):
    device: str            # "cpu" (float32 NumPy) or "cuda" (CuPy)
    fn: Callable           # same signature, same results and cache type as the reference
    applies: Callable      # applies(*args, **kwargs) -> bool, given the op's arguments


def f32(*arrays) -> bool:
    """Every array a float32 NumPy array: what the CPU kernels take."""
    return all(type(a) is np.ndarray and a.dtype == np.float32 for a in arrays)


def _np_half(W) -> bool:
    return type(W) is np.ndarray and W.dtype == np.float16


def _gpu(*arrays) -> bool:
    """CuPy arrays, all float32 or all float64, C-contiguous: what the CUDA kernels take."""
    return cuda_kernels.applies(*arrays)


def _gelu_form(approximate) -> bool:
    return approximate in ("none", "tanh")


def _drops(p, train) -> bool:
    return bool(train) and p != 0.0


KERNELS = {
    "linear_forward": [
        Kernel("cpu", cpu_linear.linear_forward, lambda x, W, b: f32(x, W, b) or _np_half(W))],
    "linear_backward": [
        Kernel("cpu", cpu_linear.linear_backward, lambda dy, cache: f32(dy, *cache) or _np_half(cache[1]))],
    "half_matmul": [
        Kernel("cpu", cpu_linear.half_matmul, lambda a, b: type(a) is np.ndarray and type(b) is np.ndarray)],
    "layernorm_forward": [
        Kernel("cpu", cpu_layernorm.layernorm_forward, lambda x, gamma, beta, eps: f32(x, gamma, beta)),
        Kernel("cuda", cuda.layernorm_forward, lambda x, gamma, beta, eps: _gpu(x, gamma, beta))],
    "layernorm_backward": [
        Kernel("cpu", cpu_layernorm.layernorm_backward, lambda dy, cache: f32(dy, cache.xhat)),
        Kernel("cuda", cuda.layernorm_backward, lambda dy, cache: _gpu(dy, *cache))],
    "gelu_forward": [
        Kernel("cpu", cpu_elementwise.gelu_forward,
               lambda x, approximate="none": _gelu_form(approximate) and f32(x)),
        Kernel("cuda", cuda.gelu_forward,
               lambda x, approximate="none": _gelu_form(approximate) and _gpu(x))],
    "gelu_backward": [
        Kernel("cpu", cpu_elementwise.gelu_backward, lambda dy, cache: f32(dy, cache.x)),
        Kernel("cuda", cuda.gelu_backward,
               lambda dy, cache: _gpu(dy, cache.x, cache.cdf if cache.t is None else cache.t))],
    "dropout_forward": [
        Kernel("cpu", cpu_elementwise.dropout_forward, lambda x, p, rng, train: _drops(p, train) and f32(x)),
        Kernel("cuda", cuda.dropout_forward, lambda x, p, rng, train: _drops(p, train) and _gpu(x))],
    "dropout_backward": [
        Kernel("cpu", cpu_elementwise.dropout_backward,
               lambda dout, cache: cache is not None and f32(dout, cache) and dout.shape == cache.shape)],
    "attention_forward": [
        Kernel("cpu", cpu_attention.attention_forward, lambda q, k, v, *a, **kw: f32(q, k, v)),
        Kernel("cuda", cuda.attention_forward, lambda q, k, v, *a, **kw: _gpu(q, k, v))],
    "attention_backward": [
        Kernel("cpu", cpu_attention.attention_backward,
               lambda dout, cache, out=None: f32(dout, cache.q, cache.k, cache.v)),
        Kernel("cuda", cuda.attention_backward, lambda dout, cache, out=None: _gpu(cache.probs))],
    "softmax_cross_entropy_forward": [
        Kernel("cpu", cpu_loss.softmax_cross_entropy_forward,
               lambda logits, labels, ignore_index=IGNORE_INDEX: f32(logits) and logits.ndim == 2)],
    "softmax_cross_entropy_backward": [
        Kernel("cpu", cpu_loss.softmax_cross_entropy_backward, lambda dloss, cache: f32(cache.logits))],
    "adamw_update": [
        Kernel("cpu", cpu_adamw.adamw_update, lambda p, g, m, v, *a: f32(p, g, m, v)),
        Kernel("cuda", cuda.adamw_update, lambda p, g, m, v, *a: _gpu(p, g, m, v))],
    "uniform": [
        Kernel("cpu", cpu_uniform,
               lambda gen, shape, dtype=np.float32: isinstance(gen, np.random.Generator))],
}
