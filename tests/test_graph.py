"""CUDA graphs (``accel/cuda/graph.py``) on the CPU stand-in: a capture refuses what a graph cannot hold,
and a replay redoes the captured launches on the arrays' new contents, with the scalars of the capture.

The stand-in's capture (``tests/graph_stand_in.py``) records each launch of the ``Device`` arrays and
of the kernels as a function that makes it again; ``tests/test_gpu.py`` captures on a GPU.
"""
import numpy as np
import pytest

from minibert import accel
from minibert.accel.cuda import gemm, graph
from minibert.backend import to_numpy
import graph_stand_in
from test_sync_free_step import REASON, Device, device_numpy, on_gpu_stand_in  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")


def dev(a):
    return np.asarray(a).view(Device)


def _block(rng, B=3, T=5, H=16):
    """A small forward through the GPU's ops: linear, bias + GELU, residual + LayerNorm, and a product."""
    x = dev(rng.standard_normal((B, T, H)).astype(np.float32))
    W1 = dev(rng.standard_normal((4 * H, H)).astype(np.float32) * 0.1)
    b1 = dev(rng.standard_normal(4 * H).astype(np.float32))
    W2 = dev(rng.standard_normal((H, 4 * H)).astype(np.float32) * 0.1)
    gamma, beta = dev(np.ones(H, np.float32)), dev(np.zeros(H, np.float32))
    ops = accel.cuda

    def fn():
        h, _ = ops.linear_forward(x, W1, None)
        h, _ = ops.gelu_forward(h, bias=b1)
        h, _ = ops.linear_forward(h, W2, None)
        y, _ = ops.dropout_add_layernorm_forward(h, x, gamma, beta, 1e-12, 0.0, None, False)
        return y, ops.attention_forward(y[:, None], y[:, None], y[:, None], None)[0]
    return x, fn


def test_a_replay_computes_the_captured_work_on_new_inputs(on_gpu_stand_in):
    rng = np.random.default_rng(0)
    x, fn = _block(rng)
    g = graph.Graph(fn)
    for _ in range(2):
        x[...] = rng.standard_normal(x.shape).astype(np.float32)     # the host fills the input in place
        got = [a.copy() for a in g.replay()]
        with graph.direct_products():
            want = fn()
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    assert not gemm.DIRECT                                # the capture's setting is undone after it


def test_a_scalar_is_frozen_into_the_graph(on_gpu_stand_in):
    """A number given to a launch as a value is the capture's forever: what changes must be in an array."""
    x, lr = dev(np.ones(4, np.float32)), [0.5]
    g = graph.Graph(lambda: x * np.float32(lr[0]))
    lr[0] = 2.0
    np.testing.assert_array_equal(g.replay(), [0.5] * 4)


@pytest.mark.parametrize("what, fn", [
    ("a device value read on the host", lambda x, xp: float(x.sum())),
    ("cuBLAS called by CuPy", lambda x, xp: x.reshape(2, 2) @ x.reshape(2, 2)),
    ("a host-to-device copy", lambda x, xp: x + xp.asarray(np.ones(4, np.float32))),
    ("a size read back", lambda x, xp: xp.flatnonzero(x)),
])
def test_a_capture_refuses_what_a_graph_cannot_hold(what, fn, on_gpu_stand_in):
    x, xp = dev(np.ones(4, np.float32)), device_numpy()
    with pytest.raises(graph_stand_in.CaptureError, match=what):
        graph.Graph(lambda: fn(x, xp))
    assert not graph_stand_in.capturing()               # the failed capture was ended
    assert graph.Graph(lambda: x * 2).replay().tolist() == [2.0] * 4


def _trainer(precision):
    """A tiny model (dropout on) on the device, its AdamW, and in mixed precision its loss scaler."""
    import minibert as mb
    from minibert.optim import AdamW, LossScaler
    cfg = mb.BertConfig.from_preset("tiny", vocab_size=97, max_position_embeddings=16)
    mixed = precision == "mixed"
    model = mb.BertForPreTraining(cfg, seed=3, device="cuda", kernels="fast", mixed_precision=mixed)
    return model, AdamW(model.params, lr=1e-3, weight_decay=0.01), LossScaler(init_scale=2.0 ** 10) if mixed else None


def _batch(rng, k):
    """Step k's batch (3 x 11): 4, 3 or 6 MLM labels in turn."""
    from conftest import padded_batch
    return padded_batch(rng, 97, n_labels=[(2, 1, 1), (1, 1, 1), (3, 2, 1)][k % 3])


def _trained(steps, precision, capture, corpus_rng_seed=1, accum=1):
    """``_trainer``'s model trained ``steps`` steps by a GraphStep, which captures after its warm-up
    steps or (``capture=False``) never: the same work one launch at a time.  With ``accum`` n, a
    step takes the next n of ``_batch``'s batches."""
    from minibert.train import graph_step
    model, opt, scaler = _trainer(precision)
    step = graph_step.GraphStep(model, opt, scaler, (3, 11), max_predictions=6, max_grad_norm=1.0, accum=accum)
    if not capture:
        step.steps = -10 ** 9              # never reaches the warm-up's end
    rng, results = np.random.default_rng(corpus_rng_seed), []
    for k in range(steps):
        batches = [_batch(rng, accum * k + j) for j in range(accum)]
        r = step(batches[0] if accum == 1 else batches, 1e-3 * (k + 1), (7, k))
        results.append({name: to_numpy(v).copy() if hasattr(v, "shape") else v for name, v in r.items()})
    state = dict(params=to_numpy(model.params.data), m=to_numpy(opt.m), v=to_numpy(opt.v), t=opt.t)
    if scaler is not None:
        state.update(scale=float(scaler.scale), good=int(scaler.good_steps))
    return results, state, step


@pytest.mark.parametrize("precision, accum", [("float32", 1), ("mixed", 1), ("mixed", 2)])
def test_a_captured_step_trains_as_the_same_step_run_one_launch_at_a_time(precision, accum, on_gpu_stand_in):
    """Five steps on batches with different numbers of MLM labels, a rate that changes every step and
    dropout keyed by the step: the replays (steps 3 to 5) give, bit for bit, what the same work run
    launch by launch gives: the weights, AdamW's moments and count, the loss scale, and each
    step's loss, sums and norm.  With two micro-batches a step, the graph holds both."""
    (a, state_a, graphed), (b, state_b, _) = (_trained(5, precision, capture, accum=accum) for capture in (True, False))
    assert graphed.graph is not None and len(graphed.graph.graph.launches) > 50
    for k, (x, y) in enumerate(zip(a, b), start=1):
        assert x.keys() == y.keys()
        for name in x:
            np.testing.assert_array_equal(x[name], y[name], err_msg=f"step {k}: {name}")
    for name in state_a:
        np.testing.assert_array_equal(state_a[name], state_b[name], err_msg=name)
    n_mlm = [4, 3, 6, 4, 3] if accum == 1 else [7, 10, 9, 7, 10]        # (4 + 3, 6 + 4, 3 + 6, ...)
    assert state_a["t"] == 5 and np.isfinite(a[-1]["loss"]) and [r["n_mlm"] for r in a] == n_mlm


@pytest.mark.parametrize("precision, accum", [("float32", 1), ("mixed", 1), ("float32", 2)])
def test_a_graph_step_is_the_trainers_step(precision, accum, on_gpu_stand_in):
    """What GraphStep runs (captured or not, above) is the ordinary step: forward on each batch as it
    comes, backward at the loss scale (the micro-batches' gradients added up), unscaling, the mean
    over the micro-batches and clipping, AdamW at the host's rate.  The same losses and weights up
    to float32 rounding: the padded MLM rows add zeros to the decoder's sums, and the bias
    correction's pow is the kernel's."""
    from minibert.optim import scaled_step, unscale_and_clip
    results, state, _ = _trained(4, precision, capture=False, accum=accum)
    model, opt, scaler = _trainer(precision)
    mixed = precision == "mixed"
    tol = 1e-4 if mixed else 1e-5     # (a float16 product rounds once more where its sums differ)
    rng = np.random.default_rng(1)
    for k in range(4):
        model.seed_dropout((7, k))
        loss_scale = scaler.scale if scaler else 1.0
        losses, mlm_sum, n_mlm, tokens = [], 0.0, 0, 0
        for j in range(accum):
            batch = _batch(rng, accum * k + j)
            out = model.forward(**batch, train=True)
            model.backward(accumulate=j > 0, loss_scale=loss_scale)
            losses.append(float(out.loss))
            mlm_sum += float(out.mlm_loss) * len(out.mlm_targets)
            n_mlm, tokens = n_mlm + len(out.mlm_targets), tokens + batch["attention_mask"].sum()
        norm = unscale_and_clip(model.params, 1.0, loss_scale, accum)
        scaled_step(opt, scaler, model.xp.isfinite(norm), 1e-3 * (k + 1))
        np.testing.assert_allclose(np.mean(losses), results[k]["loss"], rtol=tol, err_msg=f"step {k + 1}")
        np.testing.assert_allclose(float(norm), results[k]["grad_norm"], rtol=1e-4, err_msg=f"step {k + 1}")
        assert results[k]["n_mlm"] == n_mlm and results[k]["tokens"] == tokens
        np.testing.assert_allclose(mlm_sum, results[k]["mlm_loss"], rtol=tol)
    # (AdamW's update is about lr in size whatever the gradient's: a gradient near eps that differs in
    # its last bits, or by a float16 rounding, moves a weight by a share of lr, 1e-3 to 4e-3 here)
    np.testing.assert_allclose(np.array(model.params.data), state["params"], rtol=0, atol=2e-4 if mixed else 2e-5)
    assert opt.t == state["t"] == 4


def test_a_graph_step_names_a_batch_it_was_not_built_for(on_gpu_stand_in):
    from minibert.train.graph_step import GraphStep
    model, opt, _ = _trainer("float32")
    with pytest.raises(ValueError, match=r"max_predictions must be in \[1, 33\]"):
        GraphStep(model, opt, None, (3, 11), max_predictions=34)
    step = GraphStep(model, opt, None, (3, 11), max_predictions=3)
    batch = _batch(np.random.default_rng(0), 0)
    with pytest.raises(ValueError, match=r"the batch has 4 MLM labels, more than max_predictions=3"):
        step(batch, 1e-3, (0, 0))
    with pytest.raises(ValueError, match=r"built for batches of shape \(3, 11\), got \(2, 11\)"):
        step({k: v[:2] for k, v in batch.items()}, 1e-3, (0, 0))
    with pytest.raises(ValueError, match="built for batches with nsp_labels"):
        step(dict(batch, nsp_labels=None), 1e-3, (0, 0))
    with pytest.raises(ValueError, match=r"takes 1 micro-batch\(es\) \(accum\), got 2"):
        step([batch, batch], 1e-3, (0, 0))
    with pytest.raises(ValueError, match="accum must be a positive integer"):
        GraphStep(model, opt, None, (3, 11), max_predictions=3, accum=0)
    assert step.steps == 0 and opt.t == 0             # nothing was run


@pytest.mark.parametrize("kw", [dict(), dict(mixed_precision=True, accum=2)], ids=["float32", "mixed-accum"])
def test_pretrain_with_cuda_graph_trains_as_without(corpus_file, tmp_path, monkeypatch, on_gpu_stand_in, kw):
    """``pretrain --cuda-graph`` on the stand-in: steps 3 to 6 replayed, nothing read back inside a step,
    and the records those of the run without it, up to float32 rounding (its batches are padded to
    --seq-len, which changes the products' shapes, not what they compute); in mixed precision with
    ``--accum 2``, two micro-batches in each replay (one micro-batch a step: the tests above)."""
    from minibert.train import args as train_args, pretrain
    from test_hostile_runs import records
    from test_sync_free_step import _args, _reads_per_step
    monkeypatch.setattr(train_args, "get_xp", lambda device: None)      # (no CuPy: the stand-in is it)
    plain = pretrain(_args(corpus_file, tmp_path / "plain", data_worker="thread", **kw), log=lambda *a: None)
    found = _reads_per_step(monkeypatch)
    said = []
    graphed = pretrain(_args(corpus_file, tmp_path / "graph", data_worker="thread", device="cuda", cuda_graph=True,
                             **kw), log=said.append)
    assert not [s for s in said if "could not be captured" in s]
    assert [f[0] for f in found] == list(range(1, 7)) and all(f[1] == [] for f in found)

    a, b = ([r for r in records(tmp_path / d) if r["kind"] == "train"] for d in ("plain", "graph"))
    assert [r["step"] for r in a] == [r["step"] for r in b] == [3, 6]
    for x, y in zip(a, b):
        for key in ("loss", "mlm_loss", "nsp_loss", "grad_norm"):
            assert y[key] == pytest.approx(x[key], rel=1e-4), key
        assert {k: x[k] for k in x if "acc" in k or k in ("tokens", "loss_scale", "skipped_steps")} == \
               {k: y[k] for k in y if "acc" in k or k in ("tokens", "loss_scale", "skipped_steps")}
    assert plain.step == graphed.step == 6


def test_cuda_graph_needs_a_gpu_step_with_miniberts_kernels():
    from minibert.train import TrainArgs
    from minibert.train.args import check_args
    for kw in (dict(), dict(device="cuda", kernels="reference"), dict(accum=2)):
        with pytest.raises(ValueError, match="--cuda-graph replays a GPU step"):
            check_args(TrainArgs(cuda_graph=True, **kw), probe_out=False)


def test_pretrain_with_cuda_graph_resumes_exactly(corpus_file, tmp_path, monkeypatch, on_gpu_stand_in):
    """Stopped at step 4 (two steps replayed) and resumed (two steps one launch at a time, before the
    capture would come), two micro-batches a step: the records and weights of the run that never
    stopped, bit for bit."""
    from minibert.train import args as train_args, pretrain
    from minibert.train.checkpoint_files import list_checkpoints, load_checkpoint
    from test_sync_free_step import _args
    from test_hostile_runs import records
    monkeypatch.setattr(train_args, "get_xp", lambda device: None)
    kw = dict(mixed_precision=True, save_every=6, device="cuda", cuda_graph=True, data_worker="thread", accum=2)
    pretrain(_args(corpus_file, tmp_path / "once", **kw), log=lambda *a: None)
    assert pretrain(_args(corpus_file, tmp_path / "twice", stop_at=4, **kw), log=lambda *a: None).stopped_by == "stop_at"
    pretrain(_args(corpus_file, tmp_path / "twice", resume=True, **kw), log=lambda *a: None)
    assert records(tmp_path / "once") == records(tmp_path / "twice")
    a, b = (load_checkpoint(list_checkpoints(tmp_path / d)[-1]) for d in ("once", "twice"))
    np.testing.assert_array_equal(a[0]["params"], b[0]["params"])
    assert a[1]["adam_t"] == b[1]["adam_t"] == 6
