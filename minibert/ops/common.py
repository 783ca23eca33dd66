"""What every reference op shares: the array module of an array, and the one-line shape check."""
from __future__ import annotations

import numpy as np


def get_array_module(a):
    """numpy for NumPy arrays, cupy for CuPy arrays."""
    if type(a).__module__.split(".")[0] == "cupy":
        import cupy
        return cupy
    return np


def require(ok: bool, message: str) -> None:
    """A layer's shape check: one clear line instead of NumPy's broadcasting error further in."""
    if not ok:
        raise ValueError(message)


def check_bias(x, bias, op: str) -> None:
    """A bias that ``op`` adds along x's last axis: None, or of shape (x.shape[-1],)."""
    require(bias is None or (x.ndim >= 1 and tuple(bias.shape) == (x.shape[-1],)),
            f"{op}: the bias is added along x's last axis, so for x {tuple(x.shape)} it must be "
            f"({x.shape[-1] if x.ndim else '?'},); got {None if bias is None else tuple(bias.shape)}")


def add_grads(dsts, srcs):
    """dst += src for each pair, in order: a backward's parameter gradients added into their buffers
    (views of a model's flat gradient).  The sets of ops for the GPU do them in one launch or a few,
    with the same sums."""
    for dst, src in zip(dsts, srcs):
        dst += src
