"""The fine-tuning model: its backward against central differences in float64, and the whole model against
transformers' BertForSequenceClassification with the same weights (logits, loss and every gradient), for
classification (2 and 3 labels) and for the regression head."""
import numpy as np
import pytest

import minibert as mb
from conftest import padded_batch
from minibert.finetune.model import BertForSequenceClassification
from minibert.gradcheck import max_rel_error, numerical_gradient

SMALL = dict(vocab_size=53, hidden_size=12, num_hidden_layers=2, num_attention_heads=3, intermediate_size=20,
             max_position_embeddings=16)


def model_and_batch(rng, num_labels, dropout=0.0, B=3, T=9):
    config = mb.BertConfig(**SMALL, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    model = BertForSequenceClassification(config, num_labels=num_labels, seed=3, dtype="float64")
    for p in model.params.params.values():        # weights less regular than the initial ones
        p += rng.standard_normal(p.shape) * 0.05
    batch = padded_batch(rng, config.vocab_size, B=B, T=T)
    inputs = {k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
    labels = rng.uniform(0, 5, B) if num_labels == 1 else rng.integers(0, num_labels, B)
    return model, inputs, labels


@pytest.mark.parametrize("num_labels", [1, 2, 3])
def test_every_gradient_matches_central_differences(rng, num_labels):
    model, inputs, labels = model_and_batch(rng, num_labels)
    model.forward(**inputs, labels=labels, train=True)
    model.backward()
    grads = {k: v.copy() for k, v in model.grad_state_dict().items()}
    loss = lambda: float(model.forward(**inputs, labels=labels, train=True).loss)
    for name in ("classifier.weight", "classifier.bias", "bert.pooler.dense.weight",
                 "bert.encoder.layer.1.output.dense.weight", "bert.embeddings.word_embeddings.weight"):
        p = model.params.params[name]
        assert max_rel_error(grads[name], numerical_gradient(loss, p)) < 1e-7, name


def test_dropout_on_the_pooled_vector_is_in_the_gradient(rng):
    model, inputs, labels = model_and_batch(rng, 2, dropout=0.3)
    model.seed_dropout(5)
    model.forward(**inputs, labels=labels, train=True)
    model.backward()
    g = model.grad_state_dict()["classifier.weight"].copy()

    def loss():
        model.seed_dropout(5)                       # the same masks at every evaluation
        return float(model.forward(**inputs, labels=labels, train=True).loss)
    assert max_rel_error(g, numerical_gradient(loss, model.params.params["classifier.weight"])) < 1e-7
    model.forward(**inputs, labels=labels, train=False)
    model.backward()
    assert max_rel_error(g, model.grad_state_dict()["classifier.weight"]) > 0.1     # dropout did change it


def test_labels_that_cannot_be_are_refused(rng):
    model, inputs, _ = model_and_batch(rng, 3)
    with pytest.raises(ValueError, match=r"labels must be class numbers in \[0, 3\)"):
        model.forward(**inputs, labels=np.array([0, 3, 1]))
    with pytest.raises(ValueError, match=r"labels must be \(3,\), one per sequence"):
        model.forward(**inputs, labels=np.array([0, 1]))
    with pytest.raises(ValueError, match="num_labels must be an int >= 1"):
        BertForSequenceClassification(model.config, num_labels=0)
    with pytest.raises(RuntimeError, match="needs a forward"):
        model.backward()


torch = pytest.importorskip("torch", reason="the parity tests need torch==2.13.0 (pip install -e '.[test]')")
transformers = pytest.importorskip("transformers", reason="the parity tests need transformers")


@pytest.mark.parametrize("num_labels", [1, 2, 3])
def test_matches_transformers_bert_for_sequence_classification(rng, num_labels):
    model, inputs, labels = model_and_batch(rng, num_labels)
    hc = transformers.BertConfig(**model.config.to_dict(), num_labels=num_labels)
    hc._attn_implementation = "eager"
    hc.problem_type = "regression" if num_labels == 1 else "single_label_classification"
    hf = transformers.BertForSequenceClassification(hc).to(torch.float64).eval()
    missing, unexpected = hf.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in
                                              model.state_dict().items()}, strict=False)
    assert not unexpected and not [m for m in missing if "position_ids" not in m]
    ours = model.forward(**inputs, labels=labels, train=False)
    model.backward()
    t = {k: torch.from_numpy(v) for k, v in inputs.items()}
    ref = hf(**t, labels=torch.from_numpy(labels))
    ref.loss.backward()
    assert np.abs(ours.logits - ref.logits.detach().numpy()).max() < 1e-12
    assert abs(float(ours.loss) - ref.loss.item()) < 1e-12
    grads, checked = model.grad_state_dict(), 0
    for name, p in hf.named_parameters():
        g_ref = p.grad.numpy()
        if name.endswith("attention.self.key.bias"):     # 0 in exact arithmetic: rounding noise on both sides
            assert np.abs(grads[name]).max() < 1e-15 and np.abs(g_ref).max() < 1e-15
            continue
        assert np.linalg.norm(grads[name] - g_ref) <= 1e-10 * np.linalg.norm(g_ref), name
        checked += 1
    assert checked == len(list(hf.parameters())) - model.config.num_hidden_layers
