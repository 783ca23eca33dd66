"""Data parallelism on GPUs: one GPU per rank, gradients summed by NCCL on the devices.

MPI starts the processes and carries the small things (NCCL's unique id,
the step's metrics); NCCL sums the gradient buffer from GPU memory to GPU
memory, over NVLink or PCIe within a node, with no copy through the host.
The start follows NCCL's own recipe: rank 0 draws a unique id, MPI
broadcasts it, and every rank joins the communicator with it.
"""
from __future__ import annotations

import numpy as np

from .errors import AgreedError


def select_gpu(index: int, on_node: int) -> str:
    """Make GPU ``index`` (the rank's index on its node) this process's device; returns its PCI bus id.

    A launcher may give each process a GPU of its own (``CUDA_VISIBLE_DEVICES`` set per
    process, as Slurm's ``--gpus-per-task=1`` does): each then sees one GPU, and takes it.
    ``check_one_per_gpu`` makes sure that no two processes ended up on the same one.
    """
    import cupy
    visible = cupy.cuda.runtime.getDeviceCount()
    if visible < on_node and visible != 1:
        raise ValueError(f"--device cuda runs one process per GPU, but this node starts {on_node} processes "
                         f"and CUDA sees {visible} GPUs; use mpiexec -n {visible} (or make {on_node} GPUs "
                         f"visible)")
    device = cupy.cuda.Device(index if visible >= on_node else 0)
    device.use()
    return device.pci_bus_id


def check_one_per_gpu(places: list) -> None:
    """``places``: (host, PCI bus id) of every rank's GPU; two ranks on one GPU is an error."""
    first = {}
    for rank, place in enumerate(places):
        if place in first:
            raise AgreedError(ValueError(
                f"--device cuda runs one process per GPU, but ranks {first[place]} and {rank} both got GPU "
                f"{place[1]} on {place[0]}: start as many processes per machine as it has GPUs"))
        first[place] = rank


class NcclGrads:
    """Sums a flat CuPy buffer over all ranks, in place, on the current stream."""

    def __init__(self, comm):
        from cupy.cuda import nccl
        if not nccl.available:
            raise AgreedError(RuntimeError("--device cuda with several processes needs NCCL, and this CuPy "
                                      "was built without it; install a CuPy wheel (cupy-cuda12x) that "
                                      "ships NCCL support, or run one process"))
        self._nccl = nccl
        uid = nccl.get_unique_id() if comm.is_root else None
        uid = comm.bcast(uid)
        self.comm = nccl.NcclCommunicator(comm.size, uid, comm.rank)
        self._types = {np.dtype(np.float32): nccl.NCCL_FLOAT32, np.dtype(np.float64): nccl.NCCL_FLOAT64,
                       np.dtype(np.float16): nccl.NCCL_FLOAT16}

    def __call__(self, buf) -> None:
        import cupy
        if not buf.flags.c_contiguous:
            raise ValueError("the gradient buffer must be contiguous for NCCL")
        stream = cupy.cuda.get_current_stream()
        self.comm.allReduce(buf.data.ptr, buf.data.ptr, buf.size, self._types[buf.dtype],
                            self._nccl.NCCL_SUM, stream.ptr)

    def close(self) -> None:
        self.comm.destroy()
