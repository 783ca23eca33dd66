"""Batches made in a process of their own, for a GPU step that needs the interpreter.

At the lab sizes a GPU step is bound by its launches: the thread that launches the kernels
is busy the whole step, so a batch made by a thread beside it (``Prefetch``) takes the
interpreter away from the launches for as long as masking and padding last, a few ms of every
step.  A second process has an interpreter of its own.  ``ProcessPrefetch`` starts one, hands
it the stream, pickled, and keeps it ``AHEAD`` batches ahead.  The batches come back in the
stream's order, each with the stream's position after it, so a run makes the same batches and
saves the same positions as with ``Prefetch`` or with the stream alone.

A batch's arrays travel through memory the two processes share: the worker writes them into
one of ``AHEAD`` slots and sends a few hundred bytes saying where; the run copies them out
(about 0.1 ms for 128 x 128) before it asks for the next batch, which is the only moment the
worker may write that slot again.  Sent through the socket, the same 0.5 MB took 0.5-3.5 ms of
the run's time, in reads that wait for the worker's writes.

The worker is a fresh interpreter, not a fork: the run may already hold a CUDA context and
threads, and a fork copies their locks in whatever state they are.  It ignores the signals
a terminal sends to the whole process group (Ctrl-C, a closed terminal), because the run
decides when to stop and saves first; and it ends when the run closes its end of the socket,
which the operating system does for the run however it ends, a kill included.
"""
from __future__ import annotations

import mmap
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from multiprocessing.connection import Connection

import numpy as np

from ..launcher import outside_the_job

AHEAD = 2          # batches asked for before they are needed: one ready, one in the making
# the worker's interpreter: the entry point imported by name, so that nothing of the run's own
# __main__ (a script, a notebook) is run again there
_WORKER = "import sys; from minibert.train.data_worker import serve; serve(*map(int, sys.argv[1:]))"


class DataWorkerError(RuntimeError):
    """The data process failed or is gone; the message says which, and what to do."""


class ProcessPrefetch:
    """``Prefetch``'s interface (``next_batch``, ``state_dict``, ``wait_s``, ``close``), its batches
    made by another process.  ``stream`` stays here unchanged: its dataset for whoever reads it."""

    def __init__(self, stream, ahead: int = AHEAD):
        self.stream, self.wait_s = stream, 0.0
        self._state = stream.state_dict()
        # a slot holds a batch with room to spare: one made here, with a generator of its own, is measured
        probe = stream.dataset.collate(stream.dataset.instances[:stream.batch_size], np.random.default_rng(0))
        slot = 2 * sum(a.nbytes for a in probe.values() if isinstance(a, np.ndarray)) + 65536
        # a run started with stdout or stderr closed gives the worker /dev/null there, so that no file
        # the worker opens becomes its stderr (which C libraries write to, whatever Python does)
        out, err = (None if _is_open(n) else subprocess.DEVNULL for n in (1, 2))
        self._shared, fd = _shared_memory(ahead * slot)
        ours, theirs = (_above_stdio(s.detach()) for s in socket.socketpair())
        # the worker imports the same minibert as this process, wherever that was found; under
        # mpiexec it is no rank of the job
        env = dict(outside_the_job(os.environ), PYTHONPATH=os.pathsep.join(sys.path))
        self._proc = subprocess.Popen([sys.executable, "-c", _WORKER, str(theirs), str(fd), str(slot), str(ahead)],
                                      pass_fds=(theirs, fd), env=env, stdin=subprocess.DEVNULL,
                                      stdout=out, stderr=err)
        os.close(theirs)
        os.close(fd)
        self._conn = Connection(ours)
        # the stream can be tens of MB: sent by a thread, so the run sets up while the worker starts
        payload = pickle.dumps((stream, ahead), protocol=pickle.HIGHEST_PROTOCOL)
        self._sending = threading.Thread(target=self._send_quietly, args=(payload,), daemon=True)
        self._sending.start()

    def _send_quietly(self, payload: bytes) -> None:
        try:
            self._conn.send_bytes(payload)
        except OSError:       # the worker is gone: next_batch says so, with its exit code
            pass

    def next_batch(self) -> dict:
        t0 = time.perf_counter()
        try:
            message = self._conn.recv()
        except (EOFError, OSError):
            raise self._gone() from None
        if message[0] == "error":
            raise DataWorkerError(f"making a batch failed in the data process (pid {self._proc.pid}):\n"
                                  f"{message[1]}")
        _, pickled, where, self._state = message
        # copied out of the slot, which the worker may fill again once asked for the next batch
        if where:      # one copy of the slot's used part, and the arrays its views
            first, end = where[0][0], where[-1][0] + where[-1][1]
            copy = memoryview(np.frombuffer(self._shared, np.uint8, end - first, first).copy())
            batch = pickle.loads(pickled, buffers=[copy[i - first:i - first + n] for i, n in where])
        else:
            batch = pickle.loads(pickled)
        self.wait_s += time.perf_counter() - t0
        self._sending.join()           # (long done) one writer on the socket at a time
        try:
            self._conn.send(1)         # one more batch, to replace the one handed out
        except OSError:    # the worker is gone or going: the next call says why, once what it sent is read
            pass
        return batch

    def _gone(self) -> DataWorkerError:
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        how = "stopped answering" if code is None else (
            f"was killed by signal {-code}" if code < 0 else f"exited with code {code}")
        return DataWorkerError(f"the data process (pid {self._proc.pid}) that makes the batches {how}; "
                               f"if this repeats, make the batches in a thread: --data-worker thread")

    def state_dict(self) -> dict:
        return dict(self._state)

    def close(self) -> None:
        """The worker sees its socket closed and ends; one that does not within 5 s is killed."""
        self._conn.close()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._sending.join(timeout=5)
        self._shared.close()


def _shared_memory(size: int) -> tuple[mmap.mmap, int]:
    """``size`` bytes of memory another process can map: (the mapping, a file descriptor to hand it)."""
    if hasattr(os, "memfd_create"):        # Linux: memory with no name in any file system
        fd = os.memfd_create("minibert-batches")
    else:
        with tempfile.TemporaryFile() as f:   # elsewhere: a file deleted at once, kept by its descriptor
            fd = os.dup(f.fileno())
    fd = _above_stdio(fd)
    os.ftruncate(fd, size)
    return mmap.mmap(fd, size), fd


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def _above_stdio(fd: int) -> int:
    """``fd``, moved above 0-2 if it is one of them: in a run started with stderr closed (``2>&-``)
    the first file opened is descriptor 2, which a child inherits as its stderr."""
    if fd > 2:
        return fd
    import fcntl      # (POSIX, as the whole of this module)
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return moved


def serve(sock: int, fd: int, slot: int, slots: int) -> None:
    """The worker: receive (stream, ahead), then send batches, one more for each one asked for.

    Batch k goes to slot k mod ``slots``.  With ``ahead`` batches asked for at the start and one
    more after each one copied out, batch k is made once k + 1 - ahead batches have been copied,
    so at most the ``ahead - 1`` batches before it are still to be read, each in a slot of its
    own: ``ahead`` slots never overwrite a batch the run has not copied.
    """
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    conn, shared = Connection(sock), mmap.mmap(fd, slot * slots)
    os.close(fd)
    try:
        stream, owed = pickle.loads(conn.recv_bytes())
        for k in range(sys.maxsize):
            if owed == 0:
                owed += conn.recv()
            try:
                message = _message(stream, shared, (k % slots) * slot, slot)
            except Exception:  # noqa: BLE001 (said in full to the run, which raises it)
                conn.send(("error", traceback.format_exc()))
                return
            conn.send(message)
            owed -= 1
    except (EOFError, OSError):     # the run closed its end: it is over
        return


def _message(stream, shared: mmap.mmap, start: int, size: int) -> tuple:
    """The next batch written into shared[start:start + size]: its pickle without the arrays' bytes, and
    where those are.  A batch larger than the slot (it never is) travels whole in the pickle instead."""
    batch = stream.next_batch()
    buffers = []
    pickled = pickle.dumps(batch, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    if sum(r.nbytes for r in raws) > size:
        return "batch", pickle.dumps(batch, protocol=5), [], stream.state_dict()
    where, at = [], start
    for raw in raws:
        shared[at:at + raw.nbytes] = raw
        where.append((at, raw.nbytes))
        at += raw.nbytes
    return "batch", pickled, where, stream.state_dict()
