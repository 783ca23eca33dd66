"""BERT's building blocks, each a forward/backward pair written by hand.

Every ``*_forward`` returns ``(out, cache)``; the matching ``*_backward``
takes the upstream gradient and that cache and returns the gradients of the
inputs and parameters.  The functions work on NumPy and CuPy arrays alike.

These are the reference ops of ``minibert/ops/`` (one module per concept:
``ops/linear.py``, ``ops/layernorm.py``, ``ops/attention.py``, ...), gathered
under one name.  They are plain array code with no fast path: the model runs
the same math through ``minibert.dispatch``, which hands float32 NumPy and
CuPy arrays to the kernels of ``minibert.accel`` once ``minibert.accel.enable()``
has been called.

Shapes use B (batch), T (sequence length), H (hidden size), A (heads),
D = H / A (head size), I (intermediate size), V (vocabulary), N (rows).
"""
from .ops import (AttentionCache, CrossEntropyCache, GeluCache, LayerNormCache,  # noqa: F401
                  attention_backward, attention_forward, attention_mask_bias, dropout_backward,
                  dropout_forward, embedding_backward, embedding_forward, gelu_backward, gelu_forward,
                  get_array_module, half_matmul, layernorm_backward, layernorm_forward, linear_backward,
                  linear_forward, merge_heads, softmax_backward, softmax_cross_entropy_backward,
                  softmax_cross_entropy_forward, softmax_forward, split_heads, tanh_backward, tanh_forward)
from .ops import __all__  # noqa: F401
