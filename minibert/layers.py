"""BERT's building blocks, each a forward/backward pair written by hand.

Every ``*_forward`` returns ``(out, cache)``; the matching ``*_backward``
takes the upstream gradient and that cache and returns the gradients of the
inputs and parameters.  The functions work on NumPy and CuPy arrays alike.

These are the reference ops of ``minibert/ops/`` (one module per concept:
``ops/linear.py``, ``ops/layernorm.py``, ``ops/attention.py``, ...), gathered
under one name.  They are plain array code with no fast path; a model built
with ``kernels="fast"`` runs the same math through the kernels of
``minibert.accel`` instead (``minibert.kernels``).

Shapes use B (batch), T (sequence length), H (hidden size), A (heads),
D = H / A (head size), I (intermediate size), V (vocabulary), N (rows).
"""
from .ops import *  # noqa: F401,F403
from .ops import __all__  # noqa: F401
