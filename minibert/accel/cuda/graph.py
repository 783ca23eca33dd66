"""GPU work captured once into a CUDA graph, then replayed with one launch.

At the lab sizes a training step is bound by its launches: each costs CuPy some
microseconds of host time, far more than the GPU needs to run a small kernel.  A CUDA
graph records a sequence of launches once (stream capture) and replays all of them with a
single call, each kernel with the same arguments: the same arrays, whose contents may have
changed, and the same scalars, which may not.  So what changes from one replay to the next
(the batch, the learning rate, dropout's key) must be read from device memory that the host
fills before the replay, and the captured work must not

* read a device value on the host (``float(loss)``: nothing has run yet while it is captured),
* copy host data to the device (the copy would not be part of the graph),
* call cuBLAS through CuPy, which refuses while a stream captures: the products go through
  ``cublas.py`` instead (``gemm.DIRECT``),
* change its shapes: a graph is one sequence of launches for one set of shapes.

Memory: a graph replays its kernels on the addresses they were captured with, so the memory the
captured work allocates must stay the graph's, also the arrays Python frees once the capture is
over (the forward's caches): it comes from a memory pool of the graph's own, which nothing else
allocates from and ``free_all_blocks`` on CuPy's default pool does not touch.  The arrays the work
returns (``outputs``) are rewritten by every replay.
"""
from __future__ import annotations

from contextlib import contextmanager

from . import gemm


_rehearsing = [False]


def capturing() -> bool:
    """Whether the current stream is capturing a graph, or the work is a rehearsal of one (``rehearsal``):
    an op whose usual way would copy from the host takes another then (``grads.add_grads``)."""
    import cupy
    return _rehearsing[0] or cupy.cuda.get_current_stream().is_capturing()


@contextmanager
def direct_products():
    """Every product by ``cublas.py`` inside the block: the work that warms up a graph runs so, and
    its capture, so that a replay computes what the steps before it did."""
    before, gemm.DIRECT = gemm.DIRECT, True
    try:
        yield
    finally:
        gemm.DIRECT = before


@contextmanager
def rehearsal():
    """The work before a capture, run as the capture will run it: its products by ``cublas.py`` and
    its ops on the ways they take in a graph, so that every kernel is compiled (and loaded) before
    the capture, and the capture computes what the steps before it did."""
    before, _rehearsing[0] = _rehearsing[0], True
    try:
        with direct_products():
            yield
    finally:
        _rehearsing[0] = before


class Graph:
    """``fn()`` captured once; ``replay()`` runs it again and returns what the capture returned."""

    def __init__(self, fn):
        import cupy
        from . import cublas
        cublas.handle()                                   # made before the capture: it allocates
        cupy.cuda.get_current_stream().synchronize()      # the work before the capture is done
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.pool = cupy.cuda.MemoryPool()                # the graph's memory, for as long as it lives
        with direct_products(), self.stream, cupy.cuda.using_allocator(self.pool.malloc):
            self.stream.begin_capture()
            try:
                self.outputs = fn()
            except BaseException:
                try:
                    self.stream.end_capture()             # a capture that failed is ended too
                except Exception:                         # (CUDA may call it invalidated): fn's error is the one
                    pass
                raise
            self.graph = self.stream.end_capture()

    def replay(self):
        """Launch the graph on the current stream (after the work queued there before it)."""
        import cupy
        self.graph.launch(cupy.cuda.get_current_stream())
        return self.outputs
