"""The array backend: one array module ``xp`` (NumPy or CuPy) per model.

Everything in minibert is written against the common NumPy/CuPy API, so the
same layer code runs on the CPU and the GPU.  This module is the only place
that knows which one is in use: it picks the module, the dtype and the ``erf``
implementation (the set of ops a model runs: ``minibert.kernels``).

CuPy is imported lazily, only when ``device="cuda"`` is asked for, so a
CPU-only installation never needs it; ``gpu_setup`` checks it then.
"""
from __future__ import annotations

import numpy as np

from .gpu_setup import GPUSetupError, gpu_status, require_cupy  # noqa: F401  (re-exported)

_DTYPES = {"float32": np.float32, "float64": np.float64}
_DEVICES = ("cpu", "cuda")


def resolve_dtype(dtype) -> np.dtype:
    """Turn ``"float32"``/``"float64"`` (or the NumPy types) into a NumPy dtype."""
    key = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    if key not in _DTYPES:
        raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
    return np.dtype(_DTYPES[key])


def get_xp(device: str = "cpu"):
    """Return the array module for ``device`` ("cpu" -> numpy, "cuda" -> cupy).

    Where "cuda" cannot work, raises a ``GPUSetupError`` (a ``RuntimeError``) whose one
    line names what is missing (CuPy, the driver, the GPU, the right CuPy for the driver,
    CUDA's libraries) and what to install.
    """
    if device not in _DEVICES:
        raise ValueError(f"device must be one of {list(_DEVICES)}, got {device!r}")
    if device == "cpu":
        return np
    return require_cupy()


def is_cupy(xp) -> bool:
    return xp.__name__ == "cupy"


def on_host(x) -> bool:
    """True for a number or a NumPy array, which the host reads for free; False for a value on a
    device (a CuPy array), whose reading waits for the GPU to finish all it was given."""
    return isinstance(x, (bool, int, float, np.generic)) or type(x) is np.ndarray


def host_number(x):
    """``x`` (a number, or a 0-d array anywhere) as a Python number: a read where it is on a device."""
    return x if isinstance(x, (bool, int, float)) else x.item()


def to_numpy(a):
    """Copy an array (NumPy or CuPy) to a NumPy array on the host."""
    if hasattr(a, "get"):
        return a.get()
    return np.asarray(a)


def erf_fn(xp):
    """The reference ``erf``: SciPy's on the CPU, cupyx's on the GPU."""
    if is_cupy(xp):
        from cupyx.scipy.special import erf
    else:
        from scipy.special import erf
    return erf
