"""The array backend: one array module ``xp`` (NumPy or CuPy) per model.

Everything in minibert is written against the common NumPy/CuPy API, so the
same layer code runs on the CPU and the GPU.  This module is the only place
that knows which one is in use: it picks the module, the dtype, the ``erf``
implementation and the scatter-add used by embedding backward passes.

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


def scatter_add_rows(xp, table, ids, rows, skip=None):
    """``table[ids[n]] += rows[n]`` for every n, with repeated ids summed.

    table: (V, H); ids: (N,) int; rows: (N, H).  Rows whose id is ``skip``
    are left out (the ``[PAD]`` id of an embedding).

    This is the backward pass of an embedding lookup.  ``np.add.at`` does it
    element by element in an unbuffered loop and is notoriously slow on large
    tables.  On the CPU we instead sort the ids so that equal ids are
    adjacent, sum each run of equal ids with one vectorised
    ``np.add.reduceat``, and add the per-id sums with plain fancy indexing
    (safe because the ids are now unique).  On the GPU CuPy's ``add.at`` is a
    native atomic scatter-add kernel and is already fast.
    """
    if ids.size == 0:
        return table
    if is_cupy(xp):
        if skip is not None:   # zeroed rather than removed: a boolean index would wait for the GPU
            rows = rows * (ids != skip)[:, None].astype(rows.dtype)
        xp.add.at(table, ids, rows)
        return table
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    # start of each run of equal ids in the sorted order
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    sums = np.add.reduceat(rows[order], starts, axis=0)
    run_ids = sorted_ids[starts]
    if skip is not None:
        keep = run_ids != skip
        run_ids, sums = run_ids[keep], sums[keep]
    table[run_ids] += sums
    return table
