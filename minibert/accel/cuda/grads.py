"""A backward's parameter gradients added into their buffers in one launch, or a few.

A training step adds some forty gradients (each weight, bias and LayerNorm of the model) into
views of its flat gradient buffer, and each add was a launch of its own.  At small sizes a GPU
step's time is its launches, so ``add_grads`` makes one launch of ``source.ADD_MANY`` for all of
them: a table on the device gives each pair's two addresses and where its elements start, and
each thread finds its pair by a binary search in the table.

Two adds into the same memory (the word embeddings take the tied MLM decoder's gradient and
their own) must not share a launch, where they would race.  The pairs are cut, in order, into
groups whose destinations do not overlap, one launch each, so that every element receives its
adds in the order they were asked for.  The sums are those of ``dst += src``, bit for bit (a float16
source, mixed precision's weight gradient, is widened exactly on the way).
"""
from __future__ import annotations

import numpy as np

from ... import ops as ref
from . import graph, kernels, source
from .kernels import applies

THREADS, MAX_BLOCKS = 256, 4096     # a grid-stride loop: a larger model loops more, with no more blocks


def sum_of_squares(g):
    """sum(g * g) of a 1-D array on the device, a 0-d array there, in one launch: the gradients' norm,
    squared, for ``optim.clip_grad_norm``.  (CuPy's dot is cuBLAS's, which a graph's capture refuses.)"""
    return kernels.reductions()["sum_of_squares"](g)


def _address(a) -> int:
    """Where an array's first element is: a CuPy array's device pointer (the CPU stand-in's NumPy arrays:
    their host address)."""
    return a.data.ptr if hasattr(a.data, "ptr") else a.ctypes.data


def groups(dsts) -> list[list[int]]:
    """The indices of ``dsts`` cut, in order, into runs whose destinations do not overlap in memory."""
    runs, spans = [], []
    for k, d in enumerate(dsts):
        lo = _address(d)
        hi = lo + d.nbytes
        if not runs or any(lo < b and a < hi for a, b in spans):
            runs.append([])
            spans = []
        runs[-1].append(k)
        spans.append((lo, hi))
    return runs


def add_grads(dsts, srcs):
    """``ops.add_grads``: dst += src for each pair, in order, one launch per group of ``groups``; a float16
    src is widened in the kernel.  Pairs the kernel does not take (another dtype, a source not C-ordered,
    shapes that differ) go to the reference."""
    pairs = [(d, s) for d, s in zip(dsts, srcs) if d.size]
    if not pairs:
        return
    dtype = pairs[0][0].dtype
    if not all(applies(d) and d.dtype == dtype and d.shape == s.shape and kernels.on_device(s)
               and s.flags.c_contiguous and s.dtype in (dtype, np.float16) for d, s in pairs):
        return ref.add_grads(dsts, srcs)
    if graph.capturing():       # the table is copied from the host, which a graph cannot hold; in a
        return ref.add_grads(dsts, srcs)    # graph the adds' launches cost the host nothing: the same sums
    import cupy
    runs = groups([d for d, _ in pairs])
    table, where = [], []
    for run in runs:            # one table for every group, copied to the device at once
        where.append(len(table))
        start = 0
        for k in run:
            d, s = pairs[k]
            table += [_address(d), _address(s), start, int(s.dtype == np.float16)]
            start += d.size
        where.append(start)     # the group's total, kept aside: not part of the table the kernel reads
    device_table = cupy.asarray(np.array(table, dtype=np.int64))
    for run, (offset, total) in zip(runs, zip(where[::2], where[1::2])):
        blocks = int(min(MAX_BLOCKS, (total + THREADS - 1) // THREADS))
        kernels.kernel("add_many", source.ADD_MANY, dtype)(
            (blocks,), (THREADS,), (device_table[offset:], np.int32(len(run)), np.int64(total)))
