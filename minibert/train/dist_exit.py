"""How the processes of a data-parallel job leave it: after an error, or a signal.

One process: its exit status, as ever.  Several: an error that every rank raised
is printed once, by rank 0, and the job finishes MPI with rank 0's status; an error
or signal of one rank alone aborts the whole job, since the other ranks would wait
for it forever in the next collective.
"""
from __future__ import annotations

import sys
import time

from ..launcher import launched_rank
from .dist import current
from .errors import AgreedError


def abort_on_crash() -> None:
    """An unexpected error in one process of several: its traceback, then the whole job ended."""
    comm = current()
    if comm.size > 1:
        import traceback
        traceback.print_exc()
        _abort(comm, 1)


def _abort(comm, status: int) -> None:
    """End the whole job, once what this process printed has left it.

    An abort makes the launcher end every process at once: a line still in this process's
    buffer, or not yet forwarded by the launcher, would be lost with it (a rank's one-line
    error came out empty now and then). So stdout and stderr are flushed, and the launcher
    given a moment to pass them on, first.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    time.sleep(0.5)
    comm.comm.Abort(status)


def leave(exc: BaseException, report, status: int) -> int:
    """How a process of a data-parallel job leaves after ``exc``; returns its exit status.

    ``report(message)`` prints the error.  An error every rank raised (``agreed``)
    is printed by rank 0 alone, every rank takes rank 0's exit status, and the
    ranks finish MPI together, so the job ends with that status and nothing else.
    An error of this rank alone is printed with the rank's number, and the job is
    aborted: the other ranks would otherwise wait for this one forever.
    """
    comm = current()
    if comm.size == 1:
        # started by mpiexec but without MPI (mpi4py missing): every process fails alike, rank 0 says so
        if launched_rank() == 0:
            report(str(exc))
        return status
    if isinstance(exc, AgreedError):
        if comm.is_root:
            report(str(exc))
        status = comm.comm.bcast(status, root=0)
        comm.comm.Barrier()
        from mpi4py import MPI
        MPI.Finalize()
        return status
    report(f"(rank {comm.rank} of {comm.size}) {exc}")
    _abort(comm, status)
    return status


def interrupted(status: int, report) -> int:
    """A signal before or after the loop (``report(prefix)`` prints the line); returns the exit status.

    With several processes the job ends at once, by an abort: the launcher hands the
    signal to every process, and some may be waiting in a collective for a process
    that has already stopped.  Rank 0 says so; another rank does only if rank 0 has
    not ended the job within a moment (rank 0 may itself be waiting for that rank).
    """
    comm = current()
    if comm.size == 1:
        if launched_rank() == 0:
            report("")
        return status
    if not comm.is_root:
        time.sleep(2.0)
        report(f"(rank {comm.rank} of {comm.size}) ")
    else:
        report("")
    _abort(comm, status)
    return status
