"""Fused attention for training (``accel/cuda/flash.py``) on the CPU stand-in, against the reference.

The stand-in runs the kernels' tensor-core products through its emulation of PTX's mma.m16n8k16
(``tests/cuda_on_cpu.py``), with the lanes' layout of the tiles that the kernels assume;
``tests/test_gpu.py`` runs them on the tensor cores.
"""
import numpy as np
import pytest

from minibert import ops as ref
from minibert.accel.counter_rng import CounterUniform
from minibert.accel.cuda import flash
from minibert.accel.cuda import ops as cuda_ops
import cuda_on_cpu
from test_gpu_kernels_on_cpu import kernels  # noqa: F401 (a fixture)
from test_sync_free_step import on_gpu_stand_in  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(cuda_on_cpu.unavailable() is not None, reason=cuda_on_cpu.unavailable() or "")


@pytest.fixture
def enabled(kernels, monkeypatch):
    monkeypatch.setattr(flash, "ENABLED", True)


def _heads(rng, B=2, A=2, T=80, D=64):
    """float16 q, k, v and an output gradient; T = 80: a whole tile of 64 rows and a part of one."""
    return [rng.standard_normal((B, A, T, D)).astype(np.float16) for _ in range(4)]


def _mask(B, T, open_keys):
    mask = np.zeros((B, T), np.float32)
    for b, n in enumerate(open_keys):
        mask[b, :n] = 1
    return mask


def _float64(q, k, v, dout, mask):
    """The reference in float64 on the same float16 values: output and gradients."""
    wide = [a.astype(np.float64) for a in (q, k, v)]
    out, cache = ref.attention_forward(*wide, ref.attention_mask_bias(mask, np.float64))
    return out, ref.attention_backward(dout.astype(np.float64), cache)


def _errors(got, want):
    return [float(np.abs(np.asarray(a, np.float64) - b).max() / np.abs(b).max()) for a, b in zip(got, want)]


@pytest.mark.parametrize("open_keys", [(80, 80), (80, 37), (5, 80)])
def test_fused_attention_is_as_close_to_float64_as_the_unfused(open_keys, enabled, monkeypatch):
    """Output and the three gradients against the float64 reference, with padded keys, and beside the
    unfused kernels' mixed precision on the same inputs: the fused kernels keep the scores and the
    gradient of the weights in float32 where the unfused round them to float16, so they are no further
    from float64 (float16's rounding, 2^-11 of the largest value, is the scale of both)."""
    q, k, v, dout = _heads(np.random.default_rng(0))
    mask = _mask(2, 80, open_keys)
    bias = ref.attention_mask_bias(mask, np.float32)
    want_out, want_grads = _float64(q, k, v, dout, mask)
    want = [want_out, *want_grads]
    out, cache = cuda_ops.attention_forward(q, k, v, bias)
    assert isinstance(cache, flash.FlashCache)
    assert np.shares_memory(ref.merge_heads(out), cache.out)     # written with the heads merged: a view
    fused = _errors([out, *cuda_ops.attention_backward(dout, cache)], want)
    monkeypatch.setattr(flash, "ENABLED", False)
    out, cache = cuda_ops.attention_forward(q, k, v, bias)
    assert isinstance(cache, cuda_ops.AttentionCache)
    unfused = _errors([out, *cuda_ops.attention_backward(dout, cache)], want)
    assert max(fused) < 1.5e-3, fused
    for name, f, u in zip(("out", "dq", "dk", "dv"), fused, unfused):
        assert f <= 1.5 * u, (name, f, u)


def test_fused_attention_drops_what_the_unfused_drops(enabled, monkeypatch):
    """With dropout by the counter-based generator, the fused kernels draw each weight's number from the
    same key and index as the unfused kernel: the same mask, so the same output and gradients to within
    float16 rounding.  A mask drawn at other indices would differ in about a tenth of the weights."""
    q, k, v, dout = _heads(np.random.default_rng(1), T=70)
    bias = ref.attention_mask_bias(_mask(2, 70, (70, 50)), np.float32)
    results = []
    for on in (True, False):
        monkeypatch.setattr(flash, "ENABLED", on)
        rng = CounterUniform(5)
        rng.reseed(11)
        out, cache = cuda_ops.attention_forward(q, k, v, bias, 0.1, rng, train=True)
        assert isinstance(cache, flash.FlashCache) == on
        results.append([np.asarray(out, np.float64), *(np.asarray(g, np.float64)
                                                      for g in cuda_ops.attention_backward(dout, cache))])
    for name, a, b in zip(("out", "dq", "dk", "dv"), *results):
        assert np.abs(a - b).max() <= 3e-3 * np.abs(b).max(), name
    other = CounterUniform(5)
    other.reseed(12)
    moved = np.asarray(cuda_ops.attention_forward(q, k, v, bias, 0.1, other, train=True)[0], np.float64)
    assert np.abs(moved - results[1][0]).max() > 0.1 * np.abs(results[1][0]).max()


def test_a_sequence_with_no_open_key_gives_its_scores_no_gradient(enabled):
    """Every key padded: the weights are uniform whatever q and k are (the reference's bias swamps the
    scores), so dq and dk are zero, and out and dv those of uniform weights."""
    q, k, v, dout = _heads(np.random.default_rng(2), T=20)
    mask = _mask(2, 20, (20, 0))
    out, cache = cuda_ops.attention_forward(q, k, v, ref.attention_mask_bias(mask, np.float32))
    dq, dk, dv = cuda_ops.attention_backward(dout, cache)
    assert not dq[1].any() and not dk[1].any() and dq[0].any()
    want_out, (_, _, want_dv) = _float64(q, k, v, dout, mask)
    np.testing.assert_allclose(np.asarray(out[1], np.float64), want_out[1], atol=2e-3)
    np.testing.assert_allclose(np.asarray(dv[1], np.float64), want_dv[1], atol=2e-3)


@pytest.mark.parametrize("case", ["float32", "head size 32", "two lengths", "other generator", "not enabled"])
def test_what_the_fused_kernels_do_not_take_goes_the_unfused_way(case, enabled, monkeypatch):
    q, k, v, _ = _heads(np.random.default_rng(3), B=1, T=9, D=32 if case == "head size 32" else 64)
    rng, train = None, False
    if case == "float32":
        q, k, v = (a.astype(np.float32) for a in (q, k, v))
    if case == "two lengths":
        q = q[:, :, :5].copy()
    if case == "other generator":
        rng, train = (lambda shape: np.random.default_rng(0).random(shape, dtype=np.float32)), True
    if case == "not enabled":
        monkeypatch.setattr(flash, "ENABLED", False)
    assert not flash.applies(q, k, v, None, 0.1, rng, train)
    assert isinstance(cuda_ops.attention_forward(q, k, v, None, 0.1, rng, train)[1], cuda_ops.AttentionCache)
    if case == "float32":
        assert flash.applies(*(a.astype(np.float16) for a in (q, k, v)), None, 0.1, rng, train)


def test_a_mixed_precision_model_trains_the_same_with_fused_attention(on_gpu_stand_in, monkeypatch):
    """The tiny preset (heads of 64) in mixed precision, dropout on: one forward and backward with the
    fused attention and one without give the same losses and gradients to within float16 rounding."""
    import minibert as mb
    from conftest import padded_batch
    cfg = mb.BertConfig.from_preset("tiny", vocab_size=97, max_position_embeddings=40)
    batch = padded_batch(np.random.default_rng(4), 97, n_labels=(3, 2, 1), T=40)
    results, fused = [], []
    real = flash.forward
    monkeypatch.setattr(flash, "forward", lambda *a, **kw: fused.append(1) or real(*a, **kw))
    for on in (True, False):
        monkeypatch.setattr(flash, "ENABLED", on)
        model = mb.BertForPreTraining(cfg, seed=3, device="cuda", kernels="fast", mixed_precision=True)
        model.seed_dropout((7, 1))
        out = model.forward(**batch, train=True)
        model.backward(loss_scale=1024.0)
        assert len(fused) == (cfg.num_hidden_layers if on else 0)
        fused.clear()
        results.append((float(out.loss), np.array(model.params.grad, np.float64) / 1024.0))
    (loss_a, grad_a), (loss_b, grad_b) = results
    assert loss_a == pytest.approx(loss_b, rel=1e-4)
    assert np.abs(grad_a - grad_b).max() <= 3e-3 * np.abs(grad_b).max()


def test_a_step_with_fused_attention_is_captured_as_a_cuda_graph(on_gpu_stand_in, monkeypatch):
    """The fused kernels read dropout's key from device memory and nothing back on the host: a
    ``GraphStep`` captures them, and its replays give, bit for bit, the same steps run launch by launch."""
    from test_graph import _trained
    monkeypatch.setattr(flash, "ENABLED", True)
    calls = []
    real = flash.backward
    monkeypatch.setattr(flash, "backward", lambda *a: calls.append(1) or real(*a))
    (a, state_a, graphed), (b, state_b, _) = (_trained(4, "mixed", capture) for capture in (True, False))
    assert graphed.graph is not None and calls      # (a replay calls no Python: the launches are recorded)
    for k, (x, y) in enumerate(zip(a, b), start=1):
        for name in x:
            np.testing.assert_array_equal(x[name], y[name], err_msg=f"step {k}: {name}")
    for name in state_a:
        np.testing.assert_array_equal(state_a[name], state_b[name], err_msg=name)
