"""The reference ops: BERT's building blocks, each a forward/backward pair written by hand.

One module per concept (``linear``, ``embedding``, ``layernorm``,
``activations``, ``dropout``, ``residual``, ``attention``, ``loss``, ``adamw``).  Every
``*_forward`` returns ``(out, cache)``; the matching ``*_backward`` takes the
upstream gradient and that cache and returns the gradients of the inputs and
parameters.  The functions work on NumPy and CuPy arrays alike: the array
module is read off the inputs with ``get_array_module``.

This package is the definition of the math, and one of the three sets of
ops a model can run (``minibert.kernels``): ``minibert.accel.cpu`` and
``minibert.accel.cuda`` define the same names, faster, and are tested
against these.  Nothing here imports them.

Shapes use B (batch), T (sequence length), H (hidden size), A (heads),
D = H / A (head size), I (intermediate size), V (vocabulary), N (rows).
"""
from .activations import (GeluCache, gelu_backward, gelu_forward, softmax_backward, softmax_forward,
                          tanh_backward, tanh_forward)
from .adamw import adamw_update, clip_by_norm, unscale
from .attention import (AttentionCache, attention_backward, attention_forward, attention_mask_bias,
                        merge_heads, merge_qkv, split_heads, split_qkv)
from .common import add_grads, get_array_module
from .dropout import dropout_backward, dropout_forward, uniform
from .embedding import embedding_backward, embedding_forward
from .layernorm import LayerNormCache, layernorm_backward, layernorm_forward
from .linear import half_matmul, linear_backward, linear_forward
from .loss import (CrossEntropyCache, mse_backward, mse_forward, softmax_cross_entropy_backward,
                   softmax_cross_entropy_forward)
from .residual import ResidualCache, dropout_add_layernorm_backward, dropout_add_layernorm_forward

# what every set of ops defines (the model calls nothing else)
OPS = ("linear_forward", "linear_backward", "half_matmul", "embedding_forward", "embedding_backward",
       "layernorm_forward", "layernorm_backward", "dropout_add_layernorm_forward",
       "dropout_add_layernorm_backward", "gelu_forward", "gelu_backward", "tanh_forward",
       "tanh_backward", "softmax_forward", "softmax_backward", "dropout_forward", "dropout_backward",
       "uniform", "attention_mask_bias", "attention_forward", "attention_backward", "split_heads",
       "split_qkv", "merge_qkv", "merge_heads", "softmax_cross_entropy_forward", "softmax_cross_entropy_backward", "adamw_update",
       "unscale", "clip_by_norm", "add_grads")

__all__ = ["AttentionCache", "CrossEntropyCache", "GeluCache", "LayerNormCache", "OPS", "ResidualCache",
           "get_array_module", "mse_forward", "mse_backward",     # the regression head's loss (finetune/)
           *OPS]
