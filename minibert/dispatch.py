"""The ops the model calls: the reference of ``minibert.ops``, or an accelerated kernel.

Each function here has the name and signature of a reference op.  When
``minibert.accel.enable()`` has been called, it runs the first kernel of
``minibert.accel.registry.KERNELS`` that applies to its arguments (float32
NumPy arrays for the CPU kernels, CuPy arrays for the CUDA kernels);
otherwise, or when none applies, it runs the reference.  A kernel returns
the reference's cache type, so a backward is chosen from its arguments as
the forward was, whichever forward made the cache.
"""
from __future__ import annotations

import numpy as np

from . import accel, ops
from .accel.registry import KERNELS
from .ops.adamw import adamw_update as adamw_reference


def uniform_reference(gen, shape, dtype=np.float32):
    """``shape`` uniform numbers in [0, 1) from a NumPy or CuPy generator."""
    if isinstance(gen, np.random.Generator):
        return gen.random(shape, dtype=dtype)
    return gen.random_sample(shape, dtype=dtype)        # cupy.random.RandomState


_REFERENCES = {"adamw_update": adamw_reference, "uniform": uniform_reference}


def reference(name):
    """The reference implementation of op ``name``."""
    return _REFERENCES[name] if name in _REFERENCES else getattr(ops, name)


def choose(name, *args, **kwargs):
    """The implementation of op ``name`` that runs for these arguments."""
    if accel.enabled():
        for kernel in KERNELS.get(name, ()):
            if kernel.applies(*args, **kwargs):
                return kernel.fn
    return reference(name)


def _dispatched(name):
    def op(*args, **kwargs):
        return choose(name, *args, **kwargs)(*args, **kwargs)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = (reference(name).__doc__ or f"``{name}``.") + \
        "\n\n    (Dispatched: an accelerated kernel where one is enabled and applies, else the reference.)"
    return op


linear_forward = _dispatched("linear_forward")
linear_backward = _dispatched("linear_backward")
half_matmul = _dispatched("half_matmul")
layernorm_forward = _dispatched("layernorm_forward")
layernorm_backward = _dispatched("layernorm_backward")
gelu_forward = _dispatched("gelu_forward")
gelu_backward = _dispatched("gelu_backward")
dropout_forward = _dispatched("dropout_forward")
dropout_backward = _dispatched("dropout_backward")
attention_forward = _dispatched("attention_forward")
attention_backward = _dispatched("attention_backward")
softmax_cross_entropy_forward = _dispatched("softmax_cross_entropy_forward")
softmax_cross_entropy_backward = _dispatched("softmax_cross_entropy_backward")
adamw_update = _dispatched("adamw_update")
uniform = _dispatched("uniform")

# ops with no accelerated kernel: the reference itself
embedding_forward, embedding_backward = ops.embedding_forward, ops.embedding_backward
tanh_forward, tanh_backward = ops.tanh_forward, ops.tanh_backward
softmax_forward, softmax_backward = ops.softmax_forward, ops.softmax_backward
attention_mask_bias, split_heads, merge_heads = ops.attention_mask_bias, ops.split_heads, ops.merge_heads
