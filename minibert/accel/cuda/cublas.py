"""cuBLAS's product called through ctypes: one a CUDA graph can capture.

CuPy refuses every cuBLAS call while a stream is being captured into a graph (its binding
raises "calling cuBLAS API during stream capture is currently unsupported" before it calls
cuBLAS).  cuBLAS itself captures: with the host's alpha and beta, a product's arguments are
recorded in the graph like a kernel's, and with a workspace of the caller's own
(``cublasSetWorkspace``) it allocates nothing while it is captured.  So this module loads the
same libcublas CuPy loaded, makes a handle of its own with a workspace of its own, and calls
``cublasGemmStridedBatchedEx`` with the arguments of ``gemm.plan``: float32 or float16
operands, sums in float32.

It is the product of every op when ``gemm.DIRECT`` is set: a step captured into a graph
(``graph.py``) runs with it, before and during the capture, so that the captured step computes
what the step before it computed.  On the CPU stand-in (``tests/cuda_on_cpu.py``) ``gemm`` below
is replaced by a NumPy function that reads the same arguments the same way.
"""
from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np

# cuBLAS's and CUDA's enumerations (cublas_api.h, library_types.h)
OP_N, OP_T = 0, 1
DATA_TYPES = {np.dtype(np.float32): 0, np.dtype(np.float16): 2}     # CUDA_R_32F, CUDA_R_16F
COMPUTE_32F = 68
GEMM_DEFAULT, GEMM_DEFAULT_TENSOR_OP = -1, 99
WORKSPACE_BYTES = 32 << 20       # what cuBLAS's documentation advises for Hopper; ample before it

_ONE, _ZERO = ctypes.c_float(1.0), ctypes.c_float(0.0)   # alpha and beta, read on the host: captured as values
_lib = None
_handles = {}                    # device id -> (handle, workspace)


def _library_path():
    """The libcublas this process has loaded (CuPy's), else what the loader finds."""
    import cupy_backends.cuda.libs.cublas  # noqa: F401  (loads CuPy's libcublas)
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if "/libcublas.so" in path:
                    return path
    except OSError:
        pass
    return ctypes.util.find_library("cublas") or "libcublas.so.12"


def library():
    """libcublas through ctypes, its few functions declared."""
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(_library_path())
        vp, i, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
        lib.cublasCreate_v2.argtypes = [ctypes.POINTER(vp)]
        lib.cublasSetStream_v2.argtypes = [vp, vp]
        lib.cublasSetWorkspace_v2.argtypes = [vp, vp, ctypes.c_size_t]
        lib.cublasGemmStridedBatchedEx.argtypes = [
            vp, i, i, i, i, i, vp,           # handle, op(A), op(B), m, n, k, alpha
            vp, i, i, ll,                    # A, its type, lda, stride
            vp, i, i, ll,                    # B
            vp, vp, i, i, ll,                # beta, C, its type, ldc, stride
            i, i, i]                         # batch, compute type, algorithm
        _lib = lib
    return _lib


def _check(status, what):
    if status != 0:
        raise RuntimeError(f"cuBLAS's {what} failed with status {status} (cublasStatus_t)")


def handle():
    """This device's handle, with its workspace set (created once)."""
    import cupy
    dev = cupy.cuda.runtime.getDevice()
    if dev not in _handles:
        lib, h = library(), ctypes.c_void_p()
        _check(lib.cublasCreate_v2(ctypes.byref(h)), "cublasCreate")
        workspace = cupy.empty(WORKSPACE_BYTES, dtype=np.uint8)
        _check(lib.cublasSetWorkspace_v2(h, workspace.data.ptr, WORKSPACE_BYTES), "cublasSetWorkspace")
        _handles[dev] = (h, workspace)
    return _handles[dev][0]


def gemm(p, c):
    """Run ``gemm.plan``'s product ``p`` into ``c`` (C-ordered, the product's shape) on the current
    stream: float16 or float32 operands (both of c's dtype), float32 sums."""
    import cupy
    lib, h = library(), handle()
    _check(lib.cublasSetStream_v2(h, cupy.cuda.get_current_stream().ptr), "cublasSetStream")
    t = DATA_TYPES[np.dtype(c.dtype)]
    algo = GEMM_DEFAULT_TENSOR_OP if c.dtype == np.float16 else GEMM_DEFAULT
    _check(lib.cublasGemmStridedBatchedEx(
        h, (OP_N, OP_T)[p.A.trans], (OP_N, OP_T)[p.B.trans], p.m, p.n, p.k, ctypes.byref(_ONE),
        p.A.array.data.ptr, t, p.A.ld, p.A.stride,
        p.B.array.data.ptr, t, p.B.ld, p.B.stride,
        ctypes.byref(_ZERO), c.data.ptr, t, p.ldc, p.stride_c,
        p.batch, COMPUTE_32F, algo), "cublasGemmStridedBatchedEx")
    return c
