"""Data parallelism: N processes compute the step that one process computes on the same batch.

(The same step without dropout: each rank draws its own dropout masks.)

Launched as ``mpiexec -n N python -m mpi4py -m minibert pretrain ...``.  Every
rank builds the same model from the same seed and draws the same global batch
of ``--batch-size`` sequences (the order and masking depend on the seed alone);
rank r runs forward and backward on its slice of the rows.  The loss of the
global batch is a sum over its rows divided by global counts,

    L = sum_i l_mlm(i) / M  +  sum_b l_nsp(b) / B,

with M the masked tokens of the whole batch and B its sequences, so each rank
differentiates its own part of those sums divided by the *global* M and B
(not its own: the ranks' masked counts differ, and the mean of their means is
not the batch's mean).  The ranks' gradients then add up to the gradient of L:
one sum over all ranks (an allreduce) of one flat buffer per optimiser step,
after the ``--accum`` micro-batches, and every rank clips and applies the same
AdamW update to the same weights.

``Single`` is one process: every collective is the identity.  ``MPIComm``
sums over MPI, on the host, or with NCCL on the GPUs (``nccl.py``).  Only
rank 0 prints and writes files; a failure anywhere is agreed on by all ranks,
so that rank 0 reports it in one line and nobody waits forever.
"""
from __future__ import annotations

import hashlib
import os
import socket
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ..constants import IGNORE_INDEX
from ..launcher import launched_size
from .errors import AgreedError, PeerError

# the order of a step's sums in the host allreduce
STAT_KEYS = ("mlm_loss", "nsp_loss", "mlm_correct", "nsp_correct", "n_mlm", "n_nsp", "tokens")
_COUNTS = frozenset({"mlm_correct", "nsp_correct", "n_mlm", "n_nsp", "tokens"})


class Single:
    """One process: the identity for every collective."""

    rank, size, is_root = 0, 1, True
    seconds = 0.0          # time spent summing gradients over ranks: none

    def share(self, batch: dict) -> dict:
        return batch

    def loss_counts(self, batch: dict):
        return None          # each loss divided by this batch's own counts

    def dropout_seed(self, seed: int, step: int):
        return (seed, step)

    def allreduce_grads(self, buf) -> None:
        pass

    def reduce_step(self, sums: dict) -> dict:
        return sums

    def first(self, reason):
        return reason

    def agreed(self, error):
        return error         # no one to agree with

    def everywhere(self, fn):
        return fn()

    def on_root(self, fn):
        return fn()

    def broadcast_arrays(self, *arrays) -> None:
        pass

    def bcast(self, value):
        return value

    def close(self) -> None:
        pass


class MPIComm(Single):
    """N processes over MPI: rank ``rank`` of ``size``."""

    def __init__(self, comm):
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.is_root = self.rank == 0
        self.grads = None      # set by use_device: the gradient sum (MPI on the host, NCCL on GPUs)
        self.seconds = 0.0     # spent in allreduce_grads (on a GPU: launching it; NCCL runs asynchronously)

    # ---------------------------------------------------------------- the batch
    def share(self, batch: dict) -> dict:
        """This rank's rows of the global batch: the r-th of N equal runs of rows."""
        B = len(batch["input_ids"])
        lo, hi = self.rank * B // self.size, (self.rank + 1) * B // self.size
        return {k: v[lo:hi] for k, v in batch.items()}

    def loss_counts(self, batch: dict):
        """(masked tokens, sequences) of the global batch: what both losses are divided by."""
        return int((np.asarray(batch["mlm_labels"]) != IGNORE_INDEX).sum()), len(batch["input_ids"])

    def dropout_seed(self, seed: int, step: int):
        return (seed, step, self.rank)    # each rank's rows get masks of their own

    # ---------------------------------------------------------------- sums
    def allreduce_grads(self, buf) -> None:
        """Sum the flat gradient buffer over the ranks, in place (``seconds``: the time it took, in all)."""
        t0 = time.perf_counter()
        self.grads(buf)
        self.seconds += time.perf_counter() - t0

    def _host_allreduce(self, buf) -> None:
        from mpi4py import MPI
        self.comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)

    def reduce_step(self, sums: dict) -> dict:
        """A step's (or an evaluation's) sums over all ranks, in float64: one small allreduce."""
        unknown = set(sums) - set(STAT_KEYS)
        if unknown:
            raise KeyError(f"reduce_step: no place for {sorted(unknown)} in STAT_KEYS")
        v = np.array([float(sums.get(k, 0)) for k in STAT_KEYS])
        self._host_allreduce(v)
        return {k: int(round(x)) if k in _COUNTS else float(x) for k, x in zip(STAT_KEYS, v)}

    def first(self, reason):
        """The ``reason`` of the lowest rank that has one (a stop signal's name, say), on every rank; else None."""
        return next((r for r in self.comm.allgather(reason) if r), None)

    def agreed(self, error) -> AgreedError:
        """``error``, which every rank raises at this point (a decision on reduced values, say)."""
        return AgreedError(error)

    def broadcast_arrays(self, *arrays) -> None:
        """Rank 0's values of these arrays, everywhere (in place; at the start only)."""
        for args in arrays:
            if hasattr(args, "get"):          # CuPy: through the host, once per run
                host = args.get()
                self.comm.Bcast(host, root=0)
                args.set(host)
            else:
                self.comm.Bcast(args, root=0)

    def bcast(self, value):
        """Rank 0's ``value`` (a small picklable one), everywhere."""
        return self.comm.bcast(value, root=0)

    # ---------------------------------------------------------------- failures
    def everywhere(self, fn):
        """Run ``fn`` on every rank; if it fails on any, raise on all (the first failing rank's error)."""
        result, error = _attempt(fn)
        errors = self.comm.allgather(error[1] if error else None)
        return _result_or_raise(self.rank, result, error, errors)

    def on_root(self, fn):
        """Run ``fn`` on rank 0 alone while the others wait; a failure there is raised on all.

        Returns ``fn()``'s result on rank 0, None elsewhere (``bcast`` sends a value on).
        """
        result, error = _attempt(fn) if self.is_root else (None, None)
        message = self.comm.bcast(error[1] if error else None, root=0)
        return _result_or_raise(self.rank, result, error, [message])

    def close(self) -> None:
        if self.grads is not None and hasattr(self.grads, "close"):
            self.grads.close()


def _attempt(fn):
    try:
        return fn(), None
    except Exception as exc:           # handed to the other ranks, then raised here too
        return None, (exc, (type(exc).__name__, str(exc)))


def _result_or_raise(rank, result, error, errors):
    failed = [(r, e) for r, e in enumerate(errors) if e is not None]
    if not failed:
        return result
    if error is not None:
        raise AgreedError(error[0])
    r, (kind, message) = failed[0]
    raise AgreedError(PeerError(f"rank {r}: {message}", kind))


# -------------------------------------------------------------------- start-up

_WORLD = []   # the MPIComm of this process, once made


def world():
    """``Single``, or an ``MPIComm`` over all processes when launched by mpiexec with N > 1."""
    if _WORLD:
        return _WORLD[0]
    if launched_size() <= 1:
        return Single()
    try:
        from mpi4py import MPI
    except ImportError:
        raise RuntimeError(f"started as {launched_size()} processes, but mpi4py is not installed: "
                           f'pip install "minibert[dist]" (mpi4py and MPICH), then launch with '
                           f"mpiexec -n N python -m mpi4py -m minibert pretrain ...") from None
    if MPI.COMM_WORLD.Get_size() != launched_size():
        raise RuntimeError(f"the launcher started {launched_size()} processes, but MPI sees "
                           f"{MPI.COMM_WORLD.Get_size()}: this mpiexec belongs to another MPI than the one "
                           f"mpi4py uses; launch with that MPI's mpiexec (pip's mpich: the one in the "
                           f"environment's bin folder)")
    _WORLD.append(MPIComm(MPI.COMM_WORLD))
    return _WORLD[0]


def current():
    """The ranks of this process's job if ``world()`` made them, else ``Single``."""
    return _WORLD[0] if _WORLD else Single()


def check_run(comm, args) -> None:
    """Refuse, on every rank alike, what N processes cannot run: called before any work."""
    if comm.size == 1:
        return
    mine = {k: repr(v) for k, v in _fingerprint(args).items()}   # repr: a nan equals a nan here
    everyone = comm.comm.allgather(mine)
    for r, theirs in enumerate(everyone):
        diff = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        if diff:
            raise AgreedError(ValueError(
                f"rank {r} was started differently from rank {comm.rank}: "
                + ", ".join(f"{k}: {theirs.get(k)} vs {mine.get(k)}" for k in diff[:4])
                + "; start every rank with the same command and the same minibert"))
    if args.batch_size % comm.size:
        b, n = args.batch_size, comm.size
        counts = ", ".join(str(k) for k in range(1, min(b, 64) + 1) if b % k == 0)
        fix = (f"a resumed run keeps its batch: use a number of processes that divides {b} ({counts})"
               if args.resume else
               f"use a multiple of {n} (e.g. {(b // n + 1) * n}) or a number of processes that divides {b} "
               f"({counts})")
        raise AgreedError(ValueError(f"--batch-size {b} (the global batch) does not divide among {n} "
                                f"processes; {fix}"))


def _fingerprint(args) -> dict:
    """What must be the same on every rank: the settings, minibert's code, NumPy's version."""
    import minibert
    settings = {f"--{k.replace('_', '-')}": v for k, v in asdict(args).items()}
    return dict(settings, minibert=f"{minibert.__version__} ({_source_hash()})", numpy=np.__version__)


def _source_hash() -> str:
    """A short hash of minibert's own source files: two installs differ here even at one version."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def local_rank(comm) -> tuple[int, int]:
    """(this rank's index among the ranks on its node, how many ranks that node runs)."""
    from mpi4py import MPI
    node = comm.comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.Get_rank(), node.Get_size()
    finally:
        node.Free()


def use_device(comm, device: str) -> None:
    """Pick this rank's device and how its gradients are summed: MPI on the host, NCCL on GPUs.

    On the CPU the ranks of a node share its cores: unless ``MINIBERT_NUM_THREADS``
    says otherwise, each rank's kernels and BLAS get cores / ranks threads (the
    results do not depend on the number of threads).
    """
    if not isinstance(comm, MPIComm):   # one process, no MPI: nothing to sum
        return
    if device == "cuda":
        from .nccl import NcclGrads, check_one_per_gpu, select_gpu
        bus = comm.everywhere(lambda: select_gpu(*local_rank(comm)))
        check_one_per_gpu(comm.comm.allgather((socket.gethostname(), bus)))   # the same list on every rank
        comm.grads = NcclGrads(comm)
        return
    comm.grads = comm._host_allreduce
    from threadpoolctl import threadpool_limits

    from .. import accel
    ranks_here = local_rank(comm)[1]    # a collective: every rank calls it, whatever its environment says
    if not os.environ.get("MINIBERT_NUM_THREADS", "").strip():
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:      # not Linux (macOS, Windows): every core of the machine
            cores = os.cpu_count() or 1
        accel.set_num_threads(max(1, cores // ranks_here))
    # BLAS outside the kernels' blocks gets as many threads as the kernels, not every core
    threadpool_limits(accel.num_threads(), user_api="blas")
