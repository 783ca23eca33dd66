"""CUDA graph capture on the CPU stand-in: what a captured step may not do, and what its replay redoes.

While a CUDA stream captures, nothing runs: every launch is recorded into a graph, and
``graph.launch()`` later runs them all again on the same memory.  So a step captured into a
graph must not read a device value (the value does not exist yet), copy host data to the
device (the copy would not be redone), or call cuBLAS through CuPy (CuPy refuses); and a
number given to a kernel as a scalar is frozen into the graph, while an array's contents are
read again at each replay.

Here the launches do run while they are recorded (the stand-in has no other way to know what
they make), and each is also kept as a function that redoes it on the same arrays, with the
same scalars: ``Graph.launch`` calls them in order.  So that the capture changes nothing, as on a
GPU, every device array made before it is put back as it was when it ends, and every one made
during it is filled with garbage (NaN, or all bits set): its contents exist only once the graph
is launched.  A read, a host-to-device copy or a matmul during the capture raises, as on a GPU.
``tests/test_sync_free_step.py``'s ``Device`` arrays and the kernels of ``tests/cuda_on_cpu.py``
report their launches here (``record``) and their memory (``register``).
"""
from __future__ import annotations

import weakref
from contextlib import contextmanager

import numpy as np

_recording = []      # the capture in progress: a list of replay functions, or nothing
_owners = weakref.WeakValueDictionary()     # id -> a live array that owns device memory
_saved = []          # the capture in progress: (array, its contents when it began)


def _owner(a):
    while isinstance(getattr(a, "base", None), np.ndarray):
        a = a.base
    return a


def register(a) -> None:
    """``a`` (a device array, or a view of one) holds device memory: a capture must leave it as it was."""
    o = _owner(a)
    if id(o) not in _owners:
        _owners[id(o)] = o


def _garbage(a):
    flat = a.view(np.ndarray).reshape(-1)
    if a.dtype.kind == "f":
        flat.fill(np.nan)
    elif a.dtype.kind in "iub" and flat.flags.c_contiguous:
        flat.view(np.uint8).fill(0xFF)


class CaptureError(RuntimeError):
    """What CUDA (or CuPy) refuses while a stream captures."""


def capturing() -> bool:
    return bool(_recording)


def record(replay) -> None:
    """A launch was made: ``replay()`` makes it again."""
    if _recording:
        _recording[-1].append(replay)


def refuse(what: str) -> None:
    """Raise if a stream is capturing: ``what`` cannot be part of a graph."""
    if _recording:
        raise CaptureError(f"{what} during stream capture: not allowed in a CUDA graph")


class Graph:
    """The launches of one capture; ``launch`` runs them again, in order."""

    def __init__(self, launches):
        self.launches = launches

    def launch(self, stream=None):
        refuse("a graph launched")
        for replay in self.launches:
            replay()


class Stream:
    """``cupy.cuda.Stream``: a context that makes it current, and capture."""
    current = None

    def __init__(self, null=False, non_blocking=False, ptds=False):
        self.ptr, self._outer = 1 if null else id(self), []

    def __enter__(self):
        self._outer.append(Stream.current)
        Stream.current = self
        return self

    def __exit__(self, *exc):
        Stream.current = self._outer.pop()
        return False

    def begin_capture(self, mode=None):
        if _recording:
            raise CaptureError("a stream is already capturing")
        if self.ptr == 1:
            raise CaptureError("cannot capture on the default (legacy) stream")
        # (plain copies: a device array's copy would be one more array made during the capture)
        _saved[:] = [(a, np.array(a.view(np.ndarray), copy=True)) for a in list(_owners.values())
                     if a.flags.writeable]
        _recording.append([])

    def end_capture(self) -> Graph:
        if not _recording:
            raise CaptureError("end_capture without begin_capture")
        graph = Graph(_recording.pop())          # (first: the restoring below is no launch of the graph)
        before = {id(a) for a, _ in _saved}
        for a in list(_owners.values()):
            if id(a) not in before and a.flags.writeable:
                _garbage(a)
        for a, contents in _saved:
            np.copyto(a.view(np.ndarray), contents)
        _saved.clear()
        return graph

    def is_capturing(self) -> bool:
        return bool(_recording)

    def synchronize(self):
        refuse("a stream synchronized")


def get_current_stream():
    return Stream.current or NULL


class MemoryPool:
    """``cupy.cuda.MemoryPool``: here NumPy allocates, and an array lives as long as it is referenced."""

    def malloc(self, size):
        raise NotImplementedError("the stand-in's arrays are NumPy's")


@contextmanager
def using_allocator(allocator=None):
    yield


NULL = Stream(null=True)
