"""Weights move both ways through Hugging Face's on-disk format, bit for bit."""
import json

import numpy as np
import pytest

import minibert as mb
from conftest import padded_batch

torch = pytest.importorskip("torch", reason="needs torch==2.13.0 (pip install -e '.[test]')")
transformers = pytest.importorskip("transformers", reason="needs transformers")

CONFIG = dict(vocab_size=120, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
              intermediate_size=40, max_position_embeddings=32)


def _inputs(rng):
    b = padded_batch(rng, CONFIG["vocab_size"], B=2, T=9)
    return {k: b[k] for k in ("input_ids", "token_type_ids", "attention_mask")}


def test_minibert_to_transformers(tmp_path, rng):
    model = mb.BertForPreTraining(mb.BertConfig(**CONFIG), seed=5)
    for p in model.params.params.values():
        p += rng.standard_normal(p.shape).astype(np.float32) * 0.01
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["hidden_size"] == 24
    hf = transformers.BertForPreTraining.from_pretrained(tmp_path, attn_implementation="eager").eval()
    hf_state = hf.state_dict()
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(hf_state[name].numpy(), value, err_msg=name)
    x = _inputs(rng)
    ours = model.forward(**x, train=False)
    with torch.no_grad():
        ref = hf(**{k: torch.from_numpy(v) for k, v in x.items()})
    np.testing.assert_allclose(ours.mlm_logits, ref.prediction_logits.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours.nsp_logits, ref.seq_relationship_logits.numpy(), rtol=1e-4, atol=1e-5)


def test_transformers_to_minibert(tmp_path, rng):
    torch.manual_seed(0)
    hf = transformers.BertForPreTraining(transformers.BertConfig(**CONFIG)).eval()
    hf.save_pretrained(tmp_path)
    model = mb.BertForPreTraining.from_pretrained(tmp_path)
    ours = model.state_dict()
    for name, value in hf.state_dict().items():
        if "position_ids" in name:
            continue
        np.testing.assert_array_equal(ours[name], value.numpy(), err_msg=name)
    x = _inputs(rng)
    with torch.no_grad():
        ref = hf(**{k: torch.from_numpy(v) for k, v in x.items()})
    out = model.forward(**x, train=False)
    np.testing.assert_allclose(out.mlm_logits, ref.prediction_logits.numpy(), rtol=1e-4, atol=1e-5)


def test_round_trip_is_bit_identical(tmp_path):
    for dtype in ("float32", "float64"):
        model = mb.BertForPreTraining(mb.BertConfig(**CONFIG), seed=9, dtype=dtype)
        model.save_pretrained(tmp_path / dtype)
        again = mb.BertForPreTraining.from_pretrained(tmp_path / dtype, dtype=dtype)
        np.testing.assert_array_equal(again.params.data, model.params.data)
        assert again.config == model.config


def test_plain_bert_model_checkpoint_loads_into_bert_model(tmp_path, rng):
    torch.manual_seed(1)
    hf = transformers.BertModel(transformers.BertConfig(**CONFIG)).eval()
    hf.save_pretrained(tmp_path)
    model = mb.BertModel.from_pretrained(tmp_path, dtype="float64")
    x = _inputs(rng)
    with torch.no_grad():
        ref = hf.double()(**{k: torch.from_numpy(v) for k, v in x.items()})
    out = model.forward(**x)
    np.testing.assert_allclose(out.last_hidden_state, ref.last_hidden_state.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(out.pooler_output, ref.pooler_output.numpy(), rtol=1e-10, atol=1e-10)


def test_pretraining_checkpoint_loads_into_bert_model(tmp_path):
    full = mb.BertForPreTraining(mb.BertConfig(**CONFIG), seed=2)
    full.save_pretrained(tmp_path)
    enc = mb.BertModel.from_pretrained(tmp_path)
    np.testing.assert_array_equal(enc.params.params["encoder.layer.1.output.dense.weight"],
                                  full.params.params["bert.encoder.layer.1.output.dense.weight"])


def test_state_dict_names_with_or_without_prefix():
    full = mb.BertForPreTraining(mb.BertConfig(**CONFIG), seed=2)
    enc = mb.BertModel(mb.BertConfig(**CONFIG), seed=3)
    enc.load_state_dict({k: v for k, v in full.state_dict().items() if k.startswith("bert.")})
    np.testing.assert_array_equal(enc.params.params["pooler.dense.weight"],
                                  full.params.params["bert.pooler.dense.weight"])
    other = mb.BertForPreTraining(mb.BertConfig(**CONFIG), seed=4)
    other.load_state_dict({k.removeprefix("bert."): v for k, v in full.state_dict().items()})
    np.testing.assert_array_equal(other.params.data, full.params.data)


def test_load_state_dict_reports_every_problem():
    model = mb.BertForPreTraining(mb.BertConfig(**CONFIG))
    state = {k: np.array(v) for k, v in model.state_dict().items()}
    before = model.params.data.copy()
    del state["cls.seq_relationship.bias"]
    state["cls.something.else"] = np.zeros(3)
    state["bert.pooler.dense.weight"] = np.zeros((2, 2))
    with pytest.raises(ValueError) as err:
        model.load_state_dict(state)
    msg = str(err.value)
    assert "cls.seq_relationship.bias" in msg and "cls.something.else" in msg
    assert "bert.pooler.dense.weight" in msg and "(24, 24)" in msg
    np.testing.assert_array_equal(model.params.data, before)  # nothing half-loaded


def test_untied_decoder_is_refused():
    model = mb.BertForPreTraining(mb.BertConfig(**CONFIG))
    state = {k: np.array(v) for k, v in model.state_dict().items()}
    state["cls.predictions.decoder.weight"] = state["cls.predictions.decoder.weight"] + 1
    with pytest.raises(ValueError, match="ties"):
        model.load_state_dict(state)


def test_missing_or_broken_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        mb.BertForPreTraining.from_pretrained(tmp_path / "nope")
    mb.BertConfig(**CONFIG).to_json_file(tmp_path / "config.json")
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        mb.BertForPreTraining.from_pretrained(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="safetensors"):
        mb.BertForPreTraining.from_pretrained(tmp_path)


def test_config_json_round_trip(tmp_path):
    c = mb.BertConfig.from_preset("mini", vocab_size=999, hidden_act="gelu_new")
    c.to_json_file(tmp_path / "c.json")
    assert mb.BertConfig.from_json_file(tmp_path / "c.json") == c
    hc = transformers.BertConfig.from_json_file(str(tmp_path / "c.json"))
    assert hc.hidden_size == 256 and hc.hidden_act == "gelu_new" and hc.vocab_size == 999
    hc.to_json_file(str(tmp_path / "hf.json"))
    assert mb.BertConfig.from_json_file(tmp_path / "hf.json") == c


def _hf_model(seed=0):
    torch.manual_seed(seed)
    return transformers.BertForPreTraining(transformers.BertConfig(**CONFIG)).eval()


def _same_logits(model, hf, rng):
    x = _inputs(rng)
    ours = model.forward(**x, train=False)
    with torch.no_grad():
        ref = hf(**{k: torch.from_numpy(v) for k, v in x.items()})
    np.testing.assert_allclose(ours.mlm_logits, ref.prediction_logits.float().numpy(), rtol=1e-4, atol=1e-5)


def test_original_bert_names_gamma_and_beta_load(tmp_path, rng):
    # the original BERT checkpoints name LayerNorm's parameters gamma and beta
    from safetensors.torch import save_file
    hf = _hf_model()
    hf.save_pretrained(tmp_path)
    state = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
             for k, v in hf.state_dict().items() if not k.startswith("cls.predictions.decoder.")}
    assert sum(k.endswith(".gamma") for k in state) == 2 * CONFIG["num_hidden_layers"] + 2
    save_file({k: v.clone().contiguous() for k, v in state.items()}, tmp_path / "model.safetensors")
    _same_logits(mb.BertForPreTraining.from_pretrained(tmp_path), hf, rng)


def test_a_tied_alias_stands_in_for_its_weight(rng):
    hf = _hf_model()
    state = dict(hf.state_dict())                     # torch tensors, as they are
    state["cls.predictions.decoder.bias"] = state.pop("cls.predictions.bias")
    model = mb.BertForPreTraining(mb.BertConfig(**CONFIG), seed=9)
    model.load_state_dict(state)
    _same_logits(model, hf, rng)
    # and the same parameter under two spellings is refused, not silently overwritten
    state["pooler.dense.weight"] = state["bert.pooler.dense.weight"] * 2
    with pytest.raises(ValueError, match="repeats"):
        model.load_state_dict(state)


def test_bfloat16_checkpoints_load_exactly_widened(tmp_path, rng):
    hf = _hf_model().to(torch.bfloat16)
    hf.save_pretrained(tmp_path)
    model = mb.BertForPreTraining.from_pretrained(tmp_path)
    for name, value in hf.state_dict().items():
        np.testing.assert_array_equal(model.state_dict()[name], value.float().numpy(), err_msg=name)
    _same_logits(model, hf.float(), rng)
    model.load_state_dict(hf.state_dict())            # bfloat16 tensors directly


def test_sharded_checkpoints_load(tmp_path, rng):
    hf = _hf_model()
    hf.save_pretrained(tmp_path, max_shard_size="20KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    assert len(list(tmp_path.glob("model-*.safetensors"))) > 1
    _same_logits(mb.BertForPreTraining.from_pretrained(tmp_path), hf, rng)


def test_weights_that_are_not_numbers_are_refused():
    model = mb.BertForPreTraining(mb.BertConfig(**CONFIG))
    state = {k: np.array(v) for k, v in model.state_dict().items()}
    state["bert.pooler.dense.bias"] = ["a"] * CONFIG["hidden_size"]
    with pytest.raises(ValueError, match="bert.pooler.dense.bias: expected numbers"):
        model.load_state_dict(state)
    state["bert.pooler.dense.bias"] = [0.5] * CONFIG["hidden_size"]    # a list of numbers is fine
    model.load_state_dict(state)
    assert (model.params.params["bert.pooler.dense.bias"] == 0.5).all()


def test_a_loaded_model_predicts_without_dropout(tmp_path, rng):
    model = mb.BertForPreTraining(mb.BertConfig(**CONFIG), seed=1)
    assert model.training
    model.save_pretrained(tmp_path)
    loaded = mb.BertForPreTraining.from_pretrained(tmp_path)
    assert not loaded.training                       # as transformers' from_pretrained: eval mode
    x = _inputs(rng)
    np.testing.assert_array_equal(loaded(**x).mlm_logits, loaded(**x).mlm_logits)
    assert loaded.train().training


def test_a_failed_weights_write_is_an_oserror_and_leaves_nothing(tmp_path, monkeypatch):
    # safetensors reports a full disk as its own error type: minibert turns it into the OSError it is,
    # which the trainer reports as "could not write ...: the disk is full"
    import errno

    import safetensors.numpy

    def full_disk(tensors, path, metadata=None):
        with open(path, "wb") as f:
            f.write(b"partial")
        raise RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)")
    monkeypatch.setattr(safetensors.numpy, "save_file", full_disk)
    model = mb.BertForPreTraining(mb.BertConfig.from_preset("tiny"))
    with pytest.raises(OSError) as caught:
        model.save_pretrained(tmp_path / "m")
    assert caught.value.errno == errno.ENOSPC
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["config.json"]


def test_saved_weights_are_readable_by_the_group_as_umask_allows(tmp_path):
    import os
    old = os.umask(0o022)
    try:
        mb.BertForPreTraining(mb.BertConfig.from_preset("tiny")).save_pretrained(tmp_path / "m")
    finally:
        os.umask(old)
    assert (tmp_path / "m" / "model.safetensors").stat().st_mode & 0o777 == 0o644
