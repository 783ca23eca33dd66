"""The same model on CuPy: outputs and gradients equal to the NumPy model's.

Skipped, with the reason, where CuPy or a CUDA GPU is missing.
"""
import numpy as np
import pytest

import minibert as mb
from conftest import padded_batch


def _gpu_reason():
    try:
        import cupy
    except ImportError:
        return 'CuPy is not installed (pip install "minibert[gpu]")'
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            return "no CUDA GPU is visible"
    except Exception as exc:  # no driver
        return f"no usable CUDA GPU ({type(exc).__name__})"
    return None


REASON = _gpu_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=REASON or "")]


def cfg(**kw):
    return mb.BertConfig(vocab_size=301, hidden_size=48, num_hidden_layers=2, num_attention_heads=3,
                         intermediate_size=72, max_position_embeddings=32,
                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **kw)


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-10), ("float32", 1e-4)])
@pytest.mark.parametrize("act", ["gelu", "gelu_new"])
@pytest.mark.parametrize("kernels", ["reference", "fast"])
def test_cupy_matches_numpy(dtype, tol, act, kernels, rng):
    import cupy
    cpu = mb.BertForPreTraining(cfg(hidden_act=act), seed=4, dtype=dtype, kernels=kernels)
    gpu = mb.BertForPreTraining(cfg(hidden_act=act), seed=4, dtype=dtype, device="cuda", kernels=kernels)
    assert isinstance(gpu.params.data, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(gpu.params.data), cpu.params.data)  # same init
    batch = padded_batch(rng, 301, B=3, T=10)
    batch["attention_mask"][2] = 0  # a fully padded sequence too
    a = cpu.forward(**batch, train=False)
    b = gpu.forward(**{k: cupy.asarray(v) for k, v in batch.items()}, train=False)
    assert abs(float(a.loss) - float(b.loss)) / float(a.loss) < tol
    np.testing.assert_allclose(cupy.asnumpy(b.mlm_logits), a.mlm_logits, rtol=tol, atol=tol)
    cpu.backward()
    gpu.backward()
    g_cpu, g_gpu = cpu.grad_state_dict(), gpu.grad_state_dict()
    for name, g in g_cpu.items():
        diff = np.linalg.norm(cupy.asnumpy(g_gpu[name]) - g)
        assert diff <= tol * max(np.linalg.norm(g), 1e-6), name


def test_gpu_dropout_is_seeded(rng):
    import cupy
    c = mb.BertConfig.from_preset("tiny", vocab_size=301)
    batch = padded_batch(rng, 301)
    losses = [float(mb.BertForPreTraining(c, seed=s, device="cuda").forward(**batch, train=True).loss)
              for s in (1, 1, 2)]
    assert losses[0] == losses[1] != losses[2]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gpu_dropout_kernels_compute_the_counter_numbers(dtype):
    """The keyed dropout kernels on the GPU keep exactly where NumPy's counter_uniform says."""
    import cupy
    from minibert import accel
    from minibert.accel.counter_rng import CounterUniform, counter_uniform
    x = cupy.ones((64, 33, 17), dtype=dtype)
    gen = CounterUniform(7, cupy, dtype)
    key = CounterUniform(7).next_key()
    _, mask = accel.cuda.dropout_forward(x, 0.1, gen, True)
    want = counter_uniform(key, x.shape, np, dtype) >= 0.1
    np.testing.assert_array_equal(cupy.asnumpy(mask) != 0, want)
    np.testing.assert_array_equal(cupy.asnumpy(CounterUniform(7, cupy, dtype)(x.shape)),
                                  counter_uniform(key, x.shape, np, dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gpu_attention_ladder_matches_the_reference(dtype, rng):
    import cupy
    from minibert import ops
    from minibert.accel.cuda.ladder import LADDER
    q, k, v = (rng.standard_normal((3, 2, 70, 32)).astype(dtype) for _ in range(3))
    mask = np.ones((3, 70), dtype=np.int64)
    mask[1, 50:] = 0
    mask[2] = 0
    bias = ops.attention_mask_bias(mask, dtype)
    want = ops.attention_forward(q, k, v, bias)[0]
    for name, fn in LADDER.items():
        got = cupy.asnumpy(fn(*(cupy.asarray(a) for a in (q, k, v, bias))))
        err = np.abs(got - want).max() / np.abs(want).max()
        assert err < (1e-12 if dtype == "float64" else 1e-5), (name, err)


def test_gpu_lists_in_and_save_load(tmp_path):
    import cupy
    m = mb.BertForPreTraining(cfg(), seed=1, device="cuda")
    out = m.forward([[2, 3, 4]], nsp_labels=[1])
    m.backward()
    assert isinstance(m.params.grad, cupy.ndarray) and bool(cupy.isfinite(m.params.grad).all())
    m.save_pretrained(tmp_path)
    again = mb.BertForPreTraining.from_pretrained(tmp_path, device="cuda")
    np.testing.assert_array_equal(cupy.asnumpy(again.params.data), cupy.asnumpy(m.params.data))


def test_gpu_pretrain_resume_and_export(tmp_path, monkeypatch):
    """The whole loop on the GPU: it learns, checkpoints, resumes, exports a model the CPU loads."""
    import json
    from minibert.data.builtin import builtin_corpus
    from minibert.train import TrainArgs, pretrain

    monkeypatch.setenv("MINIBERT_CACHE", str(tmp_path / "cache"))
    docs = builtin_corpus(cache_dir=False).documents[:120]
    corpus = tmp_path / "small.txt"
    corpus.write_text("\n\n".join("\n".join(d) for d in docs) + "\n")
    args = dict(corpus=str(corpus), vocab_size=400, config="tiny", steps=40, batch_size=16, seq_len=32,
                heldout_fraction=0.2,
                lr=2e-3, warmup=4, eval_every=20, save_every=10, log_every=1, eval_instances=16,
                progress=False, plot=False, device="cuda")
    pretrain(TrainArgs(**args, out=str(tmp_path / "a"), stop_at=20), log=lambda *a: None)
    pretrain(TrainArgs(**args, out=str(tmp_path / "a"), resume=True), log=lambda *a: None)
    rows = [json.loads(l) for l in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["kind"] == "train"]
    assert [r["step"] for r in train] == list(range(1, 41))
    assert all(np.isfinite(r["loss"]) for r in rows)
    assert np.mean([r["loss"] for r in train[-5:]]) < np.mean([r["loss"] for r in train[:5]]) - 0.5
    cpu = mb.BertForPreTraining.from_pretrained(tmp_path / "a" / "model")  # GPU-trained, CPU-loaded
    assert np.isfinite(cpu.params.data).all()


# ------------------------------------------------------------ the fused GPU kernels
TOL = {"float64": 1e-12, "float32": 2e-6}


def _close(a, b, dtype, name=""):
    import cupy
    a, b = cupy.asnumpy(a), cupy.asnumpy(b)
    err = np.abs(a - b).max() / max(np.abs(b).max(), 1e-30)
    assert err < TOL[dtype], f"{name}: relative error {err:.2e}"


def _uniform_source(seed, dtype):
    """Two generators that produce the same uniform draws, one for each path."""
    import cupy
    def make():
        rs = cupy.random.RandomState(seed)
        return lambda shape: rs.random_sample(shape, dtype=dtype)
    return make(), make()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fused_layernorm_gelu_dropout_match_the_reference(dtype):
    import cupy
    from minibert import ops
    from minibert.accel import cuda
    from minibert.accel.cuda import kernels
    rs = cupy.random.RandomState(0)
    x = rs.standard_normal((6, 7, 96)).astype(dtype) * 3 + 1
    gamma, beta = rs.standard_normal(96).astype(dtype), rs.standard_normal(96).astype(dtype)
    dy = rs.standard_normal(x.shape).astype(dtype)
    assert kernels.applies(x, gamma, beta)
    u_fused, u_ref = _uniform_source(3, dtype)
    runs = []
    for L, u in ((cuda, u_fused), (ops, u_ref)):
        run = [L.layernorm_forward(x, gamma, beta, 1e-12)]
        run.append(L.layernorm_backward(dy, run[0][1]))
        for act in ("none", "tanh"):
            y, c = L.gelu_forward(x, act)
            run.append((y, L.gelu_backward(dy, c)))
        run.append(L.dropout_forward(x, 0.1, u, True))
        runs.append(run)
    fused, ref = runs
    _close(fused[0][0], ref[0][0], dtype, "layernorm y")
    for name, a, b in zip(("dx", "dgamma", "dbeta"), fused[1], ref[1]):
        _close(a, b, dtype, "layernorm " + name)
    for k, act in enumerate(("erf", "tanh")):
        _close(fused[2 + k][0], ref[2 + k][0], dtype, f"gelu {act} forward")
        _close(fused[2 + k][1], ref[2 + k][1], dtype, f"gelu {act} backward")
    (yd, md), (yr, mr) = fused[4], ref[4]
    np.testing.assert_array_equal(cupy.asnumpy(md), cupy.asnumpy(mr))  # the same entries dropped
    _close(yd, yr, dtype, "dropout")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_column_sums_on_the_gpu(dtype):
    import cupy
    from test_gpu_kernels_on_cpu import check_column_sums
    check_column_sums(cupy, dtype, shapes=((1, 5), (7, 40), (1000, 33), (0, 8), (16384, 512), (608, 30522)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_pooler_tanh_kernel_gives_the_references_bits(dtype):
    """The pooler's tanh with its bias, forward and backward in one kernel each, where the reference's
    expressions are CuPy kernels of their own: on a GPU both are CUDA's tanh and the same roundings
    (the kernel's y^2 is not fused into an FMA), so the same bits."""
    import cupy
    from minibert import accel, ops
    rng = np.random.default_rng(4)
    x, b, dy = (cupy.asarray(rng.standard_normal(s).astype(dtype) * 2) for s in ((64, 256), (256,), (64, 256)))
    (y, cache), (y_ref, cache_ref) = accel.cuda.tanh_forward(x, bias=b), ops.tanh_forward(x, bias=b)
    np.testing.assert_array_equal(cupy.asnumpy(y), cupy.asnumpy(y_ref))
    np.testing.assert_array_equal(cupy.asnumpy(accel.cuda.tanh_backward(dy, cache)),
                                  cupy.asnumpy(ops.tanh_backward(dy, cache_ref)))


def test_split_qkv_on_the_gpu():
    import cupy
    from test_gpu_kernels_on_cpu import check_split_qkv
    check_split_qkv(cupy)


def test_float16_conversions_on_the_gpu():
    """The attention kernels' own float16 reads and writes against NumPy's conversions, on the GPU."""
    import cupy
    from test_gpu_kernels_on_cpu import HALF_ROUNDTRIP, check_half_conversions
    from minibert.accel.cuda import kernels as cuda_kernels
    check_half_conversions(cupy, cuda_kernels.kernel("half_roundtrip", HALF_ROUNDTRIP, np.float32))


@pytest.mark.parametrize("case", ["q k^T", "P v", "P^T dO", "dS^T q, both transposed", "every other row (copied)",
                                  "q k^T at T = 512"])
def test_cublas_batched_float16_products(case):
    """accel/cuda/gemm.py's direct cuBLAS call against float64, for attention's layouts: float32 sums
    (in any order: K float32 roundings at most) rounded once to float16 (tests/test_cublas_plan.py
    checks the plan on the CPU)."""
    import cupy
    from test_cublas_plan import make
    from minibert.accel.cuda import gemm
    a, b = make(case, cupy.asarray)
    assert gemm.plan(a, b) is not None
    got = cupy.asnumpy(gemm.half_matmul(a, b)).astype(np.float64)
    a64, b64 = (cupy.asnumpy(x).astype(np.float64) for x in (a, b))
    exact, size = a64 @ b64, np.abs(a64) @ np.abs(b64)
    assert got.shape == exact.shape
    sums = a.shape[-1] * 2.0 ** -24 * size                 # float32 sums, any order
    rounding = 2.0 ** -11 * (np.abs(exact) + sums) + 2.0 ** -24    # one rounding to float16 (or its subnormals)
    assert np.all(np.abs(got - exact) <= sums + rounding), case


@pytest.mark.parametrize("case", ["q k^T", "P^T dO", "dS^T q, both transposed", "x W^T", "dy W, float32",
                                  "dy^T x, float32", "x W^T, float32", "q k^T, float32"])
def test_cublas_through_ctypes_computes_the_plans_product(case):
    """accel/cuda/cublas.py (cuBLAS through ctypes, what a CUDA graph captures) against float64: float32
    sums in any order, rounded once to float16 for float16 operands; and against CuPy's own product."""
    import cupy
    from test_cublas_plan import make
    from minibert.accel.cuda import cublas, gemm
    a, b = make(case, cupy.asarray)
    got = cublas.gemm(gemm.plan(a, b), cupy.empty(a.shape[:-1] + (b.shape[-1],), a.dtype))
    got = cupy.asnumpy(got).astype(np.float64)
    a64, b64 = (cupy.asnumpy(x).astype(np.float64) for x in (a, b))
    exact, size = a64 @ b64, np.abs(a64) @ np.abs(b64)
    sums = a.shape[-1] * 2.0 ** -24 * size
    rounding = 2.0 ** -11 * (np.abs(exact) + sums) + 2.0 ** -24 if a.dtype == np.float16 else 0.0
    assert np.all(np.abs(got - exact) <= sums + rounding), case
    theirs = cupy.asnumpy(gemm._batched_half(a, b) if a.dtype == np.float16 else a @ b).astype(np.float64)
    np.testing.assert_allclose(got, theirs, rtol=1e-2 if a.dtype == np.float16 else 1e-5, atol=1e-3)


def test_the_gradients_sum_of_squares_on_the_gpu():
    """``grads.sum_of_squares`` on the GPU (a CuPy ReductionKernel) against the float64 dot product."""
    import cupy
    from minibert.accel.cuda import grads
    rng = np.random.default_rng(0)
    for dtype in ("float32", "float64"):
        for n in (1, 1000, 4_000_001):
            g = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(dtype)
            got = float(grads.sum_of_squares(cupy.asarray(g)))
            want = float(np.dot(g.astype(np.float64), g.astype(np.float64)))
            assert abs(got - want) <= n * np.finfo(dtype).eps * want, (dtype, n)


def test_a_cuda_graph_replays_the_captured_ops_on_new_inputs():
    """accel/cuda/graph.py on a GPU: the GPU ops of a small block (products by cuBLAS through ctypes,
    GELU, LayerNorm, attention) captured once; each replay on new inputs gives, bit for bit, what the
    same ops give run one by one."""
    import cupy
    from minibert import accel
    from minibert.accel.cuda import graph
    rng = np.random.default_rng(0)
    x = cupy.asarray(rng.standard_normal((3, 5, 16)).astype(np.float32))
    W1, W2 = (cupy.asarray(rng.standard_normal(s).astype(np.float32) * 0.1) for s in ((64, 16), (16, 64)))
    b1, gamma, beta = (cupy.asarray(v.astype(np.float32)) for v in (rng.standard_normal(64), np.ones(16), np.zeros(16)))
    ops = accel.cuda

    def fn():
        h = ops.gelu_forward(ops.linear_forward(x, W1, None)[0], bias=b1)[0]
        y = ops.dropout_add_layernorm_forward(ops.linear_forward(h, W2, None)[0], x, gamma, beta, 1e-12,
                                              0.0, None, False)[0]
        return y, ops.attention_forward(y[:, None], y[:, None], y[:, None], None)[0]
    with graph.direct_products():
        fn()                                   # compiled and warmed before the capture
    g = graph.Graph(fn)
    cupy.get_default_memory_pool().free_all_blocks()     # the graph's memory is its own pool's: kept
    for _ in range(2):
        x[...] = cupy.asarray(rng.standard_normal(x.shape).astype(np.float32))
        got = [cupy.asnumpy(a) for a in g.replay()]
        with graph.direct_products():
            want = [cupy.asnumpy(a) for a in fn()]
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("precision, accum", [("float32", 1), ("mixed", 1), ("mixed", 2)])
def test_a_captured_training_step_replays_what_it_runs_one_launch_at_a_time(precision, accum):
    """train/graph_step.py on a GPU: five steps (batches with 4, 3, 6 MLM labels, a rate that changes,
    dropout keyed by the step; one micro-batch a step or two) captured after two and replayed, against
    the same work launched one by one: the same bits (tests/test_graph.py checks the same on the CPU
    stand-in)."""
    from test_graph import _trained
    (a, state_a, graphed), (b, state_b, _) = (_trained(5, precision, capture, accum=accum) for capture in (True, False))
    assert graphed.graph is not None
    for k, (x, y) in enumerate(zip(a, b), start=1):
        for name in x:
            np.testing.assert_array_equal(x[name], y[name], err_msg=f"step {k}: {name}")
    for name in state_a:
        np.testing.assert_array_equal(state_a[name], state_b[name], err_msg=name)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("train", [False, True])
def test_fused_attention_matches_the_reference(dtype, train):
    import cupy
    from minibert import ops
    from minibert.accel import cuda
    rs = cupy.random.RandomState(1)
    B, A, T, D = 3, 2, 40, 8
    q, k, v, dout = (rs.standard_normal((B, A, T, D)).astype(dtype) for _ in range(4))
    mask = np.ones((B, T), dtype=np.int64)
    mask[1, 25:] = 0
    mask[2] = 0                      # a sequence with every key masked
    bias = ops.attention_mask_bias(cupy.asarray(mask), dtype)
    u_fused, u_ref = _uniform_source(5, dtype)
    out_f, cache_f = cuda.attention_forward(q, k, v, bias, 0.1, u_fused, train)
    grads_f = cuda.attention_backward(dout, cache_f)
    # the fused forward keeps its dropout mask as one byte per entry (the reference: the multipliers)
    assert (cache_f.keep.dtype == np.uint8) if train else cache_f.keep is None
    out_r, cache_r = ops.attention_forward(q, k, v, bias, 0.1, u_ref, train)
    grads_r = ops.attention_backward(dout, cache_r)
    _close(out_f, out_r, dtype, "context")
    for name, a, b in zip(("dq", "dk", "dv"), grads_f, grads_r):
        _close(a, b, dtype, name)
    assert not bool(cupy.isnan(out_f).any())


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("bias_correction", [True, False])
def test_fused_adamw_matches_the_reference(dtype, bias_correction):
    import cupy
    from minibert.optim import AdamW
    models = [mb.BertForPreTraining(cfg(), seed=2, dtype=dtype, device="cuda", kernels=k)
              for k in ("fast", "reference")]
    assert models[0].ops.__name__ == "minibert.accel.cuda"
    opts = [AdamW(m.params, lr=1e-2, weight_decay=0.1, bias_correction=bias_correction) for m in models]
    rs = cupy.random.RandomState(4)
    for step in range(3):
        g = rs.standard_normal(models[0].params.grad.shape).astype(dtype)
        for m, opt in zip(models, opts):
            m.params.grad[...] = g
            opt.step(lr=1e-2 * (step + 1))
    for a, b in ((models[0].params.data, models[1].params.data), (opts[0].m, opts[1].m), (opts[0].v, opts[1].v)):
        _close(a, b, dtype, "AdamW state")


def test_fused_training_follows_the_reference(rng):
    """Five steps with dropout on: the fused kernels and the reference draw the same masks."""
    from minibert.optim import AdamW
    c = mb.BertConfig.from_preset("tiny", vocab_size=301)
    batch = padded_batch(rng, 301)
    losses = []
    for kernels in ("fast", "reference"):
        m = mb.BertForPreTraining(c, seed=3, device="cuda", dtype="float64", kernels=kernels)
        opt = AdamW(m.params, lr=1e-3)
        run = []
        for step in range(5):
            m.seed_dropout((0, step))
            run.append(float(m.forward(**batch, train=True).loss))
            m.backward()
            opt.step()
        losses.append(run)
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-12)
    assert losses[0][-1] < losses[0][0]


def test_mixed_precision_on_the_gpu_matches_the_cpu_emulation(rng):
    """CuPy's float16 products (tensor cores, float32 sums) against the CPU's widened ones.

    The two sum in different orders, so a product may round to the other
    neighbouring float16: the tolerances are a few float16 roundings.
    """
    import cupy
    c = cfg()
    cpu = mb.BertForPreTraining(c, seed=5, mixed_precision=True)
    gpu = mb.BertForPreTraining(c, seed=5, mixed_precision=True, device="cuda", kernels="fast")
    assert gpu.params.half.dtype == np.float16 and isinstance(gpu.params.half, cupy.ndarray)
    batch = padded_batch(rng, 301, B=3, T=10)
    a = cpu.forward(**batch, train=False)
    b = gpu.forward(**{k: cupy.asarray(v) for k, v in batch.items()}, train=False)
    assert abs(float(a.loss) - float(b.loss)) <= 2e-3 * float(a.loss)
    cpu.backward(loss_scale=1024.0)
    gpu.backward(loss_scale=1024.0)
    g_cpu, g_gpu = cpu.params.grad, cupy.asnumpy(gpu.params.grad)
    assert np.linalg.norm(g_gpu - g_cpu) <= 5e-3 * np.linalg.norm(g_cpu)
    # and against the GPU's own float32 model
    ref = mb.BertForPreTraining(c, seed=5, device="cuda")
    r = ref.forward(**{k: cupy.asarray(v) for k, v in batch.items()}, train=False)
    assert abs(float(r.loss) - float(b.loss)) <= 2e-3 * float(r.loss)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_batch_without_mlm_labels_on_the_gpu(dtype, rng):
    """No labelled MLM position: the MLM head sees zero rows (no empty kernel launch)."""
    import cupy
    ids = rng.integers(5, 301, (2, 6))
    kw = dict(mlm_labels=np.full((2, 6), -100), nsp_labels=np.array([0, 1]))
    cpu = mb.BertForPreTraining(cfg(), seed=2, dtype=dtype)
    gpu = mb.BertForPreTraining(cfg(), seed=2, dtype=dtype, device="cuda", kernels="fast")
    a = cpu.forward(ids, **kw, train=False)
    b = gpu.forward(cupy.asarray(ids), **{k: cupy.asarray(v) for k, v in kw.items()}, train=False)
    assert abs(float(a.loss) - float(b.loss)) <= 1e-5 * float(a.loss)
    cpu.backward()
    gpu.backward()
    g = cupy.asnumpy(gpu.params.grad)
    assert np.linalg.norm(g - cpu.params.grad) <= 1e-4 * np.linalg.norm(cpu.params.grad)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_bookkeeping_kernel_keeps_what_the_array_expressions_keep(dtype):
    """``step_book`` on the GPU against ``Health.watch`` and ``MetricsLog.add_step`` on the GPU."""
    import cupy
    from test_bookkeeping import RUNS, check_run
    for run in RUNS:
        check_run(run, dtype, dev=lambda x, t: cupy.asarray(np.array(x, dtype=t)), xp=cupy)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_batch_sums_kernel_counts_what_the_array_expressions_count(dtype):
    """``batch_sums`` on the GPU against ``batch_stats``'s CuPy expressions: ties, NaN and -inf rows
    (CuPy's argmax, like NumPy's, gives the first largest value, or the first NaN)."""
    import cupy
    from test_bookkeeping import BATCHES, check_batch_sums
    for shape in BATCHES.values():
        check_batch_sums(shape, dtype, dev=lambda x, t: cupy.asarray(np.array(x, dtype=t)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_loss_scaling_kernel_keeps_what_the_array_expressions_keep(dtype):
    """``scale_and_count`` on the GPU against ``LossScaler.update`` and ``AdamW.step`` on the GPU: the
    same bits everywhere (both sides' ``pow`` is CUDA's)."""
    import cupy
    from test_loss_scaling import RUNS, check_run
    for run in RUNS:
        check_run(run, dtype, dev=lambda x, t: cupy.asarray(np.array(x, dtype=t)), xp=cupy, exact=True)


def test_two_gpus_with_nccl_compute_what_one_gpu_computes(tmp_path):
    # one process per GPU, the gradients summed by NCCL on the devices (minibert/train/nccl.py)
    import cupy
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs: one per process")
    from test_dist import assert_same_records, assert_same_weights, final_weights, job, options, records
    one, two = tmp_path / "one", tmp_path / "two"
    job(1, options(device="cuda", out=one))
    job(2, options(device="cuda", out=two))
    assert_same_records(records(one), records(two))
    assert_same_weights(final_weights(one), final_weights(two))


def test_the_nccl_path_on_one_gpu_computes_what_one_process_computes(tmp_path, monkeypatch):
    # what a one-GPU machine can run of the data-parallel GPU path: a one-rank MPI job (MPI's
    # singleton world) set up by use_device (the GPU by local rank, one rank per GPU, NCCL's
    # unique id) whose gradients a real NCCL communicator sums on the device, against the
    # plain one-process run of the same settings
    import cupy
    try:
        from mpi4py import MPI
    except (ImportError, RuntimeError) as exc:   # mpi4py without an MPI library to load
        pytest.skip(f"needs mpi4py and an MPI library (the dist extra): {exc}")
    from minibert.cli import main
    from minibert.train import dist, nccl
    from test_dist import COMMON, assert_same_records, assert_same_weights, final_weights, options, records

    summed = nccl.NcclGrads.__call__
    seen = []

    def through_nccl(self, buf):
        seen.append((type(buf), buf.dtype))   # the buffer NCCL sums stays on the device
        summed(self, buf)

    plain, nccl_run = tmp_path / "plain", tmp_path / "nccl"
    assert main(["pretrain", *options(device="cuda", out=plain)]) == 0
    monkeypatch.setattr(nccl.NcclGrads, "__call__", through_nccl)
    monkeypatch.setattr(dist, "_WORLD", [dist.MPIComm(MPI.COMM_WORLD)])
    assert main(["pretrain", *options(device="cuda", out=nccl_run)]) == 0
    steps = int(COMMON[COMMON.index("--steps") + 1])
    assert seen == [(cupy.ndarray, np.dtype("float64"))] * steps
    assert_same_records(records(plain), records(nccl_run), rtol=1e-12)
    assert_same_weights(final_weights(plain), final_weights(nccl_run))


@pytest.mark.parametrize("T", [80, 512])
def test_fused_attention_on_the_tensor_cores(T, monkeypatch):
    """``accel/cuda/flash.py`` on the GPU (its products by PTX's mma, whose lane layout the CPU stand-in
    only assumes): as close to float64 as on the stand-in, the unfused kernels' dropout mask, dq and dk
    zero for a sequence with no open key, and the same bits from two runs (no atomics)."""
    import cupy
    from minibert import ops as ref
    from minibert.accel.counter_rng import CounterUniform
    from minibert.accel.cuda import flash, ops as cuda_ops
    from test_flash import _float64
    monkeypatch.setattr(flash, "ENABLED", True)
    rng = np.random.default_rng(0)
    q, k, v, dout = (rng.standard_normal((3, 2, T, 64)).astype(np.float16) for _ in range(4))
    mask = np.ones((3, T), np.float32)
    mask[1, T // 2:] = 0
    mask[2] = 0
    want_out, want_grads = _float64(q, k, v, dout, mask)
    want = [want_out, *want_grads]
    g = [cupy.asarray(a) for a in (q, k, v, dout)]
    bias = cupy.asarray(ref.attention_mask_bias(mask, np.float32))

    def run(p=0.0, on=True):
        monkeypatch.setattr(flash, "ENABLED", on)
        drop = CounterUniform(9, xp=cupy)
        out, cache = cuda_ops.attention_forward(*g[:3], bias, p, drop, train=p > 0)
        assert isinstance(cache, flash.FlashCache) == on
        return [cupy.asnumpy(a) for a in (out, *cuda_ops.attention_backward(g[3], cache))]
    got = run()
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, want):
        assert np.abs(a.astype(np.float64) - b).max() <= 1.5e-3 * np.abs(b).max(), name
    assert not got[1][2].any() and not got[2][2].any()
    for a, b in zip(got, run()):
        np.testing.assert_array_equal(a, b)
    for name, a, b in zip(("out", "dq", "dk", "dv"), run(0.1), run(0.1, on=False)):
        a, b = a.astype(np.float64), b.astype(np.float64)
        assert np.abs(a - b).max() <= 3e-3 * np.abs(b).max(), name


@pytest.mark.parametrize("precision", [[], ["--mixed-precision"]], ids=["float32", "mixed"])
def test_minibert_finetune_on_the_gpu_learns_and_resumes_as_on_the_cpu(tmp_path, precision):
    """``minibert finetune --device cuda``: the SST-2-like task of tests/test_finetune_cli.py learned in
    float32 and in mixed precision, and a job stopped part-way and resumed ends with the same files, byte for
    byte."""
    import json
    from minibert.cli import main
    from test_finetune_cli import small_bert, sst2_folder
    from test_finetune_resume import assert_same_outputs
    model = small_bert(tmp_path / "model")
    sst2_folder(tmp_path / "glue", np.random.default_rng(0))
    args = ["finetune", "--task", "sst2", "--model", str(model), "--data-dir", str(tmp_path / "glue"), "--lr", "2e-3",
            "--epochs", "6", "--batch-size", "16", "--seed", "5", "--device", "cuda", *precision]
    assert main(args + ["--out", str(tmp_path / "once")]) == 0
    assert json.loads((tmp_path / "once" / "results.json").read_text())["dev"]["dev"]["accuracy"] > 0.95
    assert main(args + ["--out", str(tmp_path / "twice"), "--stop-at", "50"]) == 0
    assert main(args + ["--out", str(tmp_path / "twice"), "--resume"]) == 0
    assert_same_outputs(tmp_path / "once", tmp_path / "twice")
