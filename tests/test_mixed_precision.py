"""Mixed precision: float16 products against float32 master weights, and dynamic loss scaling.

The plain float32 model is the reference.  Stated tolerances, each measured
well inside: one half-precision product is within one float16 rounding of
the exact product; a whole model's loss within 1e-4 (relative) of the
float32 loss and its gradient within 2e-3 (relative L2 norm; float16 has a
relative rounding of 4.9e-4).
"""
import functools
import json

import numpy as np
import pytest

from minibert import BertConfig, ops as L
from minibert.model import BertForPreTraining
from minibert.optim import AdamW, LossScaler
from minibert.train import TrainArgs, TrainingError, pretrain

from test_train import small_args, train_losses

F16_EPS = 2.0 ** -11   # float16's unit roundoff


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIBERT_CACHE", str(tmp_path / "cache"))


def batch(V=1000, B=8, T=48, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, V, (B, T))
    types = np.zeros((B, T), dtype=np.int64)
    types[:, T // 2:] = 1
    mlm = np.full((B, T), -100)
    chosen = rng.random((B, T)) < 0.15
    mlm[chosen] = ids[chosen]
    return dict(input_ids=ids, token_type_ids=types, mlm_labels=mlm, nsp_labels=rng.integers(0, 2, B))


def grads(model, loss_scale=1.0, train=False):
    out = model.forward(**batch(model.config.vocab_size), train=train)
    model.backward(loss_scale=loss_scale)
    return float(out.loss), model.params.grad / loss_scale


# ------------------------------------------------------------------ one product
def test_half_matmul_is_the_exact_product_rounded_once_to_float16():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(37, 64)).astype(np.float16)
    b = rng.normal(size=(64, 29)).astype(np.float16)
    got = L.half_matmul(a, b)
    assert got.dtype == np.float16
    exact = a.astype(np.float64) @ b.astype(np.float64)
    # float32 sums of exact products, then one rounding to float16
    err = np.abs(got.astype(np.float64) - exact) / np.maximum(np.abs(exact), 2.0 ** -14)
    assert err.max() <= F16_EPS * 1.01
    # and it is not a float32 product: the result carries float16's rounding
    assert np.abs(got.astype(np.float64) - exact).max() > 1e-4


def test_half_matmul_overflows_to_inf_quietly():
    a = np.full((2, 4), 200.0, dtype=np.float16)
    with np.errstate(all="raise"):
        out = L.half_matmul(a, a.T)          # 4 * 200^2 = 160000 > 65504
    assert np.isinf(out).all()


def test_linear_in_half_precision_keeps_float32_outside():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 5, 16)).astype(np.float32)
    W = (rng.normal(size=(8, 16)) * 0.1).astype(np.float32)
    b = rng.normal(size=8).astype(np.float32)
    dy = rng.normal(size=(3, 5, 8)).astype(np.float32)
    y32, c32 = L.linear_forward(x, W, b)
    y16, c16 = L.linear_forward(x, W.astype(np.float16), b)
    assert y16.dtype == np.float32 and c16[0].dtype == np.float16   # x kept in float16 for the backward
    np.testing.assert_allclose(y16, y32, rtol=0, atol=4 * F16_EPS * np.abs(y32).max())
    x16 = x.astype(np.float16).reshape(-1, 16)
    np.testing.assert_array_equal(y16.reshape(-1, 8),
                                  L.half_matmul(x16, W.astype(np.float16).T).astype(np.float32) + b)
    ref, half = L.linear_backward(dy, c32), L.linear_backward(dy, c16)
    for r, h in zip(ref, half):
        assert h.dtype == np.float32 and h.shape == r.shape
        np.testing.assert_allclose(h, r, rtol=0, atol=4 * F16_EPS * np.abs(r).max())
    np.testing.assert_array_equal(half[2], ref[2])   # the bias gradient is a float32 sum of dy itself


def test_linear_in_half_precision_takes_and_gives_float16_where_asked():
    """Attention's two projections pass float16 to and from attention's products: the same numbers as
    widening to float32 and rounding back, which is what happened before (every float16 widens exactly)."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(4, 16)).astype(np.float32)
    W = (rng.normal(size=(8, 16)) * 0.1).astype(np.float16)
    b = rng.normal(size=8).astype(np.float32)
    dy = rng.normal(size=(4, 8)).astype(np.float32)
    y, cache = L.linear_forward(x, W, b)
    p, _ = L.linear_forward(x, W, None)                 # the product alone: float16, the bias left to the next op
    assert p.dtype == np.float16
    np.testing.assert_array_equal(p + b, y)
    # q, k, v from it: the bias added in float32, then rounded to float16, attention's operands
    q, k, v = L.split_qkv(np.tile(p, 3)[None], np.tile(b, 3), num_heads=2, half_out=True)
    assert q.dtype == np.float16 and q.shape == (1, 2, 4, 4) and q.flags.c_contiguous
    np.testing.assert_array_equal(v[0].transpose(1, 0, 2).reshape(4, 8), y.astype(np.float16))
    y_from16, c = L.linear_forward(x.astype(np.float16), W, b)            # a float16 x is its own operand
    np.testing.assert_array_equal(y_from16, y)
    np.testing.assert_array_equal(c[0], cache[0])
    dx, dW, db = L.linear_backward(dy, cache)
    dx16, dW2, db2 = L.linear_backward(dy, cache, half_dx=True)
    assert dx16.dtype == np.float16 and dW2.dtype == db2.dtype == np.float32
    np.testing.assert_array_equal(dx16.astype(np.float32), dx)            # dx widened is dx16, exactly
    # a float16 dy: the products' operand as it is, the bias gradient its float32 sum
    h = dy.astype(np.float16)
    for a, b_ in zip(L.linear_backward(h, cache), L.linear_backward(h.astype(np.float32), cache)):
        assert a.dtype == np.float32
        np.testing.assert_array_equal(a, b_)
    # a float32 layer ignores half_dx (it is about mixed precision's operands)
    W32 = W.astype(np.float32)
    c32 = L.linear_forward(x, W32, b)[1]
    np.testing.assert_array_equal(L.linear_backward(dy, c32, half_dx=True)[0], L.linear_backward(dy, c32)[0])


def test_attention_in_half_precision_rounds_its_products_and_passes_them_on_in_float16():
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(2, 3, 9, 8)).astype(np.float16) for _ in range(3))   # float16 values
    mask = np.ones((2, 9), dtype=np.int64)
    mask[1, 6:] = 0
    bias = L.attention_mask_bias(mask, np.float32)
    dout = rng.normal(size=(2, 3, 9, 8)).astype(np.float32)
    out32, c32 = L.attention_forward(*(a.astype(np.float32) for a in (q, k, v)), bias)
    out16, c16 = L.attention_forward(q, k, v, bias)
    # the softmax in float32; the output the float16 product, the operand of the output projection's
    assert c16.probs.dtype == np.float32 and c16.probs_d.dtype == out16.dtype == np.float16
    # the second product takes P rounded to float16, and its result is rounded once more
    np.testing.assert_array_equal(out16, L.half_matmul(c16.probs_d, v))
    err = np.abs(out16 - out32).max() / np.abs(out32).max()
    assert 1e-5 < err < 4 * F16_EPS                  # float16 roundings, nothing more
    grads16 = L.attention_backward(dout, c16)
    for r, h in zip(L.attention_backward(dout, c32), grads16):
        assert h.dtype == np.float16 and h.shape == r.shape     # the input projection's operand
        err = np.abs(h.astype(np.float32) - r).max() / np.abs(r).max()
        assert 1e-5 < err < 8 * F16_EPS, err
    # a gradient that comes in float16 (the output projection's dx) is the operand as it is
    for a, b in zip(L.attention_backward(dout.astype(np.float16), c16),
                    L.attention_backward(dout.astype(np.float16).astype(np.float32), c16)):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------ whole model
@pytest.fixture(scope="module")
def tiny():
    return BertConfig.from_preset("tiny", vocab_size=1000)


def test_mixed_model_follows_the_float32_model(tiny):
    loss32, g32 = grads(BertForPreTraining(tiny, seed=0))
    mixed = BertForPreTraining(tiny, seed=0, mixed_precision=True)
    loss16, g16 = grads(mixed, loss_scale=1024.0)
    assert mixed.params.half.dtype == np.float16
    assert loss16 != loss32                       # the half-precision path really ran
    assert abs(loss16 - loss32) <= 1e-4 * abs(loss32)
    rel = np.linalg.norm(g16 - g32) / np.linalg.norm(g32)
    assert 1e-5 < rel < 2e-3, rel
    # every parameter tensor, not only the largest ones, stays close (the key
    # biases are left out: their exact gradient is 0, softmax ignores a shift)
    for name, (start, stop) in mixed.params.offsets.items():
        a, b = g16[start:stop], g32[start:stop]
        if "key.bias" not in name:
            assert np.linalg.norm(a - b) / np.linalg.norm(b) < 1e-2, name


def test_loss_scaling_saves_gradients_that_float16_would_flush_to_zero(tiny):
    _, g32 = grads(BertForPreTraining(tiny, seed=0))
    mixed = BertForPreTraining(tiny, seed=0, mixed_precision=True)
    lost = {}
    for scale in (1.0, 2.0 ** 12):
        _, g = grads(mixed, loss_scale=scale)
        lost[scale] = int(((g == 0) & (g32 != 0)).sum())
    assert lost[1.0] > 20 * max(lost[2.0 ** 12], 1)


def test_too_large_a_scale_gives_non_finite_gradients(tiny):
    mixed = BertForPreTraining(tiny, seed=0, mixed_precision=True)
    with np.errstate(invalid="ignore", over="ignore"):
        _, g = grads(mixed, loss_scale=2.0 ** 30)
    assert not np.isfinite(g).all()


def test_the_half_weights_follow_each_update(tiny):
    model = BertForPreTraining(tiny, seed=0, mixed_precision=True)
    opt = AdamW(model.params, lr=1e-2)
    losses = []
    for _ in range(3):
        out = model.forward(**batch(), train=False)
        losses.append(float(out.loss))
        model.backward(loss_scale=256.0)
        model.params.grad /= 256.0
        opt.step()
    assert not np.array_equal(model.params.half, model.params.data[:model.params.decay_size].astype(np.float16))
    model.forward(**batch(), train=False)
    np.testing.assert_array_equal(model.params.half, model.params.data[:model.params.decay_size].astype(np.float16))
    assert losses[2] < losses[0]


def test_bad_mixed_precision_settings_fail_clearly(tiny):
    with pytest.raises(ValueError, match="needs dtype='float32'"):
        BertForPreTraining(tiny, dtype="float64", mixed_precision=True)
    with pytest.raises(TypeError, match="mixed_precision must be True or False"):
        BertForPreTraining(tiny, mixed_precision="yes")
    model = BertForPreTraining(tiny, mixed_precision=True)
    for bad in (0.0, -1.0, float("inf"), float("nan"), "8", True):
        model.forward(**batch(), train=False)
        with pytest.raises(ValueError, match="loss_scale must be a positive finite number"):
            model.backward(loss_scale=bad)


# ------------------------------------------------------------------ the scaler
def test_loss_scaler_halves_on_overflow_and_doubles_after_a_run_of_good_steps():
    s = LossScaler(init_scale=1024.0, growth_interval=3)
    assert s.update(False) is False and s.scale == 512.0
    assert [s.update(True) for _ in range(2)] == [True, True] and s.scale == 512.0
    assert s.update(True) and s.scale == 1024.0 and s.good_steps == 0
    s.update(True)
    assert s.update(False) is False and s.scale == 512.0 and s.good_steps == 0   # an overflow restarts the count
    t = LossScaler()
    t.load_state_dict(json.loads(json.dumps(s.state_dict())))
    assert (t.scale, t.good_steps) == (s.scale, s.good_steps)


@pytest.mark.parametrize("kw", [dict(init_scale=0), dict(init_scale=float("inf")), dict(growth_factor=1.0),
                                dict(backoff_factor=1.0), dict(growth_interval=0), dict(growth_interval=2.5)])
def test_loss_scaler_rejects_bad_settings(kw):
    with pytest.raises(ValueError):
        LossScaler(**kw)


# ------------------------------------------------------------------ training runs
def test_mixed_training_run_tracks_float32_and_resumes_bit_identically(corpus_file, tmp_path):
    quiet = dict(log=lambda *a: None)
    pretrain(small_args(corpus_file, tmp_path / "f32"), **quiet)
    pretrain(small_args(corpus_file, tmp_path / "once", mixed_precision=True), **quiet)
    pretrain(small_args(corpus_file, tmp_path / "twice", mixed_precision=True, stop_at=5), **quiet)
    pretrain(small_args(corpus_file, tmp_path / "twice", mixed_precision=True, resume=True), **quiet)
    f32, once, twice = (train_losses(tmp_path / d) for d in ("f32", "once", "twice"))
    assert once == twice
    assert once != f32
    np.testing.assert_allclose([l for _, l in once], [l for _, l in f32], rtol=1e-3)
    rows = [json.loads(l) for l in (tmp_path / "once" / "metrics.jsonl").read_text().splitlines()]
    assert all(r["loss_scale"] == 2.0 ** 16 and r["skipped_steps"] == 0 for r in rows if r["kind"] == "train")
    # a float32 run's checkpoints do not resume as a mixed run
    from minibert.train.checkpoint_files import CheckpointError
    with pytest.raises(CheckpointError, match="mixed_precision"):
        pretrain(small_args(corpus_file, tmp_path / "f32", mixed_precision=True, resume=True, steps=12), **quiet)


def test_overflowing_steps_are_skipped_and_the_scale_comes_down(corpus_file, tmp_path, monkeypatch):
    import minibert.train.loop as T   # where pretrain looks these names up
    monkeypatch.setattr(T, "LossScaler", functools.partial(LossScaler, init_scale=2.0 ** 40))
    seen = []
    real_step = AdamW.step
    def step(self, lr=None, take=None):       # the steps taken: the scaler said yes
        if take is None or take:
            seen.append(1)
        real_step(self, lr, take)
    monkeypatch.setattr(AdamW, "step", step)
    pretrain(small_args(corpus_file, tmp_path, mixed_precision=True, steps=30, warmup=0), log=lambda *a: None)
    rows = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines() if '"train"' in l]
    skipped = sum(r["skipped_steps"] for r in rows)
    assert 5 <= skipped < 30                            # 2^40 had to come down to float16's range
    assert len(seen) == 30 - skipped                    # a skipped step leaves the weights alone
    assert rows[-1]["loss_scale"] == 2.0 ** (40 - skipped)
    assert all(np.isfinite(r["grad_norm"]) for r in rows)


def test_a_run_whose_gradients_overflow_at_any_scale_stops_with_a_clear_error(corpus_file, tmp_path, monkeypatch):
    import minibert.train.loop as T   # where pretrain looks these names up
    monkeypatch.setattr(T, "LossScaler", functools.partial(LossScaler, init_scale=4.0))
    monkeypatch.setattr(T, "unscale_and_clip", lambda store, max_norm, loss_scale=1.0, accum=1: float("inf"))
    with pytest.raises(TrainingError, match="overflow float16 even at loss scale 1"):
        pretrain(small_args(corpus_file, tmp_path, mixed_precision=True), log=lambda *a: None)


@pytest.mark.parametrize("kw,expected", [
    (dict(mixed_precision=True, dtype="float64"), "--mixed-precision keeps float32 master weights"),
    (dict(max_grad_norm=-1.0), "--max-grad-norm must be >= 0"),
    (dict(max_grad_norm=float("nan")), "--max-grad-norm must be >= 0"),
    (dict(weight_decay=-0.1), "--weight-decay must be >= 0"),
])
def test_bad_training_settings_fail_before_any_work(corpus_file, tmp_path, kw, expected):
    with pytest.raises(ValueError, match=expected):
        pretrain(small_args(corpus_file, tmp_path / "o", **kw), log=lambda *a: None)
    assert not (tmp_path / "o" / "vocab.txt").exists()


def test_max_grad_norm_zero_means_no_clipping(corpus_file, tmp_path):
    pretrain(small_args(corpus_file, tmp_path / "a", max_grad_norm=0.0, steps=4), log=lambda *a: None)
    pretrain(small_args(corpus_file, tmp_path / "b", max_grad_norm=1e9, steps=4), log=lambda *a: None)
    assert train_losses(tmp_path / "a") == train_losses(tmp_path / "b")


def test_a_saved_model_loads_in_mixed_precision(tiny, tmp_path):
    model = BertForPreTraining(tiny, seed=3)
    model.save_pretrained(tmp_path / "m")
    mixed = BertForPreTraining.from_pretrained(tmp_path / "m", mixed_precision=True)
    assert mixed.mixed_precision
    np.testing.assert_array_equal(mixed.params.data, model.params.data)
    a = float(model.forward(**batch(), train=False).loss)
    b = float(mixed.forward(**batch(), train=False).loss)   # the half copy made from the loaded weights
    assert a != b and abs(a - b) <= 1e-4 * a


def test_mixed_precision_with_gradient_accumulation(corpus_file, tmp_path):
    # the micro-batches' scaled gradients add up in float32; one division takes out both factors
    quiet = dict(log=lambda *a: None)
    pretrain(small_args(corpus_file, tmp_path / "f32", accum=2, steps=6), **quiet)
    pretrain(small_args(corpus_file, tmp_path / "mp", accum=2, steps=6, mixed_precision=True), **quiet)
    f32, mp = train_losses(tmp_path / "f32"), train_losses(tmp_path / "mp")
    assert [s for s, _ in mp] == list(range(1, 7))
    np.testing.assert_allclose([l for _, l in mp], [l for _, l in f32], rtol=1e-3)
    # AdamW hardly sees a gradient off by a constant factor; the logged norms do
    norms = [[json.loads(l)["grad_norm"] for l in (tmp_path / d / "metrics.jsonl").read_text().splitlines()
              if '"train"' in l] for d in ("f32", "mp")]
    np.testing.assert_allclose(norms[1], norms[0], rtol=1e-2)


def test_the_bare_encoder_runs_in_mixed_precision(tiny):
    from minibert.model import BertModel
    b = batch()
    ref, mixed = BertModel(tiny, seed=1), BertModel(tiny, seed=1, mixed_precision=True)
    r = ref.forward(b["input_ids"], b["token_type_ids"])
    m = mixed.forward(b["input_ids"], b["token_type_ids"])
    assert m.last_hidden_state.dtype == np.float32
    err = np.abs(m.last_hidden_state - r.last_hidden_state).max()
    assert 0 < err < 1e-2                         # LayerNorm'd outputs of size ~1, a few float16 roundings
    np.testing.assert_allclose(m.pooler_output, r.pooler_output, atol=1e-2)
    dh = np.ones_like(r.last_hidden_state)
    ref.backward(dh)
    mixed.backward(dh)
    g, g32 = mixed.params.grad, ref.params.grad
    assert np.linalg.norm(g - g32) < 2e-3 * np.linalg.norm(g32)
