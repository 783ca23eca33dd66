"""The whole BertForPreTraining: gradients, sizes, learning, and bad input."""
import math

import numpy as np
import pytest

import minibert as mb
from minibert.gradcheck import numerical_gradient, max_rel_error
from minibert.optim import AdamW
from conftest import padded_batch


def tiny64(vocab_size=30522, **kw):
    config = mb.BertConfig.from_preset("tiny", vocab_size=vocab_size, hidden_dropout_prob=0.0,
                                       attention_probs_dropout_prob=0.0, **kw)
    return mb.BertForPreTraining(config, seed=3, dtype="float64")


def sample_entries(grad, rng, k=4):
    """The k//2 largest-magnitude entries plus k - k//2 random ones among the top 10%."""
    flat = np.abs(grad).ravel()
    order = np.argsort(flat)[::-1]
    top = order[: k // 2]
    pool = order[: max(k, flat.size // 10)]
    rest = rng.choice(pool[k // 2:], size=min(k - k // 2, len(pool) - k // 2), replace=False)
    return [np.unravel_index(i, grad.shape) for i in np.r_[top, rest]]


def test_every_parameter_gradient_matches_finite_differences(rng):
    model = tiny64()
    batch = padded_batch(rng, model.config.vocab_size, B=3, T=9)
    model.forward(**batch, train=False)
    model.backward()
    grads = {k: g.copy() for k, g in model.params.grads.items()}
    loss = lambda: float(model.forward(**batch, train=False).loss)
    checked = 0
    for name, param in model.params.params.items():
        g = grads[name]
        if name.endswith("attention.self.key.bias"):
            # softmax is unchanged by adding the same number to every score of a
            # query, and a key bias adds q.b to all of them: its gradient is 0
            assert np.abs(g).max() < 1e-12, name
            continue
        idx = sample_entries(g, rng)
        num = numerical_gradient(loss, param, indices=idx)
        ana = np.array([g[i] for i in idx])
        numv = np.array([num[i] for i in idx])
        err = np.max(np.abs(ana - numv) / np.maximum(np.abs(ana) + np.abs(numv), 1e-12))
        assert err < 1e-6, f"{name}: relative error {err:.2e} at {idx}"
        checked += 1
    assert checked == len(model.params.params) - model.config.num_hidden_layers


def test_tiny_preset_parameter_count():
    model = mb.BertForPreTraining(mb.BertConfig.from_preset("tiny", vocab_size=30522))
    assert model.num_parameters() == 4_433_468
    assert sum(p.size for p in model.params.params.values()) == 4_433_468


@pytest.mark.parametrize("name,L,H,A", [("tiny", 2, 128, 2), ("mini", 4, 256, 4), ("small", 4, 512, 8),
                                        ("medium", 8, 512, 8), ("base", 12, 768, 12)])
def test_presets(name, L, H, A):
    c = mb.BertConfig.from_preset(name, vocab_size=1000)
    assert (c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.intermediate_size) == (L, H, A, 4 * H)


def test_initialisation_follows_bert():
    model = mb.BertForPreTraining(mb.BertConfig.from_preset("tiny", vocab_size=5000), seed=0)
    P = model.params.params
    w = P["bert.encoder.layer.0.intermediate.dense.weight"]
    assert abs(w.std() - 0.02) < 0.001 and abs(w.mean()) < 0.001
    assert not P["bert.embeddings.word_embeddings.weight"][0].any()  # [PAD]
    assert (P["bert.encoder.layer.1.output.LayerNorm.weight"] == 1).all()
    assert not P["cls.predictions.bias"].any()
    # the same seed gives the same model in float32 and float64
    m64 = mb.BertForPreTraining(model.config, seed=0, dtype="float64")
    np.testing.assert_array_equal(w, m64.params.params["bert.encoder.layer.0.intermediate.dense.weight"]
                                  .astype(np.float32))


def test_fresh_model_loss_is_near_log_vocab(rng):
    model = mb.BertForPreTraining(mb.BertConfig.from_preset("tiny", vocab_size=30522), seed=0)
    ids = rng.integers(5, 30522, (8, 64))
    labels = rng.integers(0, 30522, (8, 64))
    out = model.forward(ids, mlm_labels=labels, train=False)
    assert abs(float(out.mlm_loss) - math.log(30522)) < 0.15
    assert out.mlm_logits.shape == (8 * 64, 30522)


def test_overfits_one_batch(rng, either_path):
    config = mb.BertConfig.from_preset("tiny", vocab_size=500)
    model = mb.BertForPreTraining(config, seed=0, kernels=either_path)
    batch = padded_batch(rng, 500, B=4, T=16, n_labels=(3,))
    opt = AdamW(model.params, lr=2e-3, weight_decay=0.0)
    first = None
    for step in range(300):
        out = model.forward(**batch, train=False)
        first = first if first is not None else float(out.loss)
        model.backward()
        opt.step()
    assert first > 5.0
    assert float(out.loss) < 0.02, float(out.loss)


def test_labelled_positions_give_the_same_logits_as_all_positions(rng):
    model = tiny64(vocab_size=300)
    batch = padded_batch(rng, 300)
    full = model.forward(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], train=False)
    part = model.forward(**batch, train=False)
    B, T = batch["input_ids"].shape
    rows, cols = np.nonzero(batch["mlm_labels"] != -100)  # row-major order
    np.testing.assert_allclose(part.mlm_logits, full.mlm_logits[rows, cols], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(part.mlm_positions, rows * T + cols)


def test_dropout_is_seeded_and_off_at_eval(rng, either_path):
    config = mb.BertConfig.from_preset("tiny", vocab_size=300)
    batch = padded_batch(rng, 300)
    a = mb.BertForPreTraining(config, seed=7, kernels=either_path).forward(**batch, train=True).loss
    b = mb.BertForPreTraining(config, seed=7, kernels=either_path).forward(**batch, train=True).loss
    c = mb.BertForPreTraining(config, seed=8, kernels=either_path).forward(**batch, train=True).loss
    assert float(a) == float(b) and float(a) != float(c)
    m = mb.BertForPreTraining(config, seed=7, kernels=either_path)
    e1, e2 = (float(m.forward(**batch, train=False).loss) for _ in range(2))
    assert e1 == e2


def test_gradients_accumulate_on_request(rng):
    model = tiny64(vocab_size=200)
    batch = padded_batch(rng, 200)
    model.forward(**batch, train=False)
    model.backward()
    once = model.params.grad.copy()
    model.forward(**batch, train=False)
    model.backward(accumulate=True)
    np.testing.assert_allclose(model.params.grad, 2 * once, rtol=1e-12, atol=1e-15)


def test_bert_model_backward_matches_finite_differences(rng):
    config = mb.BertConfig(vocab_size=50, hidden_size=12, num_hidden_layers=1, num_attention_heads=3,
                           intermediate_size=20, max_position_embeddings=16,
                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = mb.BertModel(config, dtype="float64")
    batch = padded_batch(rng, 50, T=7)
    args = (batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    out = model.forward(*args)
    dh = rng.standard_normal(out.last_hidden_state.shape)
    dp = rng.standard_normal(out.pooler_output.shape)
    model.backward(dh, dp)
    def outputs():
        o = model.forward(*args)
        return np.concatenate([o.last_hidden_state.ravel(), o.pooler_output.ravel()])

    dout = np.concatenate([dh.ravel(), dp.ravel()])
    for name in ["encoder.layer.0.attention.self.query.weight", "pooler.dense.weight",
                 "embeddings.LayerNorm.weight", "encoder.layer.0.output.dense.bias"]:
        num = numerical_gradient(outputs, model.params.params[name], dout)
        assert max_rel_error(model.params.grads[name], num) < 1e-6, name  # whole-model tolerance
