# slip: the reduce-scatter loop runs R steps (range(R)) instead of R - 1, so an extra round adds each owner's complete chunk into its neighbour's copy of that neighbour's own-index chunk, a wrong partial sum (the all-gather still ends right)
# names it: r - 1 steps | range(r - 1) | one step too many | extra step | steps & r - 1
"""Exercise: the ring allreduce, simulated: R ranks add up their gradients, each talking to one neighbour.

Every rank r holds its gradient cut into R chunks: chunks[r][c] is rank r's
chunk c (np.array_split(vector, R): the chunks may differ in length by one).
Every rank needs, for every chunk c, the sum over the ranks of their chunks c.
The ranks form a ring: in every step every rank r sends ONE chunk to its
right neighbour, (r + 1) % R, and receives one from its left neighbour, all at
the same time (take every message of a step before any rank receives it).

    reduce-scatter, steps s = 0, 1, ..., R - 2:
        rank r sends its chunk (r - s) % R; the receiver ADDS it to its copy.
        Afterwards rank r's copy of chunk c holds the chunks c of ranks
        c, c + 1, ..., r (mod R): rank r owns the complete chunk (r + 1) % R.

    all-gather, steps s = 0, 1, ..., R - 2:
        rank r sends its chunk (r + 1 - s) % R (at step 0 the one it owns);
        the receiver REPLACES its copy with it.  Afterwards every rank holds
        every complete chunk, the same bits on every rank.

Each rank sends 2 (R - 1) chunks of about S / R numbers: nearly 2 S, however
many ranks there are.  The checker looks at every copy each phase leaves (the
partial sums too: they show which messages went where), with R = 2, 4 and 5.

Check your work with:   python -m exercises check ring_allreduce
"""
import numpy as np


def reduce_scatter(chunks):
    """The R - 1 steps of the reduce-scatter.

    Args:
        chunks: a list of R lists of R 1-D float arrays; chunks[r][c] is rank r's chunk c

    Returns:
        the chunks after the last step, in the same layout (new arrays, or the given ones
        updated in place): result[r][(r + 1) % R] is the sum of every rank's chunk (r + 1) % R,
        and result[r][c] the sum of the chunks c of ranks c, c + 1, ..., r (mod R)
    """
    # TODO
    R = len(chunks)
    state = [[np.array(c, copy=True) for c in rank] for rank in chunks]
    for s in range(R):
        # every message of this step first, then deliver them
        messages = [(r, (r - s) % R, state[r][(r - s) % R].copy()) for r in range(R)]
        for r, c, data in messages:
            dst = (r + 1) % R
            state[dst][c] = state[dst][c] + data
    return state


def all_gather(chunks):
    """The R - 1 steps of the all-gather.

    Args:
        chunks: what reduce_scatter returns: rank r owns the complete chunk (r + 1) % R;
            its other copies are partial sums, to be replaced

    Returns:
        the chunks after the last step, in the same layout: result[r][c] is the complete
        chunk c on every rank r, the owner's array copied bit for bit
    """
    # TODO
    R = len(chunks)
    state = [[np.array(c, copy=True) for c in rank] for rank in chunks]
    for s in range(R - 1):
        messages = [(r, (r + 1 - s) % R, state[r][(r + 1 - s) % R].copy()) for r in range(R)]
        for r, c, data in messages:
            state[(r + 1) % R][c] = data
    return state
