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


def test_a_misspelt_config_key_is_refused_and_transformers_keys_are_not(tmp_path):
    # a typo left the setting at its default: num_hiden_layers 1 trained BERT-base's 12 layers, unseen
    (tmp_path / "config.json").write_text('{"hidden_size": 128, "num_attention_heads": 2, "num_hiden_layers": 1}')
    with pytest.raises(ValueError, match=r"config.json: config key 'num_hiden_layers' is no setting of BERT's: did "
                                         r"you mean 'num_hidden_layers'\? \(as it is, num_hidden_layers would keep "
                                         r"its default, 12\)"):
        mb.BertConfig.from_json_file(tmp_path / "config.json")
    transformers = pytest.importorskip("transformers")
    everything = transformers.BertConfig(num_labels=3, classifier_dropout=0.1).to_dict()   # every key it writes
    assert mb.BertConfig.from_dict(everything).num_hidden_layers == everything["num_hidden_layers"]


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


# ------------------------------------------------ data, tokenizer training, optimiser, checkpoints
def test_a_corpus_of_strings_is_refused_not_cut_into_characters():
    from minibert.data.corpus import Corpus
    with pytest.raises(TypeError, match=r"documents\[0\] has type str; each document must be a list"):
        Corpus("mine", ["The quick brown fox. It jumps.", "A cat sat."])
    with pytest.raises(TypeError, match="must be a list of documents"):
        Corpus("mine", None)
    with pytest.raises(TypeError, match=r"documents\[0\]\[1\] has type int"):
        Corpus("mine", [["a", 2]])
    assert Corpus("mine", [("One.", "Two."), ["Three."]]).num_sentences == 3


def test_train_wordpiece_refuses_a_path_in_a_list_and_a_bad_num_unused(tmp_path, monkeypatch):
    from minibert.data.tokenizer import train_wordpiece
    f = tmp_path / "corpus.txt"
    f.write_text("hello world")
    with pytest.raises(ValueError, match="the path of a file.*pathlib.Path"):
        train_wordpiece([str(f)], 200)
    (tmp_path / "Makefile").write_text("all:\n")
    monkeypatch.chdir(tmp_path)             # a lone word that happens to name a file here is still text
    assert "m" in train_wordpiece(["Makefile"], 200, num_unused=0).vocab
    for n in (-5, 10 ** 9):
        with pytest.raises(ValueError, match=r"num_unused=.* must be in \[0, vocab_size - 5\)"):
            train_wordpiece(["hello"], 200, num_unused=n)


def test_train_wordpiece_warns_when_the_vocabulary_cannot_hold_the_characters():
    from minibert.data.tokenizer import train_wordpiece
    with pytest.warns(UserWarning, match="holds only 6 of the 28 character pieces"):
        tok = train_wordpiece(["abcdefghijklmnopqrstuvwxyz hello world"], 110)
    assert tok.tokenize("hello world") == ["[UNK]", "[UNK]"]           # what the warning is about
    with pytest.warns(UserWarning, match="no word is spelled with the 1 most frequent"):
        train_wordpiece(["hello hello abc"], 200, limit_alphabet=1, num_unused=0)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train_wordpiece(["hello hello abc"], 200)                        # room for everything: silent


def test_adamw_refuses_a_poisoned_or_malformed_state_and_keeps_its_own():
    from minibert.optim import AdamW
    m = mb.BertForPreTraining(mb.BertConfig.from_preset("tiny", vocab_size=50, max_position_embeddings=8))
    opt = AdamW(m.params, lr=1e-3)
    m.params.grad[...] = 0.1
    opt.step()
    before = {k: np.copy(v) for k, v in opt.state_dict().items()}
    n = opt.m.size
    bad = [({"m": np.full(n, np.nan), "v": np.ones(n), "t": 1}, "inf or NaN"),
           ({"m": np.ones(n), "v": -np.ones(n), "t": 1}, "negative"),
           ({"m": np.ones(n), "v": np.full(n, "x"), "t": 3}, "real numbers"),
           ({"m": np.ones(n), "v": np.ones(n), "t": "5"}, "step count"),
           ({"m": np.ones(n), "v": np.ones(n), "t": None}, "step count"),
           ({"m": np.ones(n), "v": np.ones(n), "t": float("inf")}, "step count")]
    for state, match in bad:
        with pytest.raises(ValueError, match=match):
            opt.load_state_dict(state)
    with pytest.raises(TypeError, match="must be a dict"):
        opt.load_state_dict(None)
    after = opt.state_dict()
    assert after["t"] == before["t"] == 1
    np.testing.assert_array_equal(after["m"], before["m"])                 # nothing half-loaded
    np.testing.assert_array_equal(after["v"], before["v"])


def test_loss_scaler_settings_and_state_are_checked():
    from minibert.optim import LossScaler
    for kw, match in (({"growth_factor": float("inf")}, "growth_factor"), ({"growth_factor": "2"}, "growth_factor"),
                      ({"backoff_factor": None}, "backoff_factor"), ({"init_scale": "a"}, "init_scale"),
                      ({"init_scale": True}, "init_scale"), ({"growth_interval": 2.0}, "growth_interval")):
        with pytest.raises(ValueError, match=match):
            LossScaler(**kw)
    assert LossScaler(growth_interval=np.int64(3)).growth_interval == 3
    s = LossScaler(growth_interval=2)
    for state, match in (({"scale": 2.0, "good_steps": 5}, r"good_steps.*\[0, 2\)"), ({}, "'scale' and 'good_steps'"),
                         ({"scale": -1, "good_steps": 0}, "positive finite"),
                         ({"scale": float("nan"), "good_steps": 0}, "positive finite"),
                         ({"scale": 4.0, "good_steps": 1.5}, "good_steps")):
        with pytest.raises(ValueError, match=match):
            s.load_state_dict(state)
    s.load_state_dict({"scale": 4.0, "good_steps": 1})
    assert s.update(True) and s.scale == 8.0 and s.good_steps == 0       # grows on the next good step


def test_the_schedule_refuses_what_it_cannot_mean():
    from minibert.optim import linear_warmup_decay
    for args, match in (((-5, 100, 10), "step must be a finite number >= 0"),
                        ((float("nan"), 100, 10), "step must be"), (("5", 100, 10), "step must be"),
                        ((5, 10, 100), "warmup_steps=100 is more than total_steps=10"),
                        ((5, 100, -10), "warmup_steps must be an integer >= 0"),
                        ((5, 10.5, 1), "total_steps must be an integer")):
        with pytest.raises(ValueError, match=match):
            linear_warmup_decay(*args)
    assert linear_warmup_decay(np.int64(5), 100, 10) == 0.5


def test_foreign_files_are_not_checkpoints(tmp_path):
    import json
    import zipfile
    from minibert.train.checkpoint_files import CheckpointError, load_checkpoint, save_checkpoint
    np.save(tmp_path / "a.npy", np.zeros(3))
    np.savez(tmp_path / "b.npz", __meta__=np.frombuffer(json.dumps("hello").encode(), dtype=np.uint8))
    with zipfile.ZipFile(tmp_path / "c.npz", "w") as f:
        f.writestr("__meta__.npy", b"not an array")
    for name in ("a.npy", "b.npz", "c.npz"):
        with pytest.raises(CheckpointError, match="not a minibert checkpoint"):
            load_checkpoint(tmp_path / name)
    for step in (-1, "5", True, 2.0):
        with pytest.raises(ValueError, match="step must be an integer >= 0"):
            save_checkpoint(tmp_path / "run", step, {}, {})


def test_old_mac_line_ends_separate_lines(tmp_path):
    from minibert.data.corpus import read_bert_format
    f = tmp_path / "cr.txt"
    f.write_bytes(b"a b.\rc d.\r\re f.\r")
    assert read_bert_format(f).documents == [["a b.", "c d."], ["e f."]]


def test_a_builtin_corpus_cache_that_is_not_documents_is_rebuilt(tmp_path):
    import json
    from minibert.data import builtin as bc
    key = bc._cache_key()
    good = None
    for bad in ([1, 2, 3], "text", [[1, 2], [3]], [["one sentence"]], {"a": 1}):
        bc._memory.clear()
        (tmp_path / f"builtin-corpus-{key}.json").write_text(json.dumps(bad))
        corpus = bc.builtin_corpus(cache_dir=tmp_path)
        good = good or corpus.num_documents
        assert corpus.num_documents == good > 100
    bc._memory.clear()


def test_batching_and_masking_arguments_are_checked():
    from minibert.data.instances import TrainingInstance
    from minibert.data.masking import mask_tokens
    from minibert.data.pretraining_data import PretrainingDataset
    from minibert.data.tokenizer import WordPieceTokenizer
    tok = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"])
    inst = TrainingInstance(["a", "b"], ["c"], False)
    data = PretrainingDataset([inst, inst], tok, max_seq_length=8)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="non-empty list"):
        data.collate([], rng)
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        data.collate([inst], None)
    with pytest.raises(ValueError, match="longer than max_seq_length=8"):
        data.collate([inst], rng, pad_to=10 ** 9)
    assert data.collate([inst], rng, pad_to=8)["input_ids"].shape == (1, 8)
    with pytest.raises(TypeError, match="not a string"):
        mask_tokens("[CLS] a b [SEP]", ["a"], rng)
    with pytest.raises(ValueError, match=r"masked_lm_prob=nan must be a probability in \[0, 1\]"):
        mask_tokens(inst.tokens, ["a"], rng, masked_lm_prob=float("nan"))
    with pytest.raises(ValueError, match="vocab_words"):
        mask_tokens(inst.tokens, [], rng)


def test_hub_folders_index_and_config_oddities(tmp_path):
    import json
    m = mb.BertForPreTraining(mb.BertConfig.from_preset("tiny", vocab_size=50, max_position_embeddings=8))
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(NotADirectoryError, match="is a file"):
        m.save_pretrained(tmp_path / "config.json")
    m.save_pretrained(tmp_path / "run")
    (tmp_path / "run" / "model.safetensors").rename(tmp_path / "run" / "shard-1.safetensors")
    for weight_map in ({"bert.pooler.dense.bias": 5}, {"bert.pooler.dense.bias": None}, {"x": ""}):
        (tmp_path / "run" / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
        with pytest.raises(ValueError, match="not a safetensors index"):
            mb.BertForPreTraining.from_pretrained(tmp_path / "run")
    with pytest.raises(ValueError, match="pad_token_id"):
        mb.BertConfig.from_preset("tiny", vocab_size=50, pad_token_id=True)


def test_clip_norm_and_dupe_factor_types():
    from minibert.optim import clip_grad_norm
    from minibert.data.instances import create_training_instances
    m = mb.BertForPreTraining(mb.BertConfig.from_preset("tiny", vocab_size=50, max_position_embeddings=8))
    with pytest.raises(ValueError, match="max_norm must be a positive finite number"):
        clip_grad_norm(m.params, "1")
    with pytest.raises(ValueError, match="dupe_factor=True must be an integer >= 1"):
        create_training_instances([[["a", "b"]], [["c"]]], 16, dupe_factor=True)
