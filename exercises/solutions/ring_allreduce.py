"""Solution: the two phases of the ring allreduce over R simulated ranks."""
import numpy as np


def reduce_scatter(chunks):
    R = len(chunks)
    state = [[c.copy() for c in row] for row in chunks]
    for s in range(R - 1):
        # all ranks send at once: take every message before anyone receives
        messages = [(r, (r - s) % R, state[r][(r - s) % R].copy()) for r in range(R)]
        for r, c, data in messages:
            state[(r + 1) % R][c] = state[(r + 1) % R][c] + data
    return state


def all_gather(chunks):
    R = len(chunks)
    state = [[c.copy() for c in row] for row in chunks]
    for s in range(R - 1):
        messages = [(r, (r + 1 - s) % R, state[r][(r + 1 - s) % R].copy()) for r in range(R)]
        for r, c, data in messages:
            state[(r + 1) % R][c] = data
    return state
