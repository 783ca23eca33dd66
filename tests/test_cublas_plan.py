"""accel/cuda/gemm.py's plan: the arguments of one cublasGemmStridedBatchedEx (float16 or float32
stacks, or matrices), checked on the CPU by
doing what cuBLAS does with them (column-major matrices read from memory through leading dimensions
and batch strides), and comparing with a @ b.  tests/test_gpu.py checks the call itself on a GPU."""
import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

from minibert.accel.cuda.gemm import plan


def _read(op, rows, cols, i):
    """op(X) of batch entry i, (rows, cols), as cuBLAS reads it from op.array's memory."""
    mem = op.array.reshape(-1).astype(np.float64)        # op.array is C-ordered: this is its memory
    sr, sc = (cols, rows) if op.trans else (rows, cols)   # the stored column-major matrix
    assert op.array.flags.c_contiguous and op.ld >= sr, "cuBLAS requires ld >= the stored rows"
    last = i * op.stride + (sr - 1) + (sc - 1) * op.ld
    assert last < mem.size, "reads past the operand's memory"
    x = as_strided(mem[i * op.stride:], shape=(sr, sc), strides=(8, 8 * op.ld))
    return x.T if op.trans else x


def gemm_strided_batched(p, out_shape):
    """C(m, n) = op(A) op(B) for each of p.batch entries, written column-major with p.ldc, p.stride_c."""
    mem = np.full(p.batch * p.stride_c, np.nan)
    assert p.ldc >= p.m
    for i in range(p.batch):
        c = _read(p.A, p.m, p.k, i) @ _read(p.B, p.k, p.n, i)
        as_strided(mem[i * p.stride_c:], shape=(p.m, p.n), strides=(8, 8 * p.ldc))[...] = c
    return mem.reshape(out_shape)


def _half(rng, *shape, to=np.asarray):
    return to(rng.standard_normal(shape).astype(np.float16))


def _single(rng, *shape, to=np.asarray):
    return to(rng.standard_normal(shape).astype(np.float32))


CASES = {   # attention's four products and a few layouts beside them: (a, b) from a generator, each
            # operand made by ``to`` (cupy.asarray on a GPU) before it is viewed
    "q k^T": lambda r, to: (_half(r, 2, 3, 5, 4, to=to), _half(r, 2, 3, 7, 4, to=to).swapaxes(-1, -2)),
    "P v": lambda r, to: (_half(r, 2, 3, 5, 7, to=to), _half(r, 2, 3, 7, 4, to=to)),
    "P^T dO": lambda r, to: (_half(r, 2, 3, 5, 7, to=to).swapaxes(-1, -2), _half(r, 2, 3, 5, 4, to=to)),
    "dS^T q, both transposed": lambda r, to: (_half(r, 4, 6, 5, to=to).swapaxes(-1, -2),
                                              _half(r, 4, 3, 6, to=to).swapaxes(-1, -2)),
    "one batch axis, square": lambda r, to: (_half(r, 3, 8, 8, to=to), _half(r, 3, 8, 8, to=to)),
    "every other row (copied)": lambda r, to: (_half(r, 2, 10, 4, to=to)[:, ::2], _half(r, 2, 4, 3, to=to)),
    "q k^T at T = 512": lambda r, to: (_half(r, 2, 4, 512, 64, to=to), _half(r, 2, 4, 512, 64, to=to).swapaxes(-1, -2)),
    "a column of one": lambda r, to: (_half(r, 2, 5, 1, to=to), _half(r, 2, 1, 6, to=to)),
    # a linear layer's three products, matrices (one product, batch 1), float16 and float32
    "x W^T": lambda r, to: (_half(r, 6, 4, to=to), _half(r, 3, 4, to=to).T),
    "dy W, float32": lambda r, to: (_single(r, 6, 3, to=to), _single(r, 3, 4, to=to)),
    "dy^T x, float32": lambda r, to: (_single(r, 6, 3, to=to).T, _single(r, 6, 4, to=to)),
    "x W^T, float32": lambda r, to: (_single(r, 6, 4, to=to), _single(r, 3, 4, to=to).T),
    "q k^T, float32": lambda r, to: (_single(r, 2, 3, 5, 4, to=to), _single(r, 2, 3, 7, 4, to=to).swapaxes(-1, -2)),
}


def make(case, to=np.asarray):
    return CASES[case](np.random.default_rng(0), to)


@pytest.mark.parametrize("case", list(CASES))
def test_the_plan_computes_a_times_b(case):
    a, b = make(case)
    p = plan(a, b)
    assert p is not None and p.batch == int(np.prod(a.shape[:-2]))
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(gemm_strided_batched(p, want.shape), want, rtol=1e-12, atol=1e-12)


def test_transposed_views_are_read_in_place():
    a, b = make("q k^T")
    p = plan(a, b)
    assert p.A.trans and not p.B.trans and np.shares_memory(p.A.array, b)
    a, b = make("P^T dO")
    p = plan(a, b)
    assert p.B.trans and not p.A.trans and np.shares_memory(p.B.array, a)


@pytest.mark.parametrize("case", list(CASES))
def test_the_stand_ins_cublas_reads_the_plan_as_cublas_does(case):
    """tests/cuda_on_cpu.py's ``gemm`` (what the CPU stand-in runs for cuBLAS) takes the plan's arguments
    the same way: a @ b, float16 sums in float32 rounded once."""
    import cuda_on_cpu
    a, b = make(case)
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(a.dtype)
    got = cuda_on_cpu.gemm(plan(a, b), np.full(want.shape, np.nan, a.dtype))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("a, b", [
    (np.ones((2, 3, 4), np.float16), np.ones((1, 4, 2), np.float16)),      # broadcasting
    (np.ones((3, 4), np.float32), np.ones((4, 2), np.float16)),            # two dtypes
    (np.ones((2, 3, 4), np.float64), np.ones((2, 4, 2), np.float64)),      # float64: not a cuBLAS Ex type here
    (np.ones((2, 0, 4), np.float16), np.ones((2, 4, 2), np.float16)),      # nothing to compute
    (np.ones(4, np.float32), np.ones(4, np.float32)),                       # vectors
])
def test_the_plan_leaves_other_products_alone(a, b):
    assert plan(a, b) is None
