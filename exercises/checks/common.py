"""What the checkers share: calling a forward or backward pass on copies, and reading what comes back."""
from __future__ import annotations

import hashlib

import numpy as np

from ..calls import call_watched
from ..cases.table import joined
from ..harness import Forward, fresh, touch
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


REPLAYED = 60        # calls replayed on every case: few enough to take well under a second
SPREAD_FIRST = 100   # of the calls under many seeds, those each case's spread is first compared on


def replay(r: Report, table, got: list, run, many=None) -> None:
    """Diagnose a random rule by replaying it with the check's own inputs and seeds (``replayer``):
    its diagnosis is that of every failure after this (``Report.replay``)."""
    r.replay = replayer(table, got, run, many)


def replayer(table, got: list, run, many=None):
    """A function of no arguments giving the hint of the slip whose results the student's reproduce, or None.

    ``got``: the student's results, a flat vector per call; ``run(module, k)``: a module's on the
    first k calls; results are compared by their digests (exact, and small to record).  The cases
    and mutants that give exactly the student's results on the first ``REPLAYED`` calls are run on
    all of them, and those that still agree are the diagnosis: the same draws only when the student
    draws as the solution does.  When not, and ``many`` is given (the student's results of many
    calls on one input, each with its own seed; ``run(module, k)``: a module's on the first k), the
    diagnosis is the slips whose ``spread`` over those calls is the student's, by ``alike``: what
    each entry holds how often, whatever the order of the draws.  Else nothing matches and the
    check's own hints stay.
    """
    few, every = _digest(got[:REPLAYED]), _digest(got)

    def on(k):
        return lambda m: _digest(run(m, k))
    touch(table.known(on(REPLAYED)))               # the student copy's recording, of both
    touch(table.known(on(len(got))))
    if many is None:
        return lambda: _replayed(table, few, every, on(REPLAYED), on(len(got)))
    mine, run_many = (spread(many[0][:SPREAD_FIRST]), spread(many[0])), many[1]

    def spread_of(k):          # (closing over the calls alone: the recording's key is the computation's)
        return lambda m: spread(run_many(m, k))
    firsts, alls = spread_of(SPREAD_FIRST), spread_of(len(many[0]))
    touch(table.each(firsts, mutants=True, same=alike))
    touch(table.each(alls, mutants=True, same=alike))
    return lambda: (_replayed(table, few, every, on(REPLAYED), on(len(got)))
                    or _alike(table, mine, firsts, alls))


def _replayed(table, few, every, first, all_calls):
    names = {o.case.name for o in table.each(first, mutants=True)
             if o.raised is None and not o.like_right and _equal(o.value, few)}
    if not names:
        return None
    found = [o.case for o in table.each(all_calls, mutants=True, only=names)
             if o.raised is None and _equal(o.value, every)]
    return _hint(found)


def _alike(table, mine, firsts, alls):
    """The slips whose spread is the student's: on the first ``SPREAD_FIRST`` calls, then on all."""
    names = {o.case.name for o in table.each(firsts, mutants=True, same=alike)
             if o.raised is None and alike(o.value, mine[0])}
    return _hint([o.case for o in table.each(alls, mutants=True, same=alike, only=names)
                  if o.raised is None and not o.like_right and alike(o.value, mine[1])] if names else [])


def _hint(found):
    hand = [c for c in found if not c.mutant]
    return hand[0].hint if hand else (joined(list(dict.fromkeys(c.hint for c in found))) if found else None)


TOP = 3             # a spread keeps each entry's TOP commonest values and their counts, the rest counted together


def spread(results) -> np.ndarray:
    """What many calls (with their own seeds) on one input give, entry by entry, whatever the draws:
    for each entry of the calls' flat results (of one length), its TOP commonest values, their counts
    and the count of all the others: (entries, 2 TOP + 1)."""
    a = np.asarray([np.asarray(res, dtype=np.float64).ravel() for res in results])
    out = np.zeros((a.shape[1], 2 * TOP + 1))
    for j, column in enumerate(a.T):
        values, counts = np.unique(column, return_counts=True)
        top = np.lexsort((values, -counts))[:TOP]
        out[j, :len(top)], out[j, TOP:TOP + len(top)] = values[top], counts[top]
        out[j, 2 * TOP] = len(column) - counts[top].sum()
    return out


def alike(a, b, z=4.5) -> bool:
    """Could the spreads a and b come from the same rule?  Each value that is among the commonest of an
    entry in either must be as common in both, within z standard errors of the difference of two
    shares (a value not among the other's commonest was seen there at most as often as its last kept):
    at 400 calls, shares that differ by less than about 0.15 are not told apart."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2 or a.shape[1] != 2 * TOP + 1:
        return False
    for ra, rb in zip(a, b):
        na, nb = ra[TOP:].sum(), rb[TOP:].sum()
        if not (na and nb):
            return False
        for v in {float(x) for row in (ra, rb) for x, c in zip(row[:TOP], row[TOP:2 * TOP]) if c}:
            (lo_a, hi_a), (lo_b, hi_b) = _seen(ra, v), _seen(rb, v)
            gap = max(lo_a / na - hi_b / nb, lo_b / nb - hi_a / na)
            p = (lo_a + hi_a + lo_b + hi_b) / (2 * (na + nb))
            if gap > z * np.sqrt(p * (1 - p) * (1 / na + 1 / nb)) + 1 / min(na, nb):
                return False
    return True


def _seen(row, v):
    """(least, most) times the value v was seen in the entry of a spread ``row``."""
    counts = row[TOP:2 * TOP]
    for x, c in zip(row[:TOP], counts):
        if c and x == v:
            return c, c
    kept = counts[counts > 0]
    return 0.0, (min(row[2 * TOP], kept.min()) if len(kept) == TOP else 0.0)


def _digest(parts) -> np.ndarray:
    """The SHA-256 of the calls' results, as 32 numbers: two runs give the same digest exactly when they
    give the same results, and the student copy's recording holds 32 numbers, not every result."""
    h = hashlib.sha256()
    for p in parts:
        a = np.ascontiguousarray(np.asarray(p, dtype=np.float64).ravel())
        h.update(str(a.size).encode() + b":" + a.tobytes())
    return np.frombuffer(h.digest(), dtype=np.uint8).astype(np.float64)


def _equal(value, want) -> bool:
    try:
        value = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return value.shape == want.shape and bool(np.array_equal(value, want))
