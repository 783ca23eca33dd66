"""AdamW, the schedule and clipping against PyTorch/transformers, and ten steps of training."""
import numpy as np
import pytest

import minibert as mb
from minibert.optim import AdamW, clip_grad_norm, linear_warmup_decay
from minibert.model.params import ParamSpec, ParamStore
from conftest import padded_batch

torch = pytest.importorskip("torch", reason="needs torch==2.13.0 (pip install -e '.[test]')")
transformers = pytest.importorskip("transformers", reason="needs transformers")


def small_store(rng):
    specs = [ParamSpec("dense.weight", (4, 3), "normal", True),
             ParamSpec("dense.bias", (4,), "zeros", False),
             ParamSpec("LayerNorm.weight", (4,), "ones", False),
             ParamSpec("emb.weight", (5, 4), "normal", True)]
    store = ParamStore(specs, np, np.float64)
    for name, p in store.params.items():
        p[...] = rng.standard_normal(p.shape)
    return store


def torch_twin(store):
    params = {n: torch.tensor(p.copy(), requires_grad=True) for n, p in store.params.items()}
    decay = [params[s.name] for s in store.specs if s.decay]
    no_decay = [params[s.name] for s in store.specs if not s.decay]
    return params, decay, no_decay


@pytest.mark.parametrize("lr,wd", [(1e-3, 0.01), (0.1, 0.3)])
def test_adamw_steps_equal_torch(rng, lr, wd):
    store = small_store(rng)
    params, decay, no_decay = torch_twin(store)
    opt_t = torch.optim.AdamW([{"params": decay, "weight_decay": wd},
                               {"params": no_decay, "weight_decay": 0.0}],
                              lr=lr, betas=(0.9, 0.999), eps=1e-6)
    opt = AdamW(store, lr=lr, weight_decay=wd)
    for _ in range(3):
        for name, g in store.grads.items():
            g[...] = rng.standard_normal(g.shape)
            params[name].grad = torch.tensor(g.copy())
        opt.step()
        opt_t.step()
        for name, p in store.params.items():
            np.testing.assert_allclose(p, params[name].detach().numpy(), rtol=1e-12, atol=1e-15, err_msg=name)


def test_no_decay_on_bias_and_layernorm(rng):
    store = small_store(rng)
    before = {n: p.copy() for n, p in store.params.items()}
    AdamW(store, lr=0.5, weight_decay=0.5).step()  # zero gradients: only decay moves anything
    np.testing.assert_array_equal(store.params["dense.bias"], before["dense.bias"])
    np.testing.assert_array_equal(store.params["LayerNorm.weight"], before["LayerNorm.weight"])
    np.testing.assert_allclose(store.params["dense.weight"], before["dense.weight"] * 0.75)


def test_bert_flavour_has_no_bias_correction(rng):
    store = small_store(rng)
    store.grad[...] = 1.0
    before = store.data.copy()
    AdamW(store, lr=0.1, weight_decay=0.0, bias_correction=False).step()
    # m = 0.1, v = 0.001: update = 0.1 / (sqrt(0.001) + 1e-6)
    np.testing.assert_allclose(before - store.data, 0.1 * 0.1 / (np.sqrt(0.001) + 1e-6), rtol=1e-12)


def test_schedule_equals_transformers():
    total, warmup = 37, 6
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=2.0)
    sched = transformers.get_linear_schedule_with_warmup(opt, warmup, total)
    for step in range(total + 3):
        assert linear_warmup_decay(step, total, warmup) * 2.0 == pytest.approx(opt.param_groups[0]["lr"],
                                                                                 rel=1e-15, abs=1e-15)
        opt.step()
        sched.step()


@pytest.mark.parametrize("target_norm", [18.0, 1.5, 0.7])
def test_clipping_equals_torch(rng, target_norm):
    store = small_store(rng)
    g = rng.standard_normal(store.size)
    store.grad[...] = g * (target_norm / np.linalg.norm(g))
    tensors = [torch.tensor(g.copy(), requires_grad=True) for g in store.grads.values()]
    for t, g in zip(tensors, store.grads.values()):
        t.grad = torch.tensor(g.copy())
    norm_t = torch.nn.utils.clip_grad_norm_(tensors, 1.0)
    norm = clip_grad_norm(store, 1.0)
    assert norm == pytest.approx(norm_t.item(), rel=1e-14)
    for t, g in zip(tensors, store.grads.values()):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-14)
    assert np.linalg.norm(store.grad) == pytest.approx(min(1.0, target_norm), rel=1e-5)


def test_ten_training_steps_follow_transformers(rng):
    """llm.c's check: the same model, data, optimiser, schedule and clipping give the same losses."""
    config = mb.BertConfig.from_preset("tiny", vocab_size=400, hidden_dropout_prob=0.0,
                                       attention_probs_dropout_prob=0.0)
    model = mb.BertForPreTraining(config, seed=0, dtype="float64")
    hc = transformers.BertConfig(**config.to_dict())
    hc._attn_implementation = "eager"
    hf = transformers.BertForPreTraining(hc).double()
    hf.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in model.state_dict().items()}, strict=False)
    hf.train()  # dropout probabilities are 0: train mode changes nothing else

    steps, warmup, lr = 10, 3, 1e-3
    names = {id(p): n for n, p in hf.named_parameters()}
    decay = [p for p in hf.parameters() if not names[id(p)].endswith("bias") and "LayerNorm" not in names[id(p)]]
    no_decay = [p for p in hf.parameters() if names[id(p)].endswith("bias") or "LayerNorm" in names[id(p)]]
    opt_t = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                               {"params": no_decay, "weight_decay": 0.0}], lr=lr, eps=1e-6)
    sched = transformers.get_linear_schedule_with_warmup(opt_t, warmup, steps)
    opt = AdamW(model.params, lr=lr, weight_decay=0.01)

    # the decay groups agree name for name
    ours_decay = {s.name for s in model.params.specs if s.decay}
    theirs_decay = {names[id(p)] for p in decay}
    assert ours_decay == theirs_decay

    for step in range(steps):
        batch = padded_batch(rng, 400, B=4, T=12, n_labels=(3, 2))
        out = model.forward(**batch, train=True)
        model.backward()
        clip_grad_norm(model.params, 1.0)
        opt.step(lr * linear_warmup_decay(step, steps, warmup))

        t = {k: torch.from_numpy(v) for k, v in batch.items()}
        ref = hf(input_ids=t["input_ids"], token_type_ids=t["token_type_ids"],
                 attention_mask=t["attention_mask"], labels=t["mlm_labels"], next_sentence_label=t["nsp_labels"])
        opt_t.zero_grad()
        ref.loss.backward()
        torch.nn.utils.clip_grad_norm_(hf.parameters(), 1.0)
        opt_t.step()
        sched.step()
        assert abs(float(out.loss) - ref.loss.item()) / ref.loss.item() < 1e-9, f"step {step}"


def test_adamw_refuses_values_that_would_ruin_the_weights(rng):
    store = small_store(rng)
    for kw, match in [(dict(lr=float("inf")), "lr must be a finite number"),
                      (dict(lr=-1.0), "lr must be"), (dict(betas=0.9), "betas must be two numbers"),
                      (dict(betas=(0.9,)), "betas"), (dict(eps=0.0), "eps"),
                      (dict(weight_decay=float("nan")), "weight_decay")]:
        with pytest.raises(ValueError, match=match):
            AdamW(store, **kw)
    opt = AdamW(store, lr=1e-3)
    before = store.data.copy()
    with pytest.raises(ValueError, match="lr must be a finite number"):
        opt.step(lr=float("nan"))
    np.testing.assert_array_equal(store.data, before)
    assert opt.t == 0


def test_adamw_state_of_another_model_is_refused(rng):
    store = small_store(rng)
    opt = AdamW(store)
    n = store.data.size
    for state, match in [({"m": np.zeros(1), "v": np.zeros(1), "t": 1}, r"shape \(1,\)"),
                         ({"m": np.zeros(n), "v": np.zeros(n)}, "missing \\['t'\\]"),
                         ({"m": np.zeros(n), "v": np.zeros(n), "t": -2}, "step count")]:
        with pytest.raises(ValueError, match=match):
            opt.load_state_dict(state)
    opt.load_state_dict({"m": np.ones(n), "v": np.ones(n), "t": 3})
    assert opt.t == 3 and (opt.m == 1).all()
