"""minibert against Hugging Face's BertForPreTraining with identical weights.

float64: logits, NSP logits and loss to 1e-9 relative, every parameter
gradient to 1e-8 (norm-wise relative).  float32 (the default dtype): 1e-4.
"""
import numpy as np
import pytest

import minibert as mb
from conftest import padded_batch

torch = pytest.importorskip("torch", reason="the parity tests need torch==2.13.0 (pip install -e '.[test]')")
transformers = pytest.importorskip("transformers", reason="the parity tests need transformers")

CONFIGS = {
    "tiny": dict(vocab_size=30522, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=512),
    "odd": dict(vocab_size=97, hidden_size=48, num_hidden_layers=3, num_attention_heads=3,
                intermediate_size=72, max_position_embeddings=40, type_vocab_size=3, pad_token_id=1),
    "gelu_new": dict(vocab_size=211, hidden_size=20, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=36, hidden_act="gelu_new", layer_norm_eps=1e-7),
}


def hf_twin(model, dtype):
    """A transformers BertForPreTraining holding minibert ``model``'s weights."""
    hc = transformers.BertConfig(**model.config.to_dict())
    hc._attn_implementation = "eager"
    torch.manual_seed(0)
    hf = transformers.BertForPreTraining(hc).to(dtype).eval()
    state = {k: torch.from_numpy(np.array(v)) for k, v in model.state_dict().items()}
    missing, unexpected = hf.load_state_dict(state, strict=False)
    assert not unexpected and not [m for m in missing if "position_ids" not in m]
    return hf


def rel(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def run_both(name, dtype, rng, kernels="reference"):
    config = mb.BertConfig(**CONFIGS[name], hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = mb.BertForPreTraining(config, seed=11, dtype=dtype, kernels=kernels)
    # the initial weights are almost too regular: perturb them so every path matters
    for p in model.params.params.values():
        p += (rng.standard_normal(p.shape) * 0.02).astype(p.dtype)
    hf = hf_twin(model, torch.float64 if dtype == "float64" else torch.float32)
    batch = padded_batch(rng, config.vocab_size, B=4, T=13, n_labels=(3, 1, 2))
    batch["input_ids"][batch["attention_mask"] == 0] = config.pad_token_id
    batch["token_type_ids"][2, 1:4] = config.type_vocab_size - 1
    t = {k: torch.from_numpy(v) for k, v in batch.items()}
    return model, hf, batch, t


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("dtype,tol_out,tol_grad", [("float64", 1e-9, 1e-8), ("float32", 1e-4, 1e-4)])
def test_matches_transformers(name, dtype, tol_out, tol_grad, rng, either_path):
    model, hf, batch, t = run_both(name, dtype, rng, either_path)
    inputs = {k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask")}

    # without labels: the decoder over every position
    ours = model.forward(**inputs, train=False)
    with torch.no_grad():
        ref = hf(input_ids=t["input_ids"], token_type_ids=t["token_type_ids"],
                 attention_mask=t["attention_mask"])
    assert rel(ours.mlm_logits, ref.prediction_logits) < tol_out
    assert rel(ours.nsp_logits, ref.seq_relationship_logits) < tol_out

    # with labels: loss and every gradient
    ours = model.forward(**batch, train=False)
    model.backward()
    ref = hf(input_ids=t["input_ids"], token_type_ids=t["token_type_ids"], attention_mask=t["attention_mask"],
             labels=t["mlm_labels"], next_sentence_label=t["nsp_labels"])
    ref.loss.backward()
    assert abs(float(ours.loss) - ref.loss.item()) / ref.loss.item() < tol_out
    grads = model.grad_state_dict()
    checked = 0
    for pname, p in hf.named_parameters():
        g_ref = p.grad.numpy()
        if pname.endswith("attention.self.key.bias"):
            # exactly 0 in exact arithmetic (softmax ignores a shift shared by a query's scores):
            # both sides hold rounding noise only
            assert np.abs(grads[pname]).max() < 1e-10 * (1e6 if dtype == "float32" else 1)
            assert np.abs(g_ref).max() < 1e-10 * (1e6 if dtype == "float32" else 1)
            continue
        assert rel(grads[pname], g_ref) < tol_grad, f"{pname}: {rel(grads[pname], g_ref):.2e}"
        checked += 1
    assert checked > 10


def test_fully_padded_sequence_matches_forward(rng):
    model, hf, batch, t = run_both("odd", "float64", rng)
    mask = batch["attention_mask"].copy()
    mask[1] = 0
    out = model.forward(batch["input_ids"], batch["token_type_ids"], mask, train=False)
    with torch.no_grad():
        ref = hf(input_ids=t["input_ids"], token_type_ids=t["token_type_ids"],
                 attention_mask=torch.from_numpy(mask))
    assert np.isfinite(out.mlm_logits).all() and np.isfinite(out.nsp_logits).all()
    assert rel(out.mlm_logits, ref.prediction_logits) < 1e-9
