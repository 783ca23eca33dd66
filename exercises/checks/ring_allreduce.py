"""The ring allreduce over simulated ranks: every copy that reduce-scatter and all-gather leave.

The main inputs are numbers that say where they come from: rank r's chunk c is filled with
(R + 1)^(r + R c) times 1, 2, 3, ..., so every sum of whole chunks is exact and can be read
back digit by digit (base R + 1) into the chunks and ranks it holds.  A copy that holds the
wrong ones says which messages went astray.  Random chunks of unequal lengths follow.
"""
from __future__ import annotations

import numpy as np

from ..calls import call
from ..cases import ring_allreduce as cases
from ..harness import compare
from ..report import Abort, Report

T = cases.TABLE
TOL = 1e-12


def coded(R, length=3):
    """chunks[r][c] = (R + 1)^(r + R c) * (1, 2, ..., length): each (rank, chunk) one digit in base R + 1."""
    return [[float(R + 1) ** (r + R * c) * np.arange(1.0, length + 1) for c in range(R)] for r in range(R)]


def random_chunks(rng, R, length):
    """Each rank's vector of ``length`` numbers cut as np.array_split cuts it (lengths differ by one at most)."""
    return [np.array_split(rng.standard_normal(length), R) for _ in range(R)]


def after_scatter(chunks):
    """What reduce-scatter leaves: rank r's copy of chunk c holds the chunks c of ranks c, c + 1, ..., r (mod R),
    added in the ring's order (each receiver adds the message to its own chunk)."""
    R = len(chunks)
    state = [[None] * R for _ in range(R)]
    for c in range(R):
        total = chunks[c][c].copy()
        state[c][c] = total
        for k in range(1, R):
            r = (c + k) % R
            total = chunks[r][c] + total
            state[r][c] = total
    return state


def after_gather(chunks):
    """What all-gather leaves: on every rank, chunk c is the array its owner, rank (c - 1) % R, held."""
    R = len(chunks)
    return [[chunks[(c - 1) % R][c] for c in range(R)] for _ in range(R)]


def flat(state):
    return np.concatenate([np.asarray(a, dtype=np.float64).ravel() for row in state for a in row])


def copies(chunks):
    return [[a.copy() for a in row] for row in chunks]


def _state(r: Report, func: str, result, like):
    """The student's result as R lists of R float64 arrays shaped as ``like``'s, or a FAIL and Abort."""
    R = len(like)
    layout = "return the chunks in the layout they came in: result[r][c] is rank r's copy of chunk c"
    if not isinstance(result, (list, tuple)) or len(result) != R \
            or any(not isinstance(row, (list, tuple)) or len(row) != R for row in result):
        r.fail(f"{func} should return {R} lists (one per rank) of {R} chunks, got {_kind(result)}", layout)
        raise Abort
    out = []
    for k, (row, ref) in enumerate(zip(result, like)):
        new = []
        for c, (a, b) in enumerate(zip(row, ref)):
            try:
                a = np.asarray(a, dtype=np.float64)
            except (TypeError, ValueError):
                a = None
            if a is None or a.shape != b.shape:
                r.fail(f"{func}: rank {k}'s chunk {c} should be an array of shape {b.shape}, got "
                       f"{getattr(a, 'shape', type(a).__name__)}", layout + "; a chunk keeps its length")
                raise Abort
            new.append(a)
        out.append(new)
    return out


def _kind(x):
    if isinstance(x, (list, tuple)):
        return f"a {type(x).__name__} of {len(x)}" + (f" (its first item a {type(x[0]).__name__})" if x else "")
    return f"a {type(x).__name__}"


def _check_scatter(r: Report) -> None:
    R = 4
    given = coded(R)
    got = _state(r, "reduce_scatter", call(r, "reduce_scatter", copies(given)), given)
    want = after_scatter(given)
    owned = lambda s: np.concatenate([np.asarray(s[k][(k + 1) % R], dtype=np.float64) for k in range(R)])
    compare(r, f"reduce-scatter, {R} ranks: the chunks owned", owned(got), owned(want), TOL,
            hint=cases.INDEX, known=T.known(lambda m: owned(m.reduce_scatter(copies(given)))),
            explain=lambda _: describe(got, want, R, "reduce-scatter", [(k, (k + 1) % R) for k in range(R)]))
    compare(r, f"reduce-scatter, {R} ranks: every partial sum", flat(got), flat(want), TOL,
            known=T.known(lambda m: flat(m.reduce_scatter(copies(given)))),
            explain=lambda _: describe(got, want, R, "reduce-scatter"))
    rng = np.random.default_rng(11)
    for n, length in ((5, 23), (2, 7)):
        x = random_chunks(rng, n, length)
        got = _state(r, "reduce_scatter", call(r, "reduce_scatter", copies(x)), x)
        compare(r, f"reduce-scatter, {n} ranks, {length} numbers each", flat(got), flat(after_scatter(x)), TOL,
                known=T.known(lambda m, x=x: flat(m.reduce_scatter(copies(x)))))


def _check_gather(r: Report) -> None:
    rng = np.random.default_rng(13)
    R = 4
    given = after_scatter(coded(R))
    got = _state(r, "all_gather", call(r, "all_gather", copies(given)), given)
    want = after_gather(given)
    compare(r, f"all-gather, {R} ranks: every copy", flat(got), flat(want), TOL,
            known=T.known(lambda m: flat(m.all_gather(copies(given)))),
            explain=lambda _: describe(got, want, R, "all-gather"))
    given = after_scatter(random_chunks(rng, 5, 23))
    got = _state(r, "all_gather", call(r, "all_gather", copies(given)), given)
    want = after_gather(given)
    same = all(np.array_equal(a, b) for row, ref in zip(got, want) for a, b in zip(row, ref))
    if same:
        r.ok("all-gather, 5 ranks, 23 numbers each: every copy is its owner's, bit for bit")
        return
    compare(r, "all-gather, 5 ranks, 23 numbers each", flat(got), flat(want), TOL,
            known=T.known(lambda m: flat(m.all_gather(copies(given)))))
    if r.status != "fail":
        r.fail("all-gather, 5 ranks: the copies are close to the owners' chunks but not the same bits",
               "copy the complete chunk as it arrives (replace your copy with the message): adding again, in "
               "another order on every rank, gives every rank slightly different weights, which then drift apart")


# ------------------------------------------------------------------ reading a coded copy back
def contents(value, R):
    """{(rank, chunk): times} held in one copy of coded(R)'s numbers (its first entry), or None if it is no such sum."""
    v = float(value)
    if not np.isfinite(v) or v < 0 or abs(v - round(v)) > 1e-6 * max(1.0, abs(v)):
        return None
    n, held = int(round(v)), {}
    for p in range(R * R):
        n, digit = divmod(n, R + 1)
        if digit:
            held[(p % R, p // R)] = digit
    return None if n else held


def _words(held):
    parts = []
    for chunk in sorted({c for _, c in held}):
        ranks = ", ".join(f"{k}" + (f" (x{held[(k, c)]})" if held[(k, c)] > 1 else "")
                          for k, c in sorted(held, key=lambda kc: kc[0]) if c == chunk)
        parts.append(f"chunk {chunk} of rank{'s' if len([1 for _, c in held if c == chunk]) > 1 else ''} {ranks}")
    return " and ".join(parts) if parts else "nothing"


def describe(got, want, R, phase, where=None):
    """Which chunks of which ranks the first wrong copy holds (of those ``where`` names: (rank, chunk) pairs),
    against what the ring leaves there."""
    for k, c in where or [(k, c) for k in range(R) for c in range(R)]:
        if not np.array_equal(got[k][c], want[k][c]):
            mine, right = contents(got[k][c][0], R), contents(want[k][c][0], R)
            if mine is None or not np.allclose(got[k][c], got[k][c][0] * np.arange(1, len(got[k][c]) + 1)):
                return (f"after {phase}, rank {k}'s copy of chunk {c} is no sum of whole chunks (each rank's chunk "
                        f"is added as it is, never scaled or divided); it should hold {_words(right)}")
            return (f"after {phase}, rank {k}'s copy of chunk {c} holds {_words(mine)}; the ring leaves "
                    f"{_words(right)} there")
    return None


# what each part checks: a notebook checks one function at a time (checks/__init__.py)
PARTS = ((("reduce_scatter",), _check_scatter), (("all_gather",), _check_gather))
