"""Started by ``mpiexec``? Then MPI starts before anything else of minibert runs.

A process that fails before it has started MPI (a bad setting read at import,
an import that breaks on one machine) would leave the processes that did start
it waiting for it forever: MPI's start and its collectives need every process.
So under a launcher with N > 1 processes, importing minibert starts MPI at once,
and an uncaught error in any process then ends the whole job.
"""
from __future__ import annotations

import os
import sys

# set by the launchers: MPICH/Hydra (PMI_SIZE), Open MPI, PMIx-based ones
SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE")


def launched_size() -> int:
    """How many processes the launcher started (1 when not under mpiexec)."""
    for name in SIZE_VARS:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 1


def launched_rank() -> int:
    """This process's rank as the launcher numbered it (0 when not under mpiexec)."""
    for name in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


# every variable through which a launcher tells a process it is a rank (and how to reach the others)
LAUNCHER_PREFIXES = ("PMI_", "PMIX_", "OMPI_", "HYDRA_", "HYDI_", "MPI_LOCALRANKID", "MPI_LOCALNRANKS")


def outside_the_job(environ) -> dict:
    """``environ`` less the launcher's variables: for a helper process a rank starts (the data
    worker), which must not take itself for a rank and start MPI, waiting for a job it is not in."""
    return {k: v for k, v in environ.items() if not k.startswith(LAUNCHER_PREFIXES)}


def start_mpi_if_launched() -> None:
    """Under mpiexec -n N (N > 1): start MPI now, and make an uncaught error end the job."""
    if launched_size() <= 1 or "mpi4py.MPI" in sys.modules and sys.excepthook is _abort_job:
        return
    try:
        from mpi4py import MPI
    except ImportError:
        return       # said later, in one line, by minibert.train.dist.world()
    if MPI.COMM_WORLD.Get_size() > 1:
        sys.excepthook = _abort_job


def _abort_job(kind, value, tb) -> None:
    sys.__excepthook__(kind, value, tb)
    from mpi4py import MPI
    MPI.COMM_WORLD.Abort(1)
