"""The CUDA kernels of ``minibert/accel/cuda/``, run on the CPU against the reference ops.

``tests/test_gpu.py`` checks them on a GPU and skips without one.  Here the same CUDA
source is compiled for the CPU (``tests/cuda_on_cpu.py``: threads as fibers, real
barriers and warp shuffles) and NumPy arrays count as on the device, so that the ops of
``minibert.accel.cuda``, and a model built on them, run the kernels: a wrong index, a barrier in a branch,
a kernel argument of the wrong type or a missing guard fails here too.  What this cannot
check (CuPy itself, the GPU's arithmetic, speed) stays with ``test_gpu.py``.
"""
import sys

import numpy as np
import pytest

import minibert as mb
from minibert import accel, ops
from minibert.accel.cuda import activations as cuda_act, kernels as cuda_kernels, linear as cuda_linear
from minibert.accel.cuda import ops as cuda_ops
from minibert.accel.cuda import loss as cuda_loss
from minibert.accel.cuda import source as cuda_source
from minibert.accel.cuda import cublas as cuda_cublas
from minibert.accel.cuda import loss_scaling
from conftest import padded_batch
import cuda_on_cpu

REASON = cuda_on_cpu.unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

TOL = {"float64": 1e-12, "float32": 2e-6}
KERNEL_FUNCTIONS = ("layernorm_forward", "layernorm_backward", "gelu_forward", "gelu_backward",
                    "dropout_forward", "attention_forward", "attention_backward", "adamw_update")


def _clear_kernel_caches():
    for cached in (cuda_kernels._raw, cuda_kernels.dummy, cuda_kernels.tickets, cuda_kernels.elementwise,
                   cuda_kernels.reductions):
        cached.cache_clear()


def cuda_kernels_on_numpy(monkeypatch, spy=None):
    """From now on NumPy arrays count as on the device: ``accel.cuda``'s ops run the CUDA kernels on them.

    ``spy(op, fn)``, optional, wraps each of ``accel.cuda``'s functions that is its own (not the
    reference's).  Also used by ``tests/test_accel.py``.
    """
    monkeypatch.setitem(sys.modules, "cupy", cuda_on_cpu.fake_cupy())
    monkeypatch.setattr(cuda_kernels, "on_device", lambda a: isinstance(a, np.ndarray))
    monkeypatch.setattr(cuda_cublas, "gemm", cuda_on_cpu.gemm)
    if spy:
        for op in ops.OPS:
            fn = getattr(accel.cuda, op)
            if fn is not getattr(ops, op):
                monkeypatch.setattr(accel.cuda, op, spy(op, fn))
    _clear_kernel_caches()


@pytest.fixture
def kernels(monkeypatch):
    """NumPy arrays take the CUDA kernels; returns the names of the ops whose kernels ran."""
    called = []

    def spy(op, fn):
        def run(*a, **k):
            called.append(op)
            return fn(*a, **k)
        return run
    cuda_kernels_on_numpy(monkeypatch, spy)
    try:
        yield called
    finally:
        _clear_kernel_caches()    # a real GPU later in the same process compiles its own


def _close(a, b, dtype, name=""):
    err = np.abs(a - b).max() / max(np.abs(b).max(), 1e-30)
    assert err < TOL[dtype], f"{name}: relative error {err:.2e}"


def _uniforms(seed, dtype):
    """Two generators giving the same uniform draws, one for each path."""
    def make():
        g = np.random.default_rng(seed)
        return lambda shape: g.random(shape, dtype=dtype)
    return make(), make()


# ------------------------------------------------------------------ the stand-in itself
def test_the_stand_in_catches_what_would_break_a_gpu(kernels):
    cupy = sys.modules["cupy"]
    x = np.zeros(64, np.float32)
    # a __syncthreads() that half of the block never reaches: a hang on a GPU
    diverge = cupy.RawKernel('typedef float T;\nextern "C" __global__ void k(T* x) {\n'
                             "    if (threadIdx.x < 32) __syncthreads();\n    x[threadIdx.x] = 1; }", "k")
    with pytest.raises(RuntimeError, match="barrier"):
        diverge((1,), (64,), (x,))
    # a 64-bit integer for an int parameter, a Python float for a float one
    scale = cupy.RawKernel('typedef float T;\nextern "C" __global__ void s(T* x, const int n, const T a) '
                           "{ if (threadIdx.x < n) x[threadIdx.x] *= a; }", "s")
    with pytest.raises(TypeError, match="int"):
        scale((1,), (64,), (x, np.int64(64), np.float32(2)))
    with pytest.raises(TypeError, match="float"):
        scale((1,), (64,), (x, np.int32(64), 2.0))
    with pytest.raises(TypeError, match="float64"):
        scale((1,), (64,), (x.astype(np.float64), np.int32(64), np.float32(2)))
    with pytest.raises(ValueError, match="grid of 0"):
        scale((0,), (64,), (x, np.int32(64), np.float32(2)))
    x[:] = 3
    scale((1,), (64,), (x, np.int32(40), np.float32(2)))
    assert x[:40].tolist() == [6.0] * 40 and x[40:].tolist() == [3.0] * 24
    # a block sum over threads that are not whole warps
    with pytest.raises(ValueError, match="warps"):
        cuda_kernels.kernel("layernorm_fwd", cuda_source.LAYERNORM_FWD, np.float32)(
            (1,), (48,), (x, x, x, x, x, x, np.int32(8), np.float32(1e-12)))


def test_a_wrong_kernel_fails_the_comparison(kernels, monkeypatch, rng):
    # the variance divided by H - 1 instead of H: the comparisons below must see it
    wrong = cuda_source.LAYERNORM_FWD.replace("warp_sum(ss) / T(H)", "warp_sum(ss) / T(H - 1)")
    assert wrong != cuda_source.LAYERNORM_FWD
    monkeypatch.setattr(cuda_source, "LAYERNORM_FWD", wrong)
    x, g, b = rng.standard_normal((5, 64)), rng.standard_normal(64), rng.standard_normal(64)
    y, _ = accel.cuda.layernorm_forward(x, g, b, 1e-12)
    y_ref, _ = ops.layernorm_forward(x, g, b, 1e-12)
    with pytest.raises(AssertionError, match="relative error"):
        _close(y, y_ref, "float64")


# ------------------------------------------------------------------------ the kernels
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("H", [20, 96, 300])    # fewer values than a warp has lanes, three a lane, ten or so
def test_layernorm_gelu_dropout_kernels_match_the_reference(dtype, H, kernels, rng):
    x = (rng.standard_normal((6, 7, H)) * 3 + 1).astype(dtype)
    gamma, beta = rng.standard_normal(H).astype(dtype), rng.standard_normal(H).astype(dtype)
    dy = rng.standard_normal(x.shape).astype(dtype)
    u_kernel, u_ref = _uniforms(3, dtype)
    runs = []
    for path, L in (("kernel", accel.cuda), ("reference", ops)):
        y, cache = L.layernorm_forward(x, gamma, beta, 1e-12)
        out = {"layernorm y": y}
        out.update(zip(("layernorm dx", "dgamma", "dbeta"), L.layernorm_backward(dy, cache)))
        for act in ("none", "tanh"):
            g, c = L.gelu_forward(x, act)
            out[f"gelu {act}"], out[f"gelu {act} dx"] = g, L.gelu_backward(dy, c)
        out["dropout y"], out["dropout mask"] = L.dropout_forward(
            x, 0.1, u_kernel if path == "kernel" else u_ref, True)
        runs.append(out)
    assert set(KERNEL_FUNCTIONS[:5]) <= set(kernels)          # the kernels ran
    for name in runs[0]:
        _close(runs[0][name], runs[1][name], dtype, name)
    np.testing.assert_array_equal(runs[0]["dropout mask"], runs[1]["dropout mask"])


def check_column_sums(xp, dtype, shapes=((1, 5), (7, 40), (37, 300), (1000, 33), (0, 8))):
    """``accel.cuda.linear.column_sums`` against float64 sums, on ``xp``'s arrays: one row, rows fewer
    than a block's 8 row lanes, columns not a multiple of 32, many partial sums per column
    (1000 rows), and no rows at all.  Also used by ``tests/test_gpu.py``."""
    from minibert.accel.cuda.linear import column_sums
    rng = np.random.default_rng(7)
    tol = {"float64": 1e-13, "float32": 2e-6}[dtype]
    for shape in shapes:
        a, b = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
        prod, plain = column_sums(xp.asarray(a), xp.asarray(b))
        alone, plain2 = column_sums(xp.asarray(a))
        assert alone is None
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        for got, want, scale, name in ((prod, (a64 * b64).sum(0), np.abs(a64 * b64).sum(0), "sum a*b"),
                                       (plain, a64.sum(0), np.abs(a64).sum(0), "sum a"),
                                       (plain2, a64.sum(0), np.abs(a64).sum(0), "sum a, alone")):
            got = np.asarray(got.get() if hasattr(got, "get") else got, dtype=np.float64)
            assert got.shape == (shape[1],), (shape, name)
            err = (np.abs(got - want) / np.maximum(scale, 1e-30)).max(initial=0)
            assert err <= tol, f"column_sums {shape} {name}: error {err:.1e} of the sum of magnitudes"
        again = column_sums(xp.asarray(a), xp.asarray(b))
        for x, y in zip(again, (prod, plain)):        # no atomics: the same bits every time
            np.testing.assert_array_equal(np.asarray(x.get() if hasattr(x, "get") else x),
                                          np.asarray(y.get() if hasattr(y, "get") else y))
        # with a float16 copy made on the way (mixed precision's operand): the sums without it, and the copy
        # to_half's bits, for values beyond float16's range, among its subnormals, inside it, and NaN
        a16 = xp.asarray(np.full(shape, 7.0, np.float16))
        wide = a * np.array([1e5, 1e-6, 1.0], dtype)[np.arange(a.size) % 3].reshape(shape)
        if a.size > 5:
            wide.flat[5] = np.nan
        _, plain3 = column_sums(xp.asarray(wide), a16=a16)
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(np.asarray(a16.get() if hasattr(a16, "get") else a16), wide.astype(np.float16),
                                          err_msg=f"column_sums {shape}: the float16 copy")
        plain4 = column_sums(xp.asarray(wide))[1]
        got, want = (np.asarray(x.get() if hasattr(x, "get") else x) for x in (plain3, plain4))
        if dtype == "float32":          # the same kernel, the same order of adds: the same bits
            np.testing.assert_array_equal(got, want)
        else:                           # a copy only from float32: NumPy's sums, not the kernel's
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-6)
        if dtype == "float32":          # a float16 a (mixed precision's attention gradients), read as it is:
            h = a.astype(np.float16)     # the float32 sums of its widened values, the same bits
            got16 = column_sums(xp.asarray(h))[1]
            assert got16.dtype == np.float32, f"column_sums {shape}: float16 summed in {got16.dtype}"
            want16 = column_sums(xp.asarray(h.astype(np.float32)))[1]
            np.testing.assert_array_equal(*(np.asarray(x.get() if hasattr(x, "get") else x) for x in (got16, want16)),
                                          err_msg=f"column_sums {shape}: a float16 a")
    # each group's last block put its ticket back: the next launch finds every counter at 0
    from minibert.accel.cuda import kernels as cuda_kernels
    tickets = cuda_kernels.tickets()
    assert not np.asarray(tickets.get() if hasattr(tickets, "get") else tickets).any(), "a ticket left taken"


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_column_sums_match_float64_sums(dtype, kernels):
    check_column_sums(np, dtype)


def check_split_qkv(xp):
    """``accel.cuda.ops``'s split_qkv kernel against ``ops.split_qkv``, bit for bit: float32 and float64,
    and mixed precision's float16 product in, rounded to float16 out (ordinary values, sums beyond
    float16's range, among its subnormals, a tie to even, NaN).  Also run by test_gpu.py."""
    from minibert.accel import cuda
    rng = np.random.default_rng(8)
    B, T, A, D = 3, 5, 2, 8                               # qkv (3, 5, 48)
    for dtype in ("float64", "float32"):
        qkv, bias = rng.standard_normal((B, T, 3 * A * D)).astype(dtype), rng.standard_normal(3 * A * D).astype(dtype)
        for got, want in zip(cuda.split_qkv(xp.asarray(qkv), xp.asarray(bias), A), ops.split_qkv(qkv, bias, A)):
            assert got.shape == (B, A, T, D) and got.flags.c_contiguous
            np.testing.assert_array_equal(np.asarray(got.get() if hasattr(got, "get") else got), want)
    p = (rng.standard_normal((B, T, 3 * A * D)) * 4).astype(np.float16)
    b = rng.standard_normal(3 * A * D).astype(np.float32)
    p[0, 0, :4] = [60000, -60000, 1e-7, np.nan]
    b[:4] = [6000.0, -6000.0, -1e-7, 1.0]                   # inf, -inf, a float16 subnormal, NaN
    b[4] = np.float32(2.0 ** -11)                           # 1 + 2^-11 is a tie: to even, 1
    p[:, :, 4] = 1.0
    with np.errstate(over="ignore"):
        want = ops.split_qkv(p, b, A, half_out=True)
    for got, w in zip(cuda.split_qkv(xp.asarray(p), xp.asarray(b), A, half_out=True), want):
        assert got.dtype == np.float16
        np.testing.assert_array_equal(np.asarray(got.get() if hasattr(got, "get") else got), w)


def test_split_qkv_matches_the_reference(kernels):
    check_split_qkv(np)
    assert "split_qkv" in kernels


def test_a_bias_of_the_wrong_shape_is_one_clear_error(kernels):
    x = np.ones((4, 8), np.float32)
    with pytest.raises(ValueError, match=r"gelu_forward: .* must be \(8,\); got \(4,\)"):
        accel.cuda.gelu_forward(x, "none", bias=np.ones(4, np.float32))
    with pytest.raises(ValueError, match=r"dropout_add_layernorm_forward: .* must be \(8,\); got \(1, 8\)"):
        accel.cuda.dropout_add_layernorm_forward(x, x, np.ones(8, np.float32), np.ones(8, np.float32), 1e-12, 0.0,
                                                 None, False, bias=np.ones((1, 8), np.float32))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cross_entropy_kernels_take_a_loss_weight_left_on_the_device(dtype, kernels, rng):
    """In data parallelism the backward's weight is loss_scale * n_here / count, a 0-d device array
    (n_here is the device's count of labelled rows): the same gradient as the number."""
    from minibert.accel.cuda import loss as cuda_loss
    logits = rng.standard_normal((6, 50)).astype(dtype)
    labels = np.array([3, -100, 0, 49, 7, -100])
    loss, cache = cuda_loss.softmax_cross_entropy_forward(logits, labels)
    assert float(cache.denom) == 4.0 and cache.denom.shape == ()
    want = ops.softmax_cross_entropy_backward(2.5, ops.softmax_cross_entropy_forward(logits, labels)[1])
    for dloss in (2.5, np.asarray(2.5, dtype), np.asarray(2.5, np.float64)):
        got = cuda_loss.softmax_cross_entropy_backward(dloss, cache)
        _close(got, want, dtype, f"dloss {type(dloss).__name__}")
    # a weight on the device in float64 (mixed precision's loss scale) is rounded once, as a number is
    for weight in (0.1, 65536.0 * 4 / 7):
        np.testing.assert_array_equal(cuda_loss.softmax_cross_entropy_backward(np.asarray(weight), cache),
                                      cuda_loss.softmax_cross_entropy_backward(weight, cache))
    assert not cuda_kernels.tickets().any(), "the loss's ticket left taken"
    # a label that is no class (the model refuses it before; the op alone does not read past the row)
    loss, _ = cuda_loss.softmax_cross_entropy_forward(logits, np.array([3, -100, 0, 50, 7, -7]))
    assert np.isnan(loss)


def test_gradient_adds_into_the_same_memory_never_share_a_launch(kernels):
    """The stand-in runs a launch's threads one after another, so two adds into one element in one
    launch would still give the right sum here, and race on a GPU: the cut into groups is checked
    on its own.  A group ends where a destination overlaps one of the group's, and not before."""
    from minibert.accel.cuda.grads import groups
    flat = np.zeros(100, np.float32)
    word, decoder_share, bias, other = flat[0:40], flat[0:40], flat[40:50], flat[50:100]
    assert groups([word, bias, other, decoder_share]) == [[0, 1, 2], [3]]
    assert groups([word, bias, flat[39:41], other]) == [[0, 1], [2, 3]]       # one element in common
    assert groups([flat[0:10], flat[10:20], flat[20:30]]) == [[0, 1, 2]]       # touching, not overlapping
    assert groups([]) == []


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("train", [False, True])
@pytest.mark.parametrize("T", [40, 300])
def test_attention_kernels_match_the_reference(dtype, train, T, kernels, rng):
    B, A, D = (3, 2, 8) if T == 40 else (1, 1, 4)
    q, k, v, dout = (rng.standard_normal((B, A, T, D)).astype(dtype) for _ in range(4))
    mask = np.ones((B, T), dtype=np.int64)
    if B == 3:
        mask[1, 25:] = 0
        mask[2] = 0                  # a sequence with every key masked
    bias = ops.attention_mask_bias(mask, dtype)
    u_kernel, u_ref = _uniforms(5, dtype)
    out_k, cache_k = accel.cuda.attention_forward(q, k, v, bias, 0.1, u_kernel, train)
    grads_k = accel.cuda.attention_backward(dout, cache_k)
    assert kernels == ["attention_forward", "attention_backward"]
    out_r, cache_r = ops.attention_forward(q, k, v, bias, 0.1, u_ref, train)
    grads_r = ops.attention_backward(dout, cache_r)
    _close(out_k, out_r, dtype, "context")
    for name, a, b in zip(("dq", "dk", "dv"), grads_k, grads_r):
        _close(a, b, dtype, name)
    assert not np.isnan(out_k).any()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("version", ["v1 naive", "v2a products + block-per-row softmax",
                                     "v2b products + warp-per-row softmax in registers", "v2 products + fused softmax",
                                     "v3 online softmax", "v4 tiled online softmax"])
def test_the_attention_ladder_matches_the_reference(dtype, version, kernels, rng):
    """Each rung of accel/cuda/ladder.py computes the reference's attention output: a padded
    sequence, a fully padded one, scores large enough that an unstable softmax overflows."""
    from minibert.accel.cuda.ladder import LADDER
    B, A, T, D = 3, 2, 37, 16
    q, k, v = (rng.standard_normal((B, A, T, D)).astype(dtype) for _ in range(3))
    q[0, 0] *= 40.0                              # scores of several hundred in one head
    mask = np.ones((B, T), dtype=np.int64)
    mask[1, 29:] = 0
    mask[2] = 0
    bias = ops.attention_mask_bias(mask, dtype)
    want = ops.attention_forward(q, k, v, bias)[0]
    got = LADDER[version](q, k, v, bias)
    assert got.dtype == want.dtype and np.isfinite(got).all()
    _close(got, want, dtype, version)
    _close(LADDER[version](q, k, v, None), ops.attention_forward(q, k, v, None)[0], dtype, version + ", no mask")


def test_the_register_rung_reads_again_what_its_registers_cannot_hold(kernels, rng):
    """v2b keeps 16 values a lane, 512 keys a row: a row of 600 keys has 88 of them read again."""
    from minibert.accel.cuda.ladder import ROW_REGISTERS, attention_warp_rows
    B, A, T, D = 1, 2, 600, 8
    assert T > 32 * ROW_REGISTERS
    q, k, v = (rng.standard_normal((B, A, T, D)) for _ in range(3))
    mask = np.ones((B, T), dtype=np.int64)
    mask[0, 550:] = 0                            # masked keys among those read again
    bias = ops.attention_mask_bias(mask, np.float64)
    _close(attention_warp_rows(q, k, v, bias), ops.attention_forward(q, k, v, bias)[0], "float64", "v2b, T 600")


def test_the_online_rungs_refuse_a_head_they_cannot_hold(kernels, rng):
    from minibert.accel.cuda.ladder import MAX_HEAD_SIZE, TILED_MAX_HEAD_SIZE, attention_online, attention_tiled
    for fn, limit in ((attention_online, MAX_HEAD_SIZE), (attention_tiled, TILED_MAX_HEAD_SIZE)):
        q = rng.standard_normal((1, 1, 4, limit + 1))
        with pytest.raises(ValueError, match=f"head size at most {limit}"):
            fn(q, q, q)


def _small_config(**kw):
    return mb.BertConfig(vocab_size=301, hidden_size=48, num_hidden_layers=2, num_attention_heads=3,
                         intermediate_size=72, max_position_embeddings=32, **kw)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("bias_correction", [True, False])
def test_adamw_kernel_matches_the_reference(dtype, bias_correction, kernels, rng):
    from minibert.optim import AdamW
    models = [mb.BertForPreTraining(_small_config(), seed=2, dtype=dtype, kernels=k)
              for k in (accel.cuda, "reference")]
    opts = [AdamW(m.params, lr=1e-2, weight_decay=0.1, bias_correction=bias_correction) for m in models]
    for step in range(3):
        g = rng.standard_normal(models[0].params.grad.shape).astype(dtype)
        for m, opt in zip(models, opts):
            m.params.grad[...] = g
            opt.step(lr=1e-2 * (step + 1))
    assert kernels.count("adamw_update") == 3
    for name, a, b in (("weights", models[0].params.data, models[1].params.data),
                       ("m", opts[0].m, opts[1].m), ("v", opts[0].v, opts[1].v)):
        _close(a, b, dtype, "AdamW " + name)


# ------------------------------------------------------------------ the model on them
def _three_steps(path, dtype, batch, reseed, mixed=False):
    """(losses, weights) after three training steps with dropout on, on ops ``path``;
    ``reseed(model, step)`` sets the step's dropout stream.  On ``accel.cuda`` the gradients' adds
    wait for the end of each backward, as on a GPU (``add_grads``)."""
    from minibert.optim import AdamW
    m = mb.BertForPreTraining(_small_config(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1),
                              seed=3, dtype=dtype, kernels=path, mixed_precision=mixed)
    m.params.defer_adds = path is accel.cuda
    opt = AdamW(m.params, lr=1e-3)
    losses = []
    for step in range(3):
        reseed(m, step)
        losses.append(float(m.forward(**batch, train=True).loss))
        m.backward()
        opt.step()
    return losses, m.params.data.copy()


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-12), ("float32", 1e-5)])
def test_training_steps_through_the_kernels_follow_the_reference(dtype, tol, kernels, rng):
    """Three steps with dropout on: the same losses and weights, the same dropout masks."""
    batch = padded_batch(rng, 301)
    batch["attention_mask"][2] = 0      # a fully padded sequence as well
    runs = [_three_steps(path, dtype, batch, lambda m, step: m.seed_dropout((0, step)))
            for path in (accel.cuda, "reference")]
    assert set(KERNEL_FUNCTIONS) <= set(kernels)
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=tol)
    _close(runs[0][1], runs[1][1], "float32" if dtype == "float32" else "float64", "weights")
    assert runs[0][0][-1] < runs[0][0][0]


def test_mixed_precision_steps_through_the_kernels_follow_the_reference(kernels, rng):
    """Mixed precision on the kernels: float16 attention operands read and written by the kernels,
    the weight gradients added in float16 and widened by ``add_grads``; against the reference's mixed
    precision, float16 roundings apart (a product's float32 sums in another order may round to the
    neighbouring float16)."""
    batch = padded_batch(rng, 301)
    runs = [_three_steps(path, "float32", batch, lambda m, step: m.seed_dropout((0, step)), mixed=True)
            for path in (accel.cuda, "reference")]
    assert {"attention_forward", "attention_backward", "add_grads"} <= set(kernels)
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=2e-3)
    err = np.abs(runs[0][1] - runs[1][1]).max() / np.abs(runs[1][1]).max()
    assert err < 2e-3, f"weights after three mixed-precision steps: relative error {err:.1e}"
    assert runs[0][0][-1] < runs[0][0][0]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_keyed_dropout_kernels_compute_the_counter_numbers(dtype, kernels, rng):
    """Given a counter-based generator, the dropout and attention kernels compute their own uniforms
    in C: the masks are those of the reference ops reading the same numbers from NumPy."""
    from minibert.accel.counter_rng import CounterUniform
    x = rng.standard_normal((5, 7, 33)).astype(dtype)
    B, A, T, D = 2, 3, 37, 8
    q, k, v, dout = (rng.standard_normal((B, A, T, D)).astype(dtype) for _ in range(4))
    mask = np.ones((B, T), dtype=np.int64)
    mask[1, 30:] = 0
    bias = ops.attention_mask_bias(mask, dtype)
    results = []
    for path, L in (("kernel", accel.cuda), ("reference", ops)):
        gen = CounterUniform(2024, np, dtype)
        y, dmask = L.dropout_forward(x, 0.1, gen, True)
        out, cache = L.attention_forward(q, k, v, bias, 0.1, gen, True)
        results.append((y, dmask, out, L.attention_backward(dout, cache), gen.calls))
    assert kernels[:2] == ["dropout_forward", "attention_forward"]
    (yk, mk, ok, gk, ck), (yr, mr, orf, gr, cr) = results
    assert ck == cr == 2                          # one key per dropout, on both paths
    np.testing.assert_array_equal(mk, mr)         # the very same mask
    assert 0.85 < (mk != 0).mean() < 0.95
    _close(yk, yr, dtype, "dropout y")
    _close(ok, orf, dtype, "attention out")
    for name, a, b in zip(("dq", "dk", "dv"), gk, gr):
        _close(a, b, dtype, name)


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-12), ("float32", 1e-5)])
def test_training_steps_with_counter_dropout_follow_the_reference(dtype, tol, kernels, rng):
    """A GPU model's dropout (counter-based, seed_dropout on CuPy) through the kernels and through the
    reference ops: the same losses and weights over three steps."""
    from minibert.accel.counter_rng import CounterUniform

    def counter_stream(m, step):        # what seed_dropout makes on CuPy
        m._uniform = CounterUniform(1000 + step, np, m.dtype)
    batch = padded_batch(rng, 301)
    runs = [_three_steps(path, dtype, batch, counter_stream) for path in (accel.cuda, "reference")]
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=tol)
    _close(runs[0][1], runs[1][1], dtype, "weights")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_batch_without_mlm_labels_launches_no_empty_grid(dtype, kernels, rng):
    # the MLM head gets zero rows: a launch of no blocks would be a CUDA error
    ids = rng.integers(5, 301, (2, 6))
    kw = dict(mlm_labels=np.full((2, 6), -100), nsp_labels=np.array([0, 1]))
    m = mb.BertForPreTraining(_small_config(), seed=2, dtype=dtype)
    ref = m.forward(ids, **kw, train=False)
    m.backward()
    g_ref = m.params.grad.copy()
    m = mb.BertForPreTraining(_small_config(), seed=2, dtype=dtype, kernels=accel.cuda)
    out = m.forward(ids, **kw, train=False)
    m.backward()
    assert "layernorm_backward" in kernels
    assert abs(float(out.loss) - float(ref.loss)) <= 1e-6 * float(ref.loss)
    assert np.linalg.norm(m.params.grad - g_ref) <= 1e-5 * np.linalg.norm(g_ref)


# ------------------------------------------------------------------- float16 in the kernels
HALF_ROUNDTRIP = r"""
extern "C" __global__ void half_roundtrip(const unsigned short* h, float* f, const float* x, unsigned short* hx,
                                          const long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { f[i] = half_to_float(h[i]); hx[i] = float_to_half(x[i]); }
}
"""


def half_cases():
    """Every float16, and float32s that test the rounding to float16: each midpoint between two
    neighbouring float16s (ties go to the even one), a float32 step either side of it, the edges of
    the range (65504, 65520 and on: inf; the subnormals; float32 subnormals), and random bit patterns."""
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    pos = np.sort(every[np.isfinite(every) & (every.view(np.uint16) < 0x8000)].astype(np.float64))
    mid = ((pos[:-1] + pos[1:]) / 2).astype(np.float32)            # exact in float32
    near = np.concatenate([mid, np.nextafter(mid, np.float32(0)), np.nextafter(mid, np.float32(np.inf))])
    edges = np.array([0.0, 65504, 65519.996, 65520, 65536, 1e10, np.inf, np.nan, 2.0 ** -24, 2.0 ** -25,
                      3 * 2.0 ** -26, 2.0 ** -14, 2.0 ** -14 - 2.0 ** -25, 1e-40, 1e-45], np.float32)
    rand = np.random.default_rng(0).integers(0, 1 << 32, 100_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([near, edges, rand])
    return every, np.concatenate([x, -x])


def check_half_conversions(xp, raw_kernel):
    """half_to_float on every float16 and float_to_half on half_cases() against NumPy's conversions
    (the same bits; any NaN for a NaN)."""
    every, x = half_cases()
    n = max(every.size, x.size)
    h = np.zeros(n, np.float16)
    h[:every.size] = every
    xs = np.zeros(n, np.float32)
    xs[:x.size] = x
    f, hx = xp.empty(n, xp.float32), xp.empty(n, xp.float16)
    raw_kernel((-(-n // 256),), (256,), (xp.asarray(h), f, xp.asarray(xs), hx, np.int64(n)))
    f, hx = (a.get() if hasattr(a, "get") else a for a in (f, hx))
    want = every.astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(f[:every.size][~nan].view(np.uint32), want[~nan].view(np.uint32))
    assert np.isnan(f[:every.size][nan]).all()
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    nan = np.isnan(want)
    got = hx[:x.size]
    bad = np.flatnonzero(got[~nan].view(np.uint16) != want[~nan].view(np.uint16))
    assert bad.size == 0, [(float(x[~nan][i]), float(got[~nan][i]), float(want[~nan][i])) for i in bad[:5]]
    assert np.isnan(got[nan]).all()


def test_the_kernels_convert_float16_as_numpy_does(kernels):
    check_half_conversions(np, cuda_on_cpu.fake_cupy().RawKernel(
        cuda_source.REDUCE.replace("CTYPE", "float") + HALF_ROUNDTRIP, "half_roundtrip"))


# ------------------------------------------------------------------- the CUDA compiler
@pytest.mark.skipif(cuda_on_cpu.nvcc() is None, reason="no nvcc (CUDA toolkit) on this machine")
@pytest.mark.parametrize("ctype", ["float", "double"])
def test_the_kernels_compile_for_a_gpu(ctype, kernels, tmp_path):
    """The same source through NVIDIA's compiler: what the host compiler accepts and CUDA would not."""
    import subprocess

    def compiles(name, parts, kernel_names):
        source = tmp_path / f"{name}.cu"
        source.write_text("\n".join([cuda_source.REDUCE.replace("CTYPE", ctype)] + parts))
        done = subprocess.run([cuda_on_cpu.nvcc(), "--ptx", "-arch=sm_80", "--std=c++14", str(source),
                               "-o", str(tmp_path / f"{name}.ptx")], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        ptx = (tmp_path / f"{name}.ptx").read_text()
        for kernel in kernel_names:
            assert f".entry {kernel}(" in ptx, kernel

    parts = [cuda_source.LAYERNORM_FWD, cuda_source.LAYERNORM_BWD, cuda_source.typed(cuda_source.ATTENTION_FWD, False),
             cuda_source.typed(cuda_source.ATTENTION_BWD, False), cuda_linear.COLSUM, cuda_source.ADD_MANY,
             cuda_loss.XENT_FWD, cuda_loss.XENT_BWD, cuda_act.ACT_FWD, cuda_act.ACT_BWD,
             cuda_ops.SPLIT_QKV, cuda_ops.MERGE_QKV.replace("ELEM_T", ctype), loss_scaling.SCALE_AND_COUNT]
    for k in [*cuda_kernels.elementwise().values(), *cuda_kernels.reductions().values()]:
        k = getattr(k, "map", k)                      # a reduction: its per-element expression
        parts.append(k.cuda_source(ctype))
    compiles("kernels", parts, ("layernorm_fwd", "layernorm_bwd", "attention_fwd", "attention_bwd", "minibert_adamw",
                                "act_fwd", "act_bwd", "split_qkv", "merge_qkv", "minibert_mask_bias", "colsum", "add_many", "xent_fwd",
                                "xent_bwd", "scale_and_count", "minibert_dropout_fwd_keyed", "minibert_sum_of_squares_map"))
    from minibert.accel.cuda import ladder     # the ladder's two softmax rungs (the others hold constants to set)
    compiles("ladder", [ladder.BLOCK_SOFTMAX, ladder.WARP_SOFTMAX], ("softmax_block_rows", "softmax_warp_rows"))
    if ctype == "float":      # mixed precision's attention kernels: float16 in and out, float32 inside
        compiles("half", [HALF_ROUNDTRIP, cuda_source.typed(cuda_source.ATTENTION_FWD, True),
                          cuda_source.typed(cuda_source.ATTENTION_BWD, True)],
                 ("attention_fwd", "attention_bwd", "half_roundtrip"))
        from minibert.accel.cuda import flash_source as fs      # fused attention: the tensor cores' PTX
        compiles("flash", [fs.FLASH_COMMON, fs.FLASH_FWD, fs.FLASH_BWD_DQ, fs.FLASH_BWD_DKDV],
                 ("flash_fwd", "flash_bwd_dq", "flash_bwd_dkdv"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_gradients_sum_of_squares_is_their_dot_product(dtype, kernels, rng):
    """``grads.sum_of_squares`` (the clipping norm's square, one launch without cuBLAS) against the dot
    product in float64: a sum of n positive terms, each rounding at most n ulp of the total."""
    from minibert.accel.cuda import grads
    for n in (1, 31, 1000, 70_001):
        g = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(dtype)
        got, want = float(grads.sum_of_squares(g)), float(np.dot(g.astype(np.float64), g.astype(np.float64)))
        assert abs(got - want) <= n * np.finfo(dtype).eps * want, (n, got, want)
