"""What the checkers share: calling a forward or backward pass on copies, and reading what comes back."""
from __future__ import annotations

import numpy as np

from ..calls import call_watched
from ..harness import Forward, fresh
from ..report import Abort, Report


def unpack(r: Report, func: str, result, n: int, names: str):
    """``result`` as its n values, or a FAIL that says what the function returned instead."""
    if not isinstance(result, (tuple, list)) or len(result) != n:
        got = f"a {type(result).__name__}" if not isinstance(result, (tuple, list)) else f"{len(result)} values"
        r.fail(f"{func} should return {n} values ({names}), got {got}",
               "return them as a tuple, in the order the docstring gives")
        raise Abort
    return result


def fwd(r: Report, func: str, *args, **kwargs):
    """Call a CS231n-style forward on copies of the arrays in ``args``; return (out, cache).

    A forward pass that changes one of its input arrays fails here, with a
    message saying so, rather than later in a gradient check.
    """
    args = [fresh(a) for a in args]
    roles = ["input" if isinstance(a, np.ndarray) else None for a in args]
    return unpack(r, func, call_watched(r, func, *args, roles=roles, **kwargs), 2, "out, cache")


def bwd(r: Report, func: str, upstream, cache, **kwargs):
    """Call a backward pass on a copy of the upstream gradient; it must change neither that nor the cache."""
    return call_watched(r, func, fresh(upstream), cache, roles=["upstream", "cache"], **kwargs)


def forward_output(r: Report, func: str, *args, **kwargs) -> Forward:
    """The function the gradient check differentiates: ``func(*args)[0]``, on fresh copies of ``args``."""
    return Forward(r.module, func, args, kwargs)


def seeded_output(r: Report, func: str, *args, seed: int, **kwargs) -> Forward:
    """``func(*args, rng)[0]`` with a new generator of the same seed at every call, on copies of ``args``.

    What the gradient check differentiates for a random forward: with the same
    seed the mask is the same at every call, so it is a fixed function of its input.
    """
    return Forward(r.module, func, args, kwargs, seed=seed)


def near(values, target, rtol=1e-9) -> bool:
    """Are all ``values`` ``target`` (and is there at least one)?"""
    return values.size > 0 and bool(np.allclose(values, target, rtol=rtol, atol=0.0))
