"""Which set of ops a model runs, chosen once when the model is built.

A set of ops is a module that defines every name of ``minibert.ops.OPS``:
``minibert.ops`` itself (the reference, the definition of the math), or
``minibert.accel.cpu`` and ``minibert.accel.cuda`` (the same ops, faster,
each tested against the reference).  A model keeps its set as ``model.ops``
and calls nothing else; its ``ParamStore`` keeps it too, for the optimiser's
update rule.
"""
from __future__ import annotations

import numpy as np

from . import ops

KERNELS = ("reference", "fast")


def select_ops(kernels, device: str, dtype):
    """The set of ops for ``kernels``, the model's device and its dtype.

    ``"reference"``: ``minibert.ops``, the definition, on any device and dtype.
    ``"fast"``: the accelerated set for the device and dtype: ``accel.cuda``
    on the GPU, ``accel.cpu`` for float32 on the CPU (it also asks malloc to
    keep the memory a step frees, ``accel/memory.py``); float64 on the CPU has
    no kernels of its own, so it is the reference.  A module itself (say
    ``minibert.accel.cuda``) is taken as it is, once checked to be complete.
    """
    if not isinstance(kernels, str):
        missing = [name for name in ops.OPS if not callable(getattr(kernels, name, None))]
        if missing:
            raise ValueError(f"kernels must be one of {list(KERNELS)} or a complete set of ops; "
                             f"{getattr(kernels, '__name__', type(kernels).__name__)} lacks {', '.join(missing)}")
        return kernels
    if kernels not in KERNELS:
        raise ValueError(f"kernels must be one of {list(KERNELS)}, got {kernels!r}")
    if kernels == "reference":
        return ops
    if device == "cuda":
        from .accel import cuda
        return cuda
    if np.dtype(dtype) == np.float32:
        from .accel import cpu
        from .accel.memory import keep_freed_memory
        from .accel.pool import num_threads
        num_threads()           # a bad MINIBERT_NUM_THREADS is one clear error here, before any work
        keep_freed_memory()     # each step reuses the memory the last one freed
        return cpu
    return ops
