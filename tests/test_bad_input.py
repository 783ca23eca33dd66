"""Bad input fails early with a ValueError/TypeError that names the argument and the allowed range."""
import numpy as np
import pytest

import minibert as mb


@pytest.fixture(scope="module")
def model():
    return mb.BertForPreTraining(mb.BertConfig.from_preset("tiny", vocab_size=100, max_position_embeddings=16))


def test_token_id_outside_vocabulary(model):
    with pytest.raises(ValueError, match=r"input_ids must be in \[0, 100\).*100"):
        model.forward([[1, 2, 100]])
    with pytest.raises(ValueError, match=r"input_ids must be in \[0, 100\).*-1"):
        model.forward([[1, -1, 3]])


def test_sequence_longer_than_positions(model):
    with pytest.raises(ValueError, match="max_position_embeddings=16"):
        model.forward(np.ones((1, 17), dtype=int))


def test_mismatched_shapes(model):
    ids = np.ones((2, 5), dtype=int)
    with pytest.raises(ValueError, match="attention_mask has shape"):
        model.forward(ids, attention_mask=np.ones((2, 4), dtype=int))
    with pytest.raises(ValueError, match="token_type_ids has shape"):
        model.forward(ids, token_type_ids=np.zeros((1, 5), dtype=int))
    with pytest.raises(ValueError, match="mlm_labels has shape"):
        model.forward(ids, mlm_labels=np.ones((2, 6), dtype=int))
    with pytest.raises(ValueError, match=r"nsp_labels must have shape \(2,\)"):
        model.forward(ids, nsp_labels=[0, 1, 0])
    with pytest.raises(ValueError, match="rectangular"):
        model.forward([[1, 2, 3], [1, 2]])
    with pytest.raises(ValueError, match="2-D"):
        model.forward([1, 2, 3])


def test_float_ids(model):
    with pytest.raises(TypeError, match="input_ids must hold integers"):
        model.forward(np.ones((1, 4)))
    with pytest.raises(TypeError, match="attention_mask must hold integers"):
        model.forward([[1, 2]], attention_mask=[[1.0, 0.5]])


def test_other_values_out_of_range(model):
    with pytest.raises(ValueError, match=r"token_type_ids must be in \[0, 2\)"):
        model.forward([[1, 2]], token_type_ids=[[0, 2]])
    with pytest.raises(ValueError, match=r"attention_mask may only hold \[0, 1\]"):
        model.forward([[1, 2]], attention_mask=[[1, 2]])
    with pytest.raises(ValueError, match="mlm_labels must be -100"):
        model.forward([[1, 2]], mlm_labels=[[-100, 100]])
    with pytest.raises(ValueError, match="nsp_labels must be 0"):
        model.forward([[1, 2]], nsp_labels=[2])
    with pytest.raises(ValueError, match="at least one"):
        model.forward(np.zeros((1, 0), dtype=int))


def test_hidden_size_not_divisible_by_heads():
    with pytest.raises(ValueError, match=r"hidden_size \(100\) must be divisible by num_attention_heads \(3\)"):
        mb.BertConfig(hidden_size=100, num_attention_heads=3)


def test_bad_config_values():
    with pytest.raises(ValueError, match="unknown preset 'huge'.*tiny"):
        mb.BertConfig.from_preset("huge")
    with pytest.raises(ValueError, match="hidden_act"):
        mb.BertConfig(hidden_act="relu")
    with pytest.raises(ValueError, match="hidden_dropout_prob"):
        mb.BertConfig(hidden_dropout_prob=1.5)
    with pytest.raises(ValueError, match="vocab_size must be a positive integer"):
        mb.BertConfig(vocab_size=0)
    with pytest.raises(ValueError, match="pad_token_id"):
        mb.BertConfig(vocab_size=10, pad_token_id=10)
    with pytest.raises(ValueError, match="dtype must be one of"):
        mb.BertModel(mb.BertConfig.from_preset("tiny", vocab_size=10), dtype="float16")
    with pytest.raises(ValueError, match="device must be one of"):
        mb.BertModel(mb.BertConfig.from_preset("tiny", vocab_size=10), device="tpu")
    with pytest.raises(TypeError, match="BertConfig"):
        mb.BertModel({"hidden_size": 10})


def test_backward_before_forward_with_labels(model):
    fresh = mb.BertForPreTraining(model.config)
    with pytest.raises(RuntimeError, match="forward.*labels"):
        fresh.backward()
    fresh.forward([[1, 2, 3]])  # no labels: nothing to differentiate
    with pytest.raises(RuntimeError, match="forward.*labels"):
        fresh.backward()
    fresh.forward([[1, 2, 3]], nsp_labels=[0])
    fresh.backward()
    with pytest.raises(RuntimeError, match="one backward"):
        fresh.backward()  # the caches are spent


def test_bert_model_backward_checks(model):
    enc = mb.BertModel(model.config)
    with pytest.raises(RuntimeError, match="forward"):
        enc.backward(np.zeros((1, 2, 128)))
    enc.forward([[1, 2]])
    with pytest.raises(ValueError, match=r"d_last_hidden_state must have shape \(1, 2, 128\)"):
        enc.backward(np.zeros((1, 3, 128)))


def test_all_padding_row_gives_no_nan(model):
    out = model.forward([[1, 2, 3], [0, 0, 0]], attention_mask=[[1, 1, 1], [0, 0, 0]],
                        mlm_labels=[[-100, 5, -100], [7, -100, -100]], nsp_labels=[0, 1])
    assert np.isfinite(out.loss) and np.isfinite(out.mlm_logits).all()
    model.backward()
    assert np.isfinite(model.params.grad).all()


def test_nested_lists_and_bool_masks_are_accepted(model):
    a = model.forward([[1, 2, 3]], [[0, 0, 1]], [[True, True, False]], train=False)
    b = model.forward(np.array([[1, 2, 3]]), np.array([[0, 0, 1]]), np.array([[1, 1, 0]]), train=False)
    np.testing.assert_array_equal(a.mlm_logits, b.mlm_logits)


def test_cuda_without_cupy_says_how_to_install(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_cupy(name, *args, **kwargs):
        if name == "cupy" or name.startswith("cupy."):
            raise ImportError("No module named 'cupy'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_cupy)
    with pytest.raises(RuntimeError, match=r'pip install "minibert\[gpu\]"'):
        mb.BertModel(mb.BertConfig.from_preset("tiny", vocab_size=10), device="cuda")


def test_torch_tensors_are_taken_like_arrays(model):
    torch = pytest.importorskip("torch")
    ids = [[2, 5, 7, 9]]
    a = model.forward(ids, mlm_labels=[[-100, 5, -100, -100]], nsp_labels=[1], train=False)
    b = model.forward(torch.tensor(ids), attention_mask=torch.ones(1, 4, dtype=torch.long),
                      mlm_labels=torch.tensor([[-100, 5, -100, -100]]), nsp_labels=torch.tensor([1]),
                      train=False)
    assert float(a.loss) == float(b.loss)
    with pytest.raises(TypeError, match="input_ids must hold integers"):
        model.forward(torch.tensor([[2.0, 5.0]]))


def test_train_must_be_a_bool_and_the_mode_is_the_default(model):
    with pytest.raises(TypeError, match="train must be True, False or None"):
        model.forward([[2, 5]], train="no")
    with pytest.raises(TypeError, match="mode must be True or False"):
        model.train(1)
    assert model.training          # a new pre-training model trains
    ids = [[2, 5, 7, 9, 11, 13]]
    try:
        assert model.eval() is model and not model.training
        a, b = model.forward(ids).mlm_logits, model.forward(ids).mlm_logits
        np.testing.assert_array_equal(a, b)                   # no dropout in inference mode
        model.train()
        assert not np.array_equal(model.forward(ids).mlm_logits, a)
    finally:
        model.train()


def test_config_settings_minibert_does_not_implement_are_refused(tmp_path):
    base = mb.BertConfig.from_preset("tiny", vocab_size=100).to_dict()
    for key, value in [("is_decoder", True), ("add_cross_attention", True),
                       ("position_embedding_type", "relative_key")]:
        with pytest.raises(ValueError, match=f"{key}=.*not supported"):
            mb.BertConfig.from_dict({**base, key: value})
    # the encoder's own values, and keys that change nothing, are fine
    mb.BertConfig.from_dict({**base, "is_decoder": False, "position_embedding_type": "absolute",
                             "use_cache": True, "architectures": ["BertForPreTraining"]})
    with pytest.raises(ValueError, match="layer_norm_eps must be a number"):
        mb.BertConfig.from_dict({**base, "layer_norm_eps": "1e-12"})
    for text, match in [("[1, 2]", "JSON object"), ('{"a": 1', "not valid JSON")]:
        (tmp_path / "config.json").write_text(text)
        with pytest.raises(ValueError, match=match):
            mb.BertConfig.from_json_file(tmp_path / "config.json")
    (tmp_path / "config.json").write_bytes(b"\xff\xfe{}")
    with pytest.raises(ValueError, match="not valid JSON"):
        mb.BertConfig.from_json_file(tmp_path / "config.json")


def test_loss_scale_takes_numpy_numbers(model):
    model.forward([[2, 5, 7]], nsp_labels=[0], train=False)
    model.backward(loss_scale=np.float32(2.0))
    model.forward([[2, 5, 7]], nsp_labels=[0], train=False)
    with pytest.raises(ValueError, match="loss_scale"):
        model.backward(loss_scale=np.float32(np.nan))


def test_numpy_numbers_are_numbers():
    from minibert.optim import AdamW
    c = mb.BertConfig.from_preset("tiny", vocab_size=100, layer_norm_eps=np.float32(1e-12),
                                  initializer_range=np.float64(0.02))
    model = mb.BertForPreTraining(c)
    opt = AdamW(model.params, lr=np.float32(1e-3), betas=np.array([0.9, 0.999]))
    assert opt.betas == (0.9, 0.999)
