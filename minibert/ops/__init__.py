"""The reference ops: BERT's building blocks, each a forward/backward pair written by hand.

One module per concept (``linear``, ``embedding``, ``layernorm``,
``activations``, ``dropout``, ``attention``, ``loss``).  Every ``*_forward``
returns ``(out, cache)``; the matching ``*_backward`` takes the upstream
gradient and that cache and returns the gradients of the inputs and
parameters.  The functions work on NumPy and CuPy arrays alike: the array
module is read off the inputs with ``get_array_module``.

This package is the definition of the math.  It has no fast path and
imports nothing from ``minibert.accel``; the accelerated kernels there are
tested against these functions, and ``minibert.dispatch`` chooses between
the two.

Shapes use B (batch), T (sequence length), H (hidden size), A (heads),
D = H / A (head size), I (intermediate size), V (vocabulary), N (rows).
"""
from .activations import (GeluCache, gelu_backward, gelu_forward, softmax_backward, softmax_forward,
                          tanh_backward, tanh_forward)
from .attention import (AttentionCache, attention_backward, attention_forward, attention_mask_bias,
                        merge_heads, split_heads)
from .common import get_array_module
from .dropout import dropout_backward, dropout_forward
from .embedding import embedding_backward, embedding_forward
from .layernorm import LayerNormCache, layernorm_backward, layernorm_forward
from .linear import half_matmul, linear_backward, linear_forward
from .loss import CrossEntropyCache, softmax_cross_entropy_backward, softmax_cross_entropy_forward

__all__ = ["AttentionCache", "CrossEntropyCache", "GeluCache", "LayerNormCache",
           "attention_backward", "attention_forward", "attention_mask_bias", "dropout_backward",
           "dropout_forward", "embedding_backward", "embedding_forward", "gelu_backward", "gelu_forward",
           "get_array_module", "half_matmul", "layernorm_backward", "layernorm_forward", "linear_backward",
           "linear_forward", "merge_heads", "softmax_backward", "softmax_cross_entropy_backward",
           "softmax_cross_entropy_forward", "softmax_forward", "split_heads", "tanh_backward", "tanh_forward"]
