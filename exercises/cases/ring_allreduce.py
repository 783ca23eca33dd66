"""The ring allreduce's usual mistakes, over R simulated ranks (notebook 11's ring).

chunks[r][c] is rank r's chunk c.  Every step, every rank r sends one chunk to its right
neighbour (r + 1) % R, all at once.  Reduce-scatter, steps s = 0 .. R - 2: rank r sends its
chunk (r - s) % R, the receiver ADDS it to its copy; then rank r's copy of chunk c holds the
chunks c of ranks c, c + 1, ..., r (mod R), and chunk (r + 1) % R is complete.  All-gather,
steps s = 0 .. R - 2: rank r sends its chunk (r + 1 - s) % R, the receiver REPLACES its copy.
"""
from __future__ import annotations

import numpy as np

from .table import Table


def _ring(index, add, to=1, steps=lambda R: R - 1, first=0, own_twice=False, from_input=False, average=False):
    """One phase of the ring, or one of its usual mistakes.

    index(r, s, R): the chunk rank r sends at step s; add: the receiver adds (else replaces);
    to: +1 the right neighbour, -1 the left; own_twice: the receiver adds its own original chunk
    again; from_input: the messages are read from the chunks given, not from the running state;
    average: the complete chunks are divided by R at the end.
    """
    def phase(chunks):
        R = len(chunks)
        state = [[np.array(c, copy=True) for c in row] for row in chunks]
        for s in range(first, steps(R)):
            source = chunks if from_input else state
            # every rank sends at once: all messages are taken before any rank receives
            messages = [(r, index(r, s, R), np.array(source[r][index(r, s, R)], copy=True)) for r in range(R)]
            for r, c, data in messages:
                j = (r + to) % R
                if not add:
                    state[j][c] = data
                elif own_twice:
                    state[j][c] = state[j][c] + data + chunks[j][c]
                else:
                    state[j][c] = state[j][c] + data
        if average:
            for r in range(R):
                state[r][(r + 1) % R] = state[r][(r + 1) % R] / R
        return state
    return phase


def _scatter(r, s, R):
    return (r - s) % R


def _gather(r, s, R):
    return (r + 1 - s) % R


TABLE = Table("ring_allreduce", reduce_scatter=_ring(_scatter, add=True), all_gather=_ring(_gather, add=False))
case = TABLE.case

INDEX = ("in reduce-scatter step s, rank r sends its chunk (r - s) % R: at step 0 its own chunk r, then each step "
         "the chunk it has just added to; rank r then ends with chunk (r + 1) % R complete")
STALE = ("forward the chunk just received: in all-gather step s rank r sends chunk (r + 1 - s) % R (at step 0 the "
         "complete chunk it owns, then the one it received in the step before), read from the current state, "
         "not from the chunks it was given")

# ---- reduce-scatter
case("chunk index off by one", INDEX, reduce_scatter=_ring(lambda r, s, R: (r - s - 1) % R, add=True))
case("the same chunk on every rank", INDEX + ". Every rank sends a different chunk in each step, so every link "
                                     "carries different numbers", reduce_scatter=_ring(lambda r, s, R: s % R, add=True))
case("sent to the left, wrong owner", "send to the right neighbour, (r + 1) % R: in this ring rank r ends with "
                                      "chunk (r + 1) % R complete, not (r - 1) % R",
     reduce_scatter=_ring(lambda r, s, R: (r + s) % R, add=True, to=-1))
case("R steps instead of R - 1", "reduce-scatter takes R - 1 steps: after them every chunk has passed through every "
                                 "rank once; one step more adds a rank's chunk to a sum that already holds it",
     reduce_scatter=_ring(_scatter, add=True, steps=lambda R: R))
case("own chunk added twice", "the receiver's copy already holds its own chunk: add the message to it, nothing more "
                              "(copy[c] + message)", reduce_scatter=_ring(_scatter, add=True, own_twice=True))
case("forwards the original chunk", "send the running sum: in step s rank r forwards its copy of chunk (r - s) % R "
                                    "as it is now, with what it received in the step before, not the chunk it was "
                                    "given", reduce_scatter=_ring(_scatter, add=True, from_input=True))
case("averaged", "the allreduce here is a sum, not a mean: each rank's loss is already divided by the global batch's "
                 "counts (loss_counts), so the gradients simply add up; do not divide by R",
     reduce_scatter=_ring(_scatter, add=True, average=True))

# ---- all-gather
case("all-gather adds", "in the all-gather the receiver REPLACES its copy with the complete chunk: its own copy is a "
                        "partial sum, already counted in the complete one", all_gather=_ring(_gather, add=True))
case("all-gather with the reduce-scatter's index", STALE, all_gather=_ring(_scatter, add=False))
case("all-gather forwards what it was given", STALE, all_gather=_ring(_gather, add=False, from_input=True))
case("all-gather one step short", "all-gather takes R - 1 steps too (s = 0 .. R - 2): a complete chunk must travel "
                                  "past R - 1 ranks", all_gather=_ring(_gather, add=False, first=1))

TABLE.variant("a step's messages sent one rank after the other, in place",
              reduce_scatter=lambda chunks: _in_place(chunks, True), all_gather=lambda chunks: _in_place(chunks, False))


def _in_place(chunks, add):
    """Right, written otherwise: the given arrays updated in place, rank after rank within a step.

    Safe here: in a step rank r receives chunk (r - 1 - s) and sends chunk (r - s), never the one it receives.
    """
    R = len(chunks)
    for s in range(R - 1):
        for r in range(R):
            c = (r - s) % R if add else (r + 1 - s) % R
            j = (r + 1) % R
            if add:
                chunks[j][c] += chunks[r][c]
            else:
                chunks[j][c] = chunks[r][c].copy()
    return chunks
