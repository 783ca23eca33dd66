"""The float32 CPU kernels (minibert/accel/) against the reference ops (minibert/ops/).

Most fast functions repeat the reference's float32 operations in the same
order and must return the same bits; the exact GELU forward (float64 erf
per block), the LayerNorm parameter gradients (sums per block) and the
products cut into runs of rows (a BLAS kernel may round a run differently
from the whole product) are compared within float32 tolerances.  Every fast function must also give the
same bits with one thread and with several (the blocks do not depend on the
thread count).
"""
import contextlib
import warnings

import numpy as np
import pytest
from scipy.special import erf as scipy_erf

import minibert as mb
from minibert import accel, ops as R
from minibert.accel import blas, cpu as F, erf as erf_mod, pool, rng as accel_rng
from minibert.accel.cpu import elementwise, layernorm, loss as cpu_loss
from conftest import padded_batch


@contextlib.contextmanager
def threads(n, block=None):
    old_n, old_block = accel.num_threads(), pool.BLOCK
    accel.set_num_threads(n)
    if block:
        pool.BLOCK = block  # small blocks: many of them even on small test arrays
    try:
        yield
    finally:
        accel.set_num_threads(old_n)
        pool.BLOCK = old_block


def f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def same(a, b):
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        np.testing.assert_array_equal(x, y)


# ----------------------------------------------------------------------------- erf
def test_erf_within_one_float32_ulp_of_scipy():
    # a dense grid over the whole range, the tails where erf rounds to +-1, tiny values, specials
    x = np.concatenate([np.linspace(-6, 6, 1_200_001), np.geomspace(1e-38, 1.0, 20_000),
                        -np.geomspace(1e-38, 1.0, 20_000), [0.0, 3.9, 3.95, 4.0, 10.0, 1e30]])
    x = x.astype(np.float32)
    got = erf_mod.erf(x)
    assert got.dtype == np.float32
    ref = scipy_erf(x.astype(np.float64)).astype(np.float32)   # the exact value, rounded once
    ulps = np.abs(got.astype(np.float64) - ref) / np.spacing(np.abs(ref))
    assert ulps.max() <= 1.0, f"max error {ulps.max():.2f} ulp at x={x[ulps.argmax()]}"
    assert np.abs(got).max() <= 1.0
    np.testing.assert_array_equal(erf_mod.erf(np.array([np.inf, -np.inf], np.float32)), [1.0, -1.0])
    assert np.isnan(erf_mod.erf(np.array([np.nan], np.float32)))[0]


def test_erf_coefficients_come_from_the_fit():
    # a quick, coarser run of the fit that produced the constants lands next to them
    p, q, err = erf_mod.fit_erf_rational(5, 5, iterations=15, points=4000)
    assert err < 5e-8
    assert np.allclose(p, erf_mod._ERF_P, rtol=0.05) and np.allclose(q, erf_mod._ERF_Q, rtol=0.05)


# ---------------------------------------------------------------------------- GELU
def test_exact_gelu_forward_within_float32_rounding(rng):
    x = f32(rng, 64, 300, scale=3.0)
    y, (_, cdf, _) = F.gelu_forward(x, "none")
    y_ref, (_, cdf_ref, _) = R.gelu_forward(x, "none")
    x64 = x.astype(np.float64)
    exact_cdf = 0.5 * (1 + scipy_erf(x64 / np.sqrt(2)))
    # Phi = (1 + erf) / 2 carries erf's absolute error (~1e-8 near erf = -1) in both
    # forms; the fast form rounds to float32 once, the reference after every step
    eps = float(np.spacing(np.float32(1)))
    err_fast = np.abs(cdf - exact_cdf)
    err_ref = np.abs(cdf_ref - exact_cdf)
    assert err_fast.max() <= eps and err_fast.max() <= err_ref.max()
    y_exact = x64 * exact_cdf
    assert np.all(np.abs(y - y_exact) <= eps * (np.abs(y_exact) + np.abs(x64)))
    assert np.abs(y - y_exact).max() <= np.abs(y_ref - y_exact).max()


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward_and_tanh_forward_equal_the_reference(rng, approximate):
    x, dy = f32(rng, 50, 70, scale=3.0), f32(rng, 50, 70)
    y, cache = F.gelu_forward(x, approximate)
    dx = F.gelu_backward(dy, cache)
    y_ref, _ = R.gelu_forward(x, approximate)
    dx_ref = R.gelu_backward(dy, cache)
    same(dx, dx_ref)
    if approximate == "tanh":
        same(y, y_ref)


# ----------------------------------------------------------------------- LayerNorm
def test_layernorm_equals_the_reference(rng):
    x, g, b, dy = f32(rng, 3, 41, 24, scale=2.0), f32(rng, 24), f32(rng, 24), f32(rng, 3, 41, 24)
    with threads(2, block=24 * 10):
        y, cache = F.layernorm_forward(x, g, b, 1e-12)
        dx, dg, db = F.layernorm_backward(dy, cache)
    y_ref, cache_ref = R.layernorm_forward(x, g, b, 1e-12)
    dx_ref, dg_ref, db_ref = R.layernorm_backward(dy, cache_ref)
    same((y, cache[0], cache[1], dx), (y_ref, cache_ref[0], cache_ref[1], dx_ref))
    np.testing.assert_allclose(dg, dg_ref, rtol=1e-5, atol=1e-5)  # sums over rows, in blocks
    np.testing.assert_allclose(db, db_ref, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------- attention
def attention_inputs(rng, B=3, A=2, T=9, D=4):
    q, k, v, dout = (f32(rng, B, A, T, D) for _ in range(4))
    mask = np.ones((B, T), dtype=np.int64)
    mask[0, T - 3:] = 0
    mask[-1] = 0  # a fully padded sequence
    return q, k, v, dout, F.attention_mask_bias(mask, np.float32)


@pytest.mark.parametrize("train", [False, True])
def test_attention_equals_the_reference(rng, train):
    q, k, v, dout, bias = attention_inputs(rng)
    u = rng.random((3, 2, 9, 9), dtype=np.float32)
    draw = lambda shape: u
    with threads(2, block=9 * 4):
        out, cache = F.attention_forward(q, k, v, bias, 0.2, draw, train)
        grads = F.attention_backward(dout, cache)
    out_ref, cache_ref = R.attention_forward(q, k, v, bias, 0.2, draw, train)
    grads_ref = R.attention_backward(dout, cache_ref)
    same(out, out_ref)
    same(tuple(grads), tuple(grads_ref))
    assert not grads[0][-1].any()  # the fully padded sequence


def test_dropout_equals_the_reference(rng):
    x, dout = f32(rng, 20, 33), f32(rng, 20, 33)
    u = rng.random(x.shape, dtype=np.float32)
    out, mask = F.dropout_forward(x, 0.3, lambda s: u, True)
    out_ref, mask_ref = R.dropout_forward(x, 0.3, lambda s: u, True)
    dx_ref = R.dropout_backward(dout, mask_ref)
    same((out, mask, F.dropout_backward(dout, mask)), (out_ref, mask_ref, dx_ref))


# ------------------------------------------------------------ softmax cross-entropy
def test_cross_entropy_equals_the_reference(rng):
    logits = f32(rng, 13, 501, scale=4.0)
    labels = rng.integers(0, 501, 13)
    labels[[2, 7]] = -100
    loss, cache = F.softmax_cross_entropy_forward(logits, labels)
    d = F.softmax_cross_entropy_backward(1.0, cache)
    loss_ref, cache_ref = R.softmax_cross_entropy_forward(logits, labels)
    d_ref = R.softmax_cross_entropy_backward(1.0, cache_ref)
    assert loss == loss_ref and loss.dtype == np.float32
    same(d, d_ref)


# ---------------------------------------------------------------------- products
@pytest.mark.parametrize("M,K,N,transposed", [(512, 64, 96, False), (300, 48, 1000, False),
                                              (96, 512, 80, True), (7, 33, 5, False),
                                              (160, 1000, 128, False), (100, 1000, 128, False),
                                              (4100, 24, 40, False)])
def test_gemm_gives_the_same_bits_with_any_thread_count(rng, M, K, N, transposed):
    # the shapes of linear_forward (x W^T) and linear_backward (dy^T x, a transposed view);
    # (160, 1000) @ (1000, 128): a shape where OpenBLAS's own threads change the bits
    if not blas._blas_controller():
        pytest.skip("threadpoolctl is not installed")
    a = f32(rng, K, M).T if transposed else f32(rng, M, K)
    b, bias = f32(rng, N, K).T, f32(rng, N)
    with blas._blas_controller().limit(limits=1, user_api="blas"):
        # by construction: each run of rows is one single-threaded BLAS call, whoever makes it
        runs = np.concatenate([a[r0:r1] @ b for r0, r1 in blas.gemm_blocks(M)])
        whole = a @ b
    # what any order of float32 sums may be off by: K roundings of the sum of |terms|
    bound = K * np.finfo(np.float32).eps * (np.abs(a) @ np.abs(b))
    for n in (1, 2, 3, 4):
        with threads(n):
            np.testing.assert_array_equal(blas.gemm(a, b), runs)
            np.testing.assert_array_equal(blas.gemm(a, b, bias), runs + bias)
    assert (np.abs(runs - whole) <= bound).all()


@pytest.mark.parametrize("M", [0, 1, 63, 127, 128, 200, 511, 512, 1000, 4096, 5000, 100_000])
def test_gemm_cuts_rows_by_the_shape_alone(M):
    runs = blas.gemm_blocks(M)
    n = len(runs)
    assert n & (n - 1) == 0 and n <= 16                     # 1, 2, 4, 8 or 16: even shares for 2^k threads
    assert runs[0][0] == 0 and runs[-1][1] == M
    assert all(r1 == s0 for (_, r1), (s0, _) in zip(runs, runs[1:]))
    lengths = [r1 - r0 for r0, r1 in runs]
    assert max(lengths) - min(lengths) <= 1
    assert n == 1 or min(lengths) >= 64                      # no run too short for BLAS to be efficient
    assert n == 16 or M < 2 * n * 256                        # long products are cut finely enough


def test_gemm_and_matmul_without_threadpoolctl(rng, monkeypatch):
    # without threadpoolctl the controller is False (not None): one plain product, no crash
    monkeypatch.setattr(blas, "_blas", False)
    a, b, bias = f32(rng, 300, 20), f32(rng, 20, 7), f32(rng, 7)
    with threads(2):
        np.testing.assert_allclose(blas.gemm(a, b, bias), a @ b + bias, rtol=1e-6, atol=1e-6)
        s, t = f32(rng, 4, 5, 6), f32(rng, 4, 6, 3)
        np.testing.assert_allclose(blas.matmul(s, t), s @ t, rtol=1e-6, atol=1e-6)


def test_gemm_leaves_the_blas_thread_count_as_it_was(rng):
    ctl = blas._blas_controller()
    if not ctl:
        pytest.skip("threadpoolctl is not installed")
    before = [i["num_threads"] for i in ctl.info() if i["user_api"] == "blas"]
    with threads(2):
        blas.gemm(f32(rng, 256, 32), f32(rng, 32, 16))
    assert [i["num_threads"] for i in ctl.info() if i["user_api"] == "blas"] == before


def test_the_worker_threads_follow_the_callers_error_state(rng):
    # inf * 0 in every row block: quiet where the caller said so, raised where it asked for that
    a, b = f32(rng, 512, 16), f32(rng, 16, 8)
    a[::64, 0], b[0, :] = np.inf, 0.0
    with threads(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with np.errstate(invalid="ignore"):
                assert np.isnan(blas.gemm(a, b)[::64]).all()
        with np.errstate(invalid="raise"), pytest.raises(FloatingPointError):
            blas.gemm(a, b)


def test_the_fast_cpu_ops_keep_freed_memory_on_glibc_and_a_reference_model_sets_nothing(monkeypatch):
    import platform
    from minibert.accel import memory
    calls = []
    monkeypatch.setattr(memory, "_malloc_tuned", None)
    monkeypatch.setattr(memory, "keep_freed_memory", lambda real=memory.keep_freed_memory: calls.append(1) or real())
    config = mb.BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=16, max_position_embeddings=8)
    mb.BertModel(config)
    mb.BertModel(config, dtype="float64", kernels="fast")     # float64: the reference ops
    assert calls == []                               # no process-wide setting without the fast CPU ops
    assert mb.BertModel(config, kernels="fast").ops is F and calls == [1]
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert memory.keep_freed_memory() is True    # mallopt accepted both settings
    else:
        assert memory.keep_freed_memory() is False


@pytest.mark.skipif(not accel.keep_freed_memory(), reason="needs glibc's malloc")
def test_a_large_array_freed_and_made_again_costs_no_page_faults():
    # The MLM logits and their gradient are over 32 MiB, where glibc would map (and
    # the kernel zero) fresh pages for every step; kept in the heap they are reused.
    import resource
    n = (48 << 20) // 4                              # 48 MiB of float32
    a = np.ones(n, dtype=np.float32)
    del a
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    a = np.ones(n, dtype=np.float32)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    assert a[-1] == 1.0
    assert faults < 8, f"{faults} page faults to make the same 48 MiB array again"


# ------------------------------------------------------------------- threads: bits
def test_every_fast_function_gives_the_same_bits_with_any_thread_count(rng):
    x, dy = f32(rng, 37, 48, scale=2.0), f32(rng, 37, 48)
    g, b = f32(rng, 48), f32(rng, 48)
    q, k, v, dout, bias = attention_inputs(rng, T=11)
    u = rng.random((3, 2, 11, 11), dtype=np.float32)
    logits, labels = f32(rng, 9, 300, scale=3.0), rng.integers(0, 300, 9)

    def run():
        out = [erf_mod.erf(x)]
        for kind in ("none", "tanh"):
            y, c = elementwise.gelu_forward(x, kind)
            out += [y, elementwise.gelu_backward(dy, c)]
        y, c = layernorm.layernorm_forward(x, g, b, 1e-12)
        out += [y, *layernorm.layernorm_backward(dy, c)]
        o, c = F.attention_forward(q, k, v, bias, 0.1, lambda s: u, True)
        out += [o, *F.attention_backward(dout, c)]
        loss, c = cpu_loss.softmax_cross_entropy_forward(logits, labels)
        out += [loss, cpu_loss.softmax_cross_entropy_backward(1.0, c)]
        return out

    with threads(1, block=64):
        one = run()
    for n in (2, 3):
        with threads(n, block=64):
            for a, b_ in zip(one, run()):
                np.testing.assert_array_equal(a, b_)


def test_every_fast_function_takes_zero_rows(rng):
    # a batch with no labelled MLM position sends zero rows through the MLM head
    x, dy, g, b = f32(rng, 0, 16), f32(rng, 0, 16), f32(rng, 16), f32(rng, 16)
    for kind in ("none", "tanh"):
        y, c = elementwise.gelu_forward(x, kind)
        assert y.shape == (0, 16) and elementwise.gelu_backward(dy, c).shape == (0, 16)
    y, c = layernorm.layernorm_forward(x, g, b, 1e-12)
    dx, dg, db = layernorm.layernorm_backward(dy, c)
    assert y.shape == dx.shape == (0, 16)
    same((dg, db), (np.zeros(16, np.float32), np.zeros(16, np.float32)))
    assert blas.gemm(x, f32(rng, 16, 5)).shape == (0, 5)
    loss, c = cpu_loss.softmax_cross_entropy_forward(f32(rng, 0, 7), np.zeros(0, np.int64))
    assert loss == 0 and cpu_loss.softmax_cross_entropy_backward(1.0, c).shape == (0, 7)


@pytest.mark.parametrize("nsp", [True, False])
def test_a_batch_without_mlm_labels_trains_like_the_reference(rng, nsp):
    # loss = NSP alone (or 0): the MLM head's gradient is zero, the rest equals the reference's
    config = mb.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=32, max_position_embeddings=8)
    ids = rng.integers(5, 50, (2, 6))
    kw = dict(mlm_labels=np.full((2, 6), -100), nsp_labels=np.array([0, 1]) if nsp else None)

    def step(kernels):
        model = mb.BertForPreTraining(config, seed=3, kernels=kernels)
        out = model.forward(ids, **kw, train=False)
        model.backward()
        return float(out.loss), model.params.grad.copy(), model

    loss, grad, model = step("fast")
    loss_ref, grad_ref, _ = step("reference")
    assert loss == loss_ref
    np.testing.assert_allclose(grad, grad_ref, rtol=1e-5, atol=1e-7)
    assert not model.params.grads["cls.predictions.transform.LayerNorm.weight"].any()
    assert bool(np.abs(grad).sum() > 0) == nsp


# ----------------------------------------------------------------- the whole model
def test_model_step_with_and_without_fast_paths(rng):
    config = mb.BertConfig(vocab_size=301, hidden_size=48, num_hidden_layers=2, num_attention_heads=3,
                           intermediate_size=80, max_position_embeddings=32)
    batch = padded_batch(rng, config.vocab_size, B=4, T=17, n_labels=(3, 2, 1))

    def step(kernels):
        model = mb.BertForPreTraining(config, seed=5, dtype="float32", kernels=kernels)
        out = model.forward(**batch, train=True)  # dropout on: the same masks either way
        model.backward()
        return float(out.loss), model.params.grad.copy()

    with threads(2, block=256):
        loss, grad = step("fast")
    loss_ref, grad_ref = step("reference")
    assert abs(loss - loss_ref) <= 1e-6 * abs(loss_ref)
    assert np.linalg.norm(grad - grad_ref) <= 1e-5 * np.linalg.norm(grad_ref)


# --------------------------------------------------------------------------- AdamW
@pytest.mark.parametrize("wd", [0.01, 0.0])
def test_adamw_fast_equals_reference_bit_for_bit(rng, wd):
    from minibert.optim import AdamW
    from minibert.model.params import ParamSpec, ParamStore
    # a decayed group that ends inside a block, several blocks, three steps
    specs = [ParamSpec("a.weight", (70, 53), "normal", True), ParamSpec("a.bias", (70,), "zeros", False),
             ParamSpec("b.weight", (33, 41), "normal", True), ParamSpec("LayerNorm.weight", (41,), "ones", False)]

    def run(ops):
        store = ParamStore(specs, np, np.float32, ops)
        store.init(3, 0.02)
        opt = AdamW(store, lr=1e-2, weight_decay=wd)
        r = np.random.default_rng(7)
        for _ in range(3):
            store.grad[...] = r.standard_normal(store.grad.shape).astype(np.float32)
            opt.step()
        return store.data.copy(), opt.m.copy(), opt.v.copy()

    with threads(2, block=256):
        got = run(F)
    ref = run(R)
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------ uniform draws
@pytest.mark.parametrize("shapes", [[(32, 4, 128, 128), (4097, 33), (7,), (64, 2048)],
                                    [(3,), (300, 301), (5000, 41)]])
def test_uniform_draws_the_serial_stream_on_any_thread_count(shapes):
    # a sequence of draws, odd sizes included (a half-used 64-bit output in between)
    ref_gen = np.random.default_rng(11)
    ref = [ref_gen.random(s, dtype=np.float32) for s in shapes]
    for n in (1, 2, 3):
        with threads(n):
            old_min = accel_rng._UNIFORM_MIN
            accel_rng._UNIFORM_MIN = 1000       # the small arrays take the parallel path too
            try:
                gen = np.random.default_rng(11)
                got = [accel_rng.uniform(gen, s) for s in shapes]
            finally:
                accel_rng._UNIFORM_MIN = old_min
        for a, b in zip(got, ref):
            assert a.shape == b.shape and a.dtype == np.float32
            np.testing.assert_array_equal(a, b)
        # and the generator carries on exactly where one serial stream would be
        st, st_ref = gen.bit_generator.state, ref_gen.bit_generator.state
        assert st["state"] == st_ref["state"] and st["has_uint32"] == st_ref["has_uint32"]
        if st["has_uint32"]:
            assert st["uinteger"] == st_ref["uinteger"]
        after = np.random.default_rng(11)
        for s in shapes:
            after.random(s, dtype=np.float32)
        np.testing.assert_array_equal(gen.random(9, dtype=np.float32), after.random(9, dtype=np.float32))


def test_a_training_step_gives_the_same_bits_with_any_thread_count():
    # every fast path and every product is cut the same way whatever the pool's size
    config = mb.BertConfig.from_preset("tiny", vocab_size=1000)
    rng = np.random.default_rng(5)
    ids = rng.integers(5, 1000, (8, 40))
    labels = np.where(rng.random((8, 40)) < 0.5, ids, -100)   # 160 labelled rows: one decoder product
    grads = []
    for n in (1, 2, 3):
        with threads(n):
            model = mb.BertForPreTraining(config, seed=0, kernels="fast")
            out = model.forward(ids, mlm_labels=labels, nsp_labels=np.zeros(8, dtype=np.int64), train=True)
            model.backward()
            grads.append((float(out.loss), model.params.grad.copy()))
    for loss, g in grads[1:]:
        assert loss == grads[0][0]
        np.testing.assert_array_equal(g, grads[0][1])
