"""Kernels for float32 NumPy arrays: the reference's formulas, fewer passes over memory, all cores.

The reference ops (``minibert/ops/``) write one NumPy expression per step.
That style costs time on the CPU for four reasons:

* each NumPy operation reads and writes whole arrays (a 32 x 8 x 128 x 128
  attention tensor is 16 MB), so a formula of ten operations streams 300 MB
  through memory and allocates ten temporaries;
* NumPy's elementwise functions run on one core, while BLAS and PyTorch use
  them all;
* ``scipy.special.erf`` (the exact GELU) is a scalar loop, slower than the
  matrix product that feeds it;
* between two matrix products a multi-threaded BLAS keeps its threads
  spinning on the cores that the next NumPy operations need.

The kernels here fix that without changing the math: work is cut into
blocks of whole rows that stay in cache, spread over one thread pool
(``accel/pool.py``); the exact GELU uses a float64 rational erf per block
(``accel/erf.py``); the linear layers' products are cut into fixed runs of
rows, each a single-threaded BLAS call on the same pool (``accel/blas.py``).

Each module mirrors one of ``minibert/ops/`` and returns the same cache
type.  Most repeat the reference's float32 operations in the same order
and so return exactly its values; the exceptions, tested against the
reference within float32 tolerances, are the exact GELU forward, the
LayerNorm parameter gradients (sums per block) and the linear layers'
products (a BLAS kernel may round a run of rows differently from the same
rows in one whole product).  The blocks depend on the shapes alone, so every
kernel gives the same bits with 1 or N threads.

Together with the reference ops they have no kernel for (the lookups, tanh,
the head reshapes), this package is a complete set of ops: the one a float32
model on the CPU runs with ``kernels="fast"`` (``minibert.kernels``).
"""
from ...ops import (add_grads, attention_mask_bias, clip_by_norm, embedding_forward, merge_heads, softmax_backward, softmax_forward,
                    split_heads, split_qkv, merge_qkv, tanh_backward, tanh_forward, unscale)
from ..rng import uniform
from .adamw import adamw_update
from .attention import attention_backward, attention_forward
from .elementwise import dropout_backward, dropout_forward, gelu_backward, gelu_forward
from .embedding import embedding_backward
from .layernorm import layernorm_backward, layernorm_forward
from .linear import half_matmul, linear_backward, linear_forward
from .loss import softmax_cross_entropy_backward, softmax_cross_entropy_forward
from .residual import dropout_add_layernorm_backward, dropout_add_layernorm_forward

__all__ = ["adamw_update", "add_grads", "attention_backward", "attention_forward", "attention_mask_bias", "clip_by_norm",
           "dropout_add_layernorm_backward", "dropout_add_layernorm_forward", "dropout_backward",
           "dropout_forward", "embedding_backward", "embedding_forward", "gelu_backward", "gelu_forward",
           "half_matmul", "layernorm_backward", "layernorm_forward", "linear_backward", "linear_forward",
           "merge_heads", "softmax_backward", "softmax_cross_entropy_backward", "softmax_cross_entropy_forward",
           "softmax_forward", "split_heads", "split_qkv", "merge_qkv", "tanh_backward", "tanh_forward", "uniform", "unscale"]
