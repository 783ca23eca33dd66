"""Data parallelism on GPUs: one GPU per rank, gradients summed by NCCL on the devices.

MPI starts the processes and carries the small things (NCCL's unique id,
the step's metrics); NCCL sums the gradient buffer from GPU memory to GPU
memory, over NVLink or PCIe within a node, with no copy through the host.
The start follows NCCL's own recipe: rank 0 draws a unique id, MPI
broadcasts it, and every rank joins the communicator with it.
"""
from __future__ import annotations

import numpy as np

from .errors import agreed


def select_gpu(index: int, on_node: int) -> int:
    """Make GPU ``index`` (the rank's index on its node) this process's device; refuse a node with
    fewer GPUs than the ``on_node`` ranks it runs."""
    import cupy
    visible = cupy.cuda.runtime.getDeviceCount()
    # every rank of the node sees the same count: all raise alike
    if visible < on_node:
        raise agreed(ValueError(
            f"--device cuda runs one process per GPU, but this node starts {on_node} processes and CUDA "
            f"sees {visible} GPU{'s' if visible != 1 else ''}; use mpiexec -n {visible} (or set "
            f"CUDA_VISIBLE_DEVICES to {on_node} GPUs)"))
    cupy.cuda.Device(index).use()
    return index


class NcclGrads:
    """Sums a flat CuPy buffer over all ranks, in place, on the current stream."""

    def __init__(self, comm):
        from cupy.cuda import nccl
        if not nccl.available:
            raise agreed(RuntimeError("--device cuda with several processes needs NCCL, and this CuPy "
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
