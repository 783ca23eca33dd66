"""The model, its config and its Hugging Face I/O refuse nonsense with one error that names the culprit."""
import json

import numpy as np
import pytest

import minibert as mb

SMALL = dict(vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
             intermediate_size=32, max_position_embeddings=8)


def _model(cls=mb.BertForPreTraining, **kw):
    return cls(mb.BertConfig(**SMALL), **kw)


def _state(model):
    return {k: np.array(v) for k, v in model.state_dict().items()}


def _save_tensors(directory, tensors, config=None):
    """A Hugging Face folder holding exactly ``tensors`` (written with safetensors' NumPy API)."""
    from safetensors.numpy import save_file
    directory.mkdir(parents=True, exist_ok=True)
    (config or mb.BertConfig(**SMALL)).to_json_file(directory / "config.json")
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, directory / "model.safetensors")
    return directory


# ------------------------------------------------------------------ load_state_dict / from_pretrained
def test_a_wrong_shape_is_a_shape_mismatch_not_a_missing_key(tmp_path):
    model = _model()
    state = _state(model)
    state["bert.pooler.dense.weight"] = np.zeros((2, 2), dtype=np.float32)
    del state["cls.predictions.decoder.weight"]
    with pytest.raises(ValueError) as err:
        model.load_state_dict(state)
    msg = str(err.value)
    assert "missing" not in msg
    assert "bert.pooler.dense.weight: expected shape (16, 16), got (2, 2)" in msg
    # the same from a folder on disk
    _save_tensors(tmp_path / "m", state)
    with pytest.raises(ValueError) as err:
        mb.BertForPreTraining.from_pretrained(tmp_path / "m")
    msg = str(err.value)
    assert "missing" not in msg and "expected shape (16, 16), got (2, 2)" in msg and str(tmp_path / "m") in msg
    # a tied alias of the wrong shape standing in for its weight: a mismatch, not a missing word embedding
    state = _state(model)
    del state["bert.embeddings.word_embeddings.weight"]
    state["cls.predictions.decoder.weight"] = np.zeros((3, 16), dtype=np.float32)
    with pytest.raises(ValueError) as err:
        model.load_state_dict(state)
    assert "missing" not in str(err.value) and "cls.predictions.decoder.weight: expected shape" in str(err.value)
    # a weight that is really absent is still reported as missing
    state = _state(model)
    del state["cls.seq_relationship.bias"]
    with pytest.raises(ValueError, match=r"missing keys: \['cls.seq_relationship.bias'\]"):
        model.load_state_dict(state)


def test_a_checkpoint_of_other_sizes_is_one_short_line(tmp_path):
    # a config.json edited to another hidden size listed every weight of the checkpoint, some 4 KB
    model, wider = _model(), _state(_model())
    wider = {k: np.zeros(tuple(2 * n for n in v.shape), np.float32) for k, v in wider.items()}
    with pytest.raises(ValueError) as err:
        model.load_state_dict(wider)
    msg = str(err.value)
    assert msg.count("expected shape") == 4 and msg.endswith(f"; and {len(wider) - 4} more") and len(msg) < 500, msg
    few = {k: v for k, v in _state(model).items() if "pooler" not in k}
    with pytest.raises(ValueError, match=r"missing keys: \['bert.pooler.dense.weight', 'bert.pooler.dense.bias'\]$"):
        model.load_state_dict(few)
    more = {**_state(model), **{f"extra.{i}": np.zeros(1, np.float32) for i in range(9)}}
    with pytest.raises(ValueError, match=r"unknown keys: \['extra.0', 'extra.1', 'extra.2', 'extra.3'\] and 5 more$"):
        model.load_state_dict(more)


def test_non_finite_weights_are_refused_by_name_and_count(tmp_path):
    model = _model(seed=1)
    state = _state(model)
    state["bert.pooler.dense.bias"][[0, 3, 5]] = np.nan
    state["cls.seq_relationship.weight"][0, 0] = np.inf
    _save_tensors(tmp_path / "m", state)
    with pytest.raises(ValueError) as err:
        mb.BertForPreTraining.from_pretrained(tmp_path / "m")
    msg = str(err.value)
    assert "bert.pooler.dense.bias: 3 of 16 values are NaN or infinite" in msg
    assert "cls.seq_relationship.weight: 1 of 32 values are NaN or infinite" in msg
    before = model.params.data.copy()
    with pytest.raises(ValueError, match="bert.pooler.dense.bias: 3 of 16 values are NaN or infinite"):
        model.load_state_dict(state)
    np.testing.assert_array_equal(model.params.data, before)        # nothing half-loaded
    # finite in float64, infinite once rounded to the model's float32
    state = _state(model)
    state["cls.seq_relationship.bias"] = np.array([1e300, 0.0])
    with pytest.raises(ValueError, match=r"cls.seq_relationship.bias: 1 of 2 values .*float32"):
        model.load_state_dict(state)
    np.testing.assert_array_equal(model.params.data, before)


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool", "uint8"])
def test_non_floating_weights_are_refused(tmp_path, dtype):
    model = _model()
    state = _state(model)
    state["cls.seq_relationship.bias"] = np.ones(2, dtype=dtype)
    _save_tensors(tmp_path / "m", state)
    with pytest.raises(ValueError, match=f"cls.seq_relationship.bias: .*floating point.*{dtype}"):
        mb.BertForPreTraining.from_pretrained(tmp_path / "m")
    with pytest.raises(ValueError, match=f"cls.seq_relationship.bias: .*floating point.*{dtype}"):
        model.load_state_dict(state)
    # float16 and float64 tensors are floating point: they load (converted to the model's dtype)
    state["cls.seq_relationship.bias"] = np.array([0.5, -2.0], dtype=np.float16)
    model.load_state_dict(state)
    assert model.params.params["cls.seq_relationship.bias"].tolist() == [0.5, -2.0]


def test_strict_must_be_a_bool():
    model = _model()
    with pytest.raises(TypeError, match="strict must be True or False"):
        model.load_state_dict({}, strict="no")
    model.load_state_dict(_state(model), strict=np.True_)


def test_save_then_load_in_the_other_dtype(tmp_path):
    model = _model(seed=3, dtype="float64")
    model.save_pretrained(tmp_path / "m")
    again = mb.BertForPreTraining.from_pretrained(tmp_path / "m", dtype="float32")
    assert again.params.data.dtype == np.float32
    np.testing.assert_array_equal(again.params.data, model.params.data.astype(np.float32))


# ------------------------------------------------------------------ constructor arguments
@pytest.mark.parametrize("seed", [-1, 1.5, True, "a", None, (1, 2), np.float64(2.0)])
def test_seed_must_be_a_non_negative_int(seed):
    with pytest.raises((ValueError, TypeError), match=r"seed must be an int >= 0"):
        _model(seed=seed)


def test_numpy_int_seeds_are_ints(tmp_path):
    a, b = _model(seed=np.int64(7)), _model(seed=7)
    np.testing.assert_array_equal(a.params.data, b.params.data)
    a.save_pretrained(tmp_path / "m")
    with pytest.raises(ValueError, match="seed must be an int >= 0"):
        mb.BertForPreTraining.from_pretrained(tmp_path / "m", seed=-3)


def test_seed_dropout_takes_an_int_or_a_tuple_of_ints():
    model = _model()
    model.seed_dropout((np.int64(4), 2))
    model.seed_dropout(0)
    for bad in (-1, "a", (1, 2.5), (1, -2), (), None, True, (1, True)):
        with pytest.raises((ValueError, TypeError), match=r"seed_dropout\(\): seed must be an int >= 0 "
                                                          r"or a tuple of them"):
            model.seed_dropout(bad)


@pytest.mark.parametrize("dtype", [None, [1], "float16", np.int32, "f4x"])
def test_dtype_choices_are_named(dtype):
    with pytest.raises(ValueError, match=r"dtype must be one of \['float32', 'float64'\]"):
        _model(dtype=dtype)


def test_other_constructor_choices():
    assert _model(dtype=np.float64).dtype == np.float64
    assert _model(mixed_precision=np.True_).mixed_precision is True
    for device in (None, ["cpu"], "CPU", 0):
        with pytest.raises(ValueError, match="device must be one of"):
            _model(device=device)
    with pytest.raises(TypeError, match="mixed_precision must be True or False"):
        _model(mixed_precision="yes")


# ------------------------------------------------------------------ backward arguments
def test_accumulate_must_be_a_bool_and_a_refused_call_keeps_the_forward():
    model = _model()
    ids = [[2, 5, 7]]
    model.forward(ids, nsp_labels=[1], train=False)
    for bad in ("yes", 1, None, 0.0):
        with pytest.raises(TypeError, match="accumulate must be True or False"):
            model.backward(accumulate=bad)
    model.backward(accumulate=np.False_)                  # the forward's caches survived the refusals
    once = model.params.grad.copy()
    model.forward(ids, nsp_labels=[1], train=False)
    model.backward(accumulate=np.True_)
    np.testing.assert_allclose(model.params.grad, 2 * once, rtol=1e-6)

    enc = _model(mb.BertModel)
    enc.forward(ids)
    g = np.ones((1, 3, 16))
    with pytest.raises(TypeError, match="accumulate must be True or False"):
        enc.backward(g, accumulate="yes")
    with pytest.raises(ValueError, match=r"d_last_hidden_state must have shape \(1, 3, 16\)"):
        enc.backward(np.ones((1, 2, 16)))
    with pytest.raises(TypeError, match="d_last_hidden_state must be an array of numbers"):
        enc.backward("abc")
    with pytest.raises(TypeError, match="d_pooler_output must be an array of numbers"):
        enc.backward(g, [["x"] * 16])
    enc.backward(g)                                        # still possible after the refusals


# ------------------------------------------------------------------ forward inputs
def test_empty_nested_lists_are_empty_not_float():
    model = _model()
    with pytest.raises(ValueError, match="input_ids must be 2-D"):
        model.forward([])
    with pytest.raises(ValueError, match="input_ids must have at least one sequence and one token"):
        model.forward([[]])
    with pytest.raises(ValueError, match="input_ids must have at least one sequence and one token"):
        model.forward(np.zeros((0, 3), dtype=int))


# ------------------------------------------------------------------ BertConfig
@pytest.mark.parametrize("name", ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                  "intermediate_size", "max_position_embeddings", "type_vocab_size"])
def test_size_fields_given_as_floats_must_be_ints(name):
    with pytest.raises(ValueError, match=f"BertConfig.{name} must be an int, got float 5.0"):
        mb.BertConfig(**{**SMALL, name: 5.0})
    with pytest.raises(ValueError, match=f"BertConfig.{name} must be an int, got str '8'"):
        mb.BertConfig(**{**SMALL, name: "8"})
    with pytest.raises(ValueError, match=f"BertConfig.{name} must be a positive integer, got 0"):
        mb.BertConfig(**{**SMALL, name: 0})


def test_numpy_numbers_in_a_config_are_stored_as_python_numbers(tmp_path):
    c = mb.BertConfig(**{**SMALL, "vocab_size": np.int64(30), "max_position_embeddings": np.int32(8)},
                      hidden_dropout_prob=np.float32(0.25), layer_norm_eps=np.float32(1e-6),
                      pad_token_id=np.int64(0))
    assert type(c.vocab_size) is int and type(c.hidden_dropout_prob) is float
    assert c.hidden_dropout_prob == 0.25
    model = mb.BertForPreTraining(c)
    model.save_pretrained(tmp_path / "m")            # the config writes to JSON
    assert mb.BertForPreTraining.from_pretrained(tmp_path / "m").config == c


def test_other_config_fields():
    with pytest.raises(ValueError, match="hidden_dropout_prob must be a number in"):
        mb.BertConfig(**SMALL, hidden_dropout_prob=False)
    with pytest.raises(ValueError, match="hidden_act must be one of"):
        mb.BertConfig(**SMALL, hidden_act=np.array(["gelu", "relu"]))
    with pytest.raises(ValueError, match="hidden_act must be one of"):
        mb.BertConfig(**SMALL, hidden_act=["gelu"])
    with pytest.raises(ValueError, match="pad_token_id"):
        mb.BertConfig(**SMALL, pad_token_id=1.0)
    for name in (["tiny"], None, 3):
        with pytest.raises(ValueError, match="unknown preset .*choose one of"):
            mb.BertConfig.from_preset(name)


def test_config_json_problems_name_the_file(tmp_path):
    model = _model()
    model.save_pretrained(tmp_path / "m")
    path = tmp_path / "m" / "config.json"
    good = json.loads(path.read_text())
    for change, match in (({"vocab_size": 0}, "vocab_size must be a positive integer"),
                          ({"num_attention_heads": 3}, "divisible by num_attention_heads"),
                          ({"max_position_embeddings": 8.0}, "max_position_embeddings must be an int"),
                          ({"is_decoder": True}, "is_decoder")):
        path.write_text(json.dumps({**good, **change}))
        with pytest.raises(ValueError, match=match) as err:
            mb.BertForPreTraining.from_pretrained(tmp_path / "m")
        assert str(path) in str(err.value)
    for text in ("not json", "[1, 2]", "null"):
        path.write_text(text)
        with pytest.raises(ValueError, match="config.json"):
            mb.BertForPreTraining.from_pretrained(tmp_path / "m")


def test_paths_must_be_paths(tmp_path):
    model = _model()
    for bad in (None, 5, ["dir"]):
        with pytest.raises(TypeError, match="directory must be a path"):
            model.save_pretrained(bad)
        with pytest.raises(TypeError, match="directory must be a path"):
            mb.BertForPreTraining.from_pretrained(bad)
        with pytest.raises(TypeError, match="path must be a path"):
            mb.BertConfig.from_json_file(bad)


def test_a_tensor_in_two_shards_is_refused_not_overwritten(tmp_path):
    from safetensors.numpy import save_file
    state = {k: v for k, v in _state(_model(seed=1)).items() if not k.startswith("cls.predictions.decoder.")}
    names = sorted(state)
    first, second = names[:len(names) // 2], names[len(names) // 2:]
    tmp_path.mkdir(exist_ok=True)
    mb.BertConfig(**SMALL).to_json_file(tmp_path / "config.json")
    save_file({k: state[k] for k in first}, tmp_path / "part-1.safetensors")
    save_file({**{k: state[k] for k in second}, names[0]: np.zeros_like(state[names[0]])},
              tmp_path / "part-2.safetensors")
    weight_map = {**{k: "part-1.safetensors" for k in first}, **{k: "part-2.safetensors" for k in second}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(ValueError, match=f"{names[0]} is in both part-1.safetensors and part-2.safetensors"):
        mb.BertForPreTraining.from_pretrained(tmp_path)


def test_an_initializer_range_that_overflows_the_dtype_is_refused():
    config = mb.BertConfig(**SMALL, initializer_range=1e300)
    with pytest.raises(ValueError, match=r"initializer_range=1e\+300 .*float32"):
        mb.BertForPreTraining(config)
    assert np.isfinite(mb.BertForPreTraining(config, dtype="float64").params.data).all()


def test_fill_mask_refuses_a_config_with_fewer_layers_than_its_weights(tmp_path):
    # config.json edited to fewer layers: fill-mask ran the first ones alone, after a note
    import json
    from minibert.model.inference import load_for_fill_mask
    folder = tmp_path / "m"
    mb.BertForPreTraining(mb.BertConfig(**{**SMALL, "num_hidden_layers": 3})).save_pretrained(folder)
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                                                + [f"w{i}" for i in range(25)]) + "\n")
    load_for_fill_mask(folder)                               # as saved: loads
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 1}))
    with pytest.raises(ValueError, match=r"config.json says num_hidden_layers=1, but the weights hold layers 1, 2 "
                                         r"too: .* set num_hidden_layers to 3"):
        load_for_fill_mask(folder)
