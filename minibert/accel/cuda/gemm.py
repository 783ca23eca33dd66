"""The GPU's products: float16 stacks by cuBLAS itself (float32 sums, tensor cores), and all of
them by a cuBLAS call a CUDA graph can capture when ``DIRECT`` is set.

CuPy 14's ``matmul`` of float16 stacks (attention's (B, A, T, D) operands) does not reach the
tensor cores: on an H200 it took 0.697 ms for q k^T at batch 32, 8 heads, T = 512, longer than
the float32 product (0.280 ms). One ``cublasGemmStridedBatchedEx`` with float32 compute does
the same in 0.051 ms. This module makes that call, with the same result as ``ops.half_matmul``
(float32 sums, rounded once to float16).  CuPy's binding of it cannot be captured into a CUDA
graph; ``cublas.py`` calls it through ctypes, for float32 products too.

cuBLAS is column-major and minibert's arrays are row-major. A row-major (M, K) matrix is, in
the same memory, the column-major (K, M) matrix, its transpose. So the row-major product
C = a b is computed as the column-major C^T = b^T a^T: cuBLAS's first operand is b, its
second a, and no data is moved. A transposed view (``k.swapaxes(-1, -2)``) of a C-ordered
stack is passed as that stack with cuBLAS's "transpose" flag, again without a copy.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...ops.common import get_array_module
from . import cublas, kernels
from .settings import switch

CUDA_R_16F = 2                           # cudaDataType: float16


class Operand(NamedTuple):
    array: object        # C-ordered stack of matrices, the memory cuBLAS reads
    trans: bool          # True: the operand is this stack's transpose (cuBLAS's OP_T)
    ld: int              # leading dimension of one stored matrix, column-major: its row length
    stride: int          # elements from one matrix of the stack to the next


class Plan(NamedTuple):
    """The arguments of one cublasGemmStridedBatchedEx, column-major: C(m, n) = op(A) op(B)."""
    A: Operand           # the row-major product's right operand b
    B: Operand           # its left operand a
    m: int
    n: int
    k: int
    ldc: int
    stride_c: int
    batch: int


def _operand(x) -> Operand:
    """x (..., R, C) as cuBLAS sees it: a C-ordered stack, or the transpose of one."""
    if x.flags.c_contiguous:
        return Operand(x, False, x.shape[-1], x.shape[-1] * x.shape[-2])
    t = x.swapaxes(-1, -2)
    if t.flags.c_contiguous:
        return Operand(t, True, t.shape[-1], t.shape[-1] * t.shape[-2])
    x = get_array_module(x).ascontiguousarray(x)    # any other layout: one copy
    return Operand(x, False, x.shape[-1], x.shape[-1] * x.shape[-2])


def plan(a, b) -> Plan | None:
    """The call that computes a @ b for stacks a (..., M, K) and b (..., K, N) of the same leading
    shape (none: matrices, one product), both float16 or both float32; None where it does not apply
    (broadcasting, other dtypes, an empty product)."""
    if (a.ndim < 2 or a.shape[:-2] != b.shape[:-2] or a.dtype != b.dtype
            or a.dtype not in (np.float16, np.float32)):
        return None
    M, K = a.shape[-2:]
    N = b.shape[-1]
    if b.shape[-2] != K or not (M and N and K):
        return None
    batch = int(np.prod(a.shape[:-2]))
    return Plan(_operand(b), _operand(a), N, M, K, N, M * N, batch)


# Every product of accel.cuda's ops by cuBLAS through ctypes (``cublas.py``), which a CUDA graph
# can capture: set by ``graph.py`` (or MINIBERT_CUBLAS=direct).  Unset, float32 products are
# CuPy's, float16 stacks go to cuBLAS through CuPy's binding below.
DIRECT = switch("MINIBERT_CUBLAS", "direct", "every product by a cuBLAS call a CUDA graph can capture",
                "products by CuPy")


def matmul(a, b):
    """a @ b on the GPU for the ops: by ``cublas.gemm`` when DIRECT is set and the plan applies,
    float16 stacks by one batched call, anything else CuPy's ``matmul``."""
    if DIRECT and kernels.on_device(a):
        p = plan(a, b)
        if p is not None:
            import cupy
            return cublas.gemm(p, cupy.empty(a.shape[:-1] + (b.shape[-1],), dtype=a.dtype))
    if a.dtype == np.float16 and a.ndim >= 3 and type(a).__module__.split(".")[0] == "cupy":
        return _batched_half(a, b)
    return a @ b


def half_matmul(a, b):
    """``ops.half_matmul`` on the GPU: float16 operands, float32 sums rounded to float16."""
    return matmul(a, b)


_ONE, _ZERO = np.array(1.0, np.float32), np.array(0.0, np.float32)   # host scalars, alive for the calls


def _batched_half(a, b):
    """Float16 stacks by cuBLAS through CuPy's binding (CuPy's own ``matmul`` of float16 stacks does
    not reach the tensor cores); CuPy's ``matmul`` where the plan does not apply."""
    p = plan(a, b)
    if p is None:
        return a @ b
    import cupy
    from cupy_backends.cuda.libs import cublas as cupy_cublas
    c = cupy.empty(a.shape[:-1] + (b.shape[-1],), dtype=np.float16)
    handle = cupy.cuda.device.get_cublas_handle()
    cupy_cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
    cupy_cublas.setPointerMode(handle, cupy_cublas.CUBLAS_POINTER_MODE_HOST)
    op = (cupy_cublas.CUBLAS_OP_N, cupy_cublas.CUBLAS_OP_T)
    cupy_cublas.gemmStridedBatchedEx(
        handle, op[p.A.trans], op[p.B.trans], p.m, p.n, p.k, _ONE.ctypes.data,
        p.A.array.data.ptr, CUDA_R_16F, p.A.ld, p.A.stride,
        p.B.array.data.ptr, CUDA_R_16F, p.B.ld, p.B.stride,
        _ZERO.ctypes.data, c.data.ptr, CUDA_R_16F, p.ldc, p.stride_c,
        p.batch, cupy_cublas.CUBLAS_COMPUTE_32F, cupy_cublas.CUBLAS_GEMM_DEFAULT_TENSOR_OP)
    return c
