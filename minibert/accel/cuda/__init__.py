"""Fused CUDA kernels for CuPy arrays (float32 and float64), a complete set of ops.

``source.py`` holds the row kernels' C++, ``kernels.py`` compiles and launches it, ``ops.py``
exposes the ops (``linear.py`` the linear layer and the column sums; ``activations.py`` GELU and
tanh with the bias before them; ``layernorm.py`` LayerNorm, alone and with the residual sum; ``loss.py`` the
softmax cross-entropy; ``grads.py`` the gradients' adds, in a launch or two).
``bookkeeping.py`` is the trainer's, not an op: a batch's sums in one launch, a step's health
watch and metrics window in one more; ``loss_scaling.py`` is the optimiser's: mixed precision's
verdict, AdamW's step count and bias correction in one launch.  With the reference ops that need
no kernel of their own (the lookups, the head reshapes), this package is the set of ops a model
on the GPU runs with ``kernels="fast"`` (``minibert.kernels``).
"""
from ...ops import (dropout_backward, embedding_backward, embedding_forward, merge_heads, softmax_backward,
                    softmax_forward, split_heads, uniform)
from .activations import gelu_backward, gelu_forward, tanh_backward, tanh_forward
from .grads import add_grads
from .layernorm import (dropout_add_layernorm_backward, dropout_add_layernorm_forward, layernorm_backward,
                        layernorm_forward)
from .linear import linear_backward, linear_forward
from .loss import softmax_cross_entropy_backward, softmax_cross_entropy_forward
from .ops import (adamw_update, attention_backward, attention_forward, attention_mask_bias, clip_by_norm,
                  dropout_forward, half_matmul, merge_qkv, split_qkv, unscale)

__all__ = ["adamw_update", "add_grads", "clip_by_norm", "attention_backward", "attention_forward", "attention_mask_bias",
           "dropout_add_layernorm_backward", "dropout_add_layernorm_forward", "dropout_backward",
           "dropout_forward", "embedding_backward", "embedding_forward", "gelu_backward", "gelu_forward",
           "half_matmul", "layernorm_backward", "layernorm_forward", "linear_backward", "linear_forward",
           "merge_heads", "softmax_backward", "softmax_cross_entropy_backward", "softmax_cross_entropy_forward",
           "softmax_forward", "split_heads", "split_qkv", "merge_qkv", "tanh_backward", "tanh_forward", "uniform", "unscale"]
