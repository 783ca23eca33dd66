"""The ablation flags of notebook 12: --no-nsp, --mlm-probability, --whole-word-masking, --pre-ln, --dropout.

Each flag is followed from the command line to what it changes (the data, the loss, the
layers), with its bad values, its place in a run's identity and run.json, and the export
(or its refusal).
"""
import json
from pathlib import Path

import numpy as np
import pytest

import minibert as mb
from minibert.cli import main
from minibert.constants import IGNORE_INDEX
from minibert.data.packing import PackedInstance, create_packed_instances
from minibert.data.pretraining_data import PretrainingDataset
from minibert.gradcheck import max_rel_error, numerical_gradient
from minibert.model import encoder
from minibert.model.hf_io import PRE_LN_EXPORT
from minibert.train import TrainArgs, check_args, pretrain
from minibert.train.checkpoint_files import list_checkpoints
from minibert.train.data import prepare_data
from minibert.train.doctor import diagnose
from test_train import small_args, train_losses

FLAGS = ["--no-nsp", "--mlm-probability", "--whole-word-masking", "--pre-ln", "--dropout"]


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIBERT_CACHE", str(tmp_path / "cache"))


def quiet(*args):
    pass


# ------------------------------------------------------------------ the command line
def test_help_names_the_five_flags(capsys):
    with pytest.raises(SystemExit):
        main(["pretrain", "--help"])
    text = capsys.readouterr().out
    for flag in FLAGS:
        assert flag in text, flag
    assert "ablations:" in text


@pytest.mark.parametrize("extra,expected", [
    (["--mlm-probability", "0"], "--mlm-probability must be a share of the tokens strictly between 0 and 1"),
    (["--mlm-probability", "1.5"], "strictly between 0 and 1 (BERT: 0.15), got 1.5"),
    (["--mlm-probability", "1"], "strictly between 0 and 1 (BERT: 0.15), got 1.0"),
    (["--mlm-probability", "nan"], "strictly between 0 and 1 (BERT: 0.15), got nan"),
    (["--dropout", "1"], "--dropout must be in [0, 1), got 1.0"),
    (["--dropout", "-0.1"], "--dropout must be in [0, 1), got -0.1"),
])
def test_bad_ablation_values_fail_in_one_line(corpus_file, tmp_path, capsys, extra, expected):
    code = main(["pretrain", "--corpus", str(corpus_file), "--out", str(tmp_path / "o"), "--no-progress"] + extra)
    err = capsys.readouterr().err.strip()
    assert code == 2 and expected in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "o" / "vocab.txt").exists()      # refused before any work


@pytest.mark.parametrize("name", ["no_nsp", "whole_word_masking", "pre_ln"])
def test_a_switch_is_a_bool(tmp_path, name):
    flag = f"--{name.replace('_', '-')}"
    with pytest.raises(ValueError, match=f"{flag} \\({name}\\) is a switch: True or False, got str"):
        check_args(TrainArgs(out=str(tmp_path), **{name: "yes"}), probe_out=False)


def test_the_flags_reach_train_args_and_run_json(corpus_file, tmp_path, capsys):
    out = tmp_path / "r"
    code = main(["pretrain", "--corpus", str(corpus_file), "--out", str(out), "--vocab-size", "400", "--steps", "2",
                 "--batch-size", "4", "--seq-len", "32", "--warmup", "0", "--eval-instances", "8", "--no-progress",
                 "--no-plot", "--no-nsp", "--mlm-probability", "0.3", "--whole-word-masking", "--pre-ln",
                 "--dropout", "0"])
    assert code == 0, capsys.readouterr().err
    args = json.loads((out / "run.json").read_text())["args"]
    assert (args["no_nsp"], args["mlm_probability"], args["whole_word_masking"], args["pre_ln"],
            args["dropout"]) == (True, 0.3, True, True, 0.0)


@pytest.mark.parametrize("flag,value", [("no_nsp", True), ("mlm_probability", 0.3), ("whole_word_masking", True),
                                        ("pre_ln", True), ("dropout", 0.0)])
def test_a_resume_with_another_ablation_flag_is_refused(corpus_file, tmp_path, flag, value):
    pretrain(small_args(corpus_file, tmp_path, steps=4, stop_at=2, save_every=2), log=quiet)
    with pytest.raises(Exception, match=f"different run.*{flag if flag != 'dropout' else 'config differs'}"):
        pretrain(small_args(corpus_file, tmp_path, steps=4, save_every=2, resume=True, **{flag: value}), log=quiet)
    # the checkpoint of an ablation is resumed by the same flag
    out = tmp_path / "ablation"
    pretrain(small_args(corpus_file, out, steps=4, stop_at=2, save_every=2, **{flag: value}), log=quiet)
    result = pretrain(small_args(corpus_file, out, steps=4, save_every=2, resume=True, **{flag: value}), log=quiet)
    assert result.step == 4


# ------------------------------------------------------------------ --no-nsp
def _documents():
    """Three documents whose sentences are told apart by their tokens: sentence k is k0, k1, ..."""
    lengths = [[3, 5, 2, 7], [4, 4], [9, 1, 2, 2, 6]]
    docs, k = [], 0
    for doc in lengths:
        docs.append([[f"s{k + i}t{j}" for j in range(n)] for i, n in enumerate(doc)])
        k += len(doc)
    return docs


def test_packed_instances_hold_whole_sentences_in_one_segment():
    docs = _documents()
    instances = create_packed_instances(docs, max_seq_length=12, dupe_factor=1, seed=0)
    sentences = {tuple(s) for d in docs for s in d}
    seen = []
    for inst in instances:
        assert len(inst) <= 12 and inst.tokens[0] == "[CLS]" and inst.tokens[-1] == "[SEP]"
        assert inst.segment_ids == [0] * len(inst)
        # the body is whole sentences, with a [SEP] where one document gives way to the next
        for part in " ".join(inst.body).split(" [SEP] "):
            words = part.split()
            starts = [i for i, w in enumerate(words) if w.endswith("t0")] + [len(words)]
            assert starts[0] == 0, inst
            seen += [tuple(words[a:b]) for a, b in zip(starts, starts[1:])]
    assert sorted(seen) == sorted(sentences)        # every sentence once, never cut
    # greedy: no sequence could have taken the first sentence of the one after it in its document order
    assert max(len(inst) for inst in instances) >= 11
    # a sentence longer than a sequence is cut to it
    long = create_packed_instances([[["w"] * 30], [["v"] * 3]], max_seq_length=8, seed=0)
    assert sorted(len(i) for i in long) == [5, 8]


def test_no_nsp_batches_have_one_segment_and_no_nsp_labels(corpus_file, tmp_path):
    _, _, stream, eval_batches = prepare_data(small_args(corpus_file, tmp_path, no_nsp=True), tmp_path, log=quiet)
    assert all(isinstance(i, PackedInstance) for i in stream.dataset.instances)
    assert stream.dataset.not_next_share() is None
    for batch in [stream.next_batch(), *eval_batches]:
        assert "nsp_labels" not in batch
        assert not batch["token_type_ids"].any()
        assert ((batch["mlm_labels"] != IGNORE_INDEX).sum(axis=1) >= 1).all()
    mixed = [stream.dataset.instances[0], *prepare_data(small_args(corpus_file, tmp_path / "nsp"), tmp_path / "nsp",
                                                        log=quiet)[2].dataset.instances[:2]]
    with pytest.raises(ValueError, match="mix NSP pairs and MLM-only sequences"):
        PretrainingDataset(mixed, stream.dataset.tokenizer, max_seq_length=32)


def test_no_nsp_run_trains_mlm_alone_and_exports_a_model_transformers_loads(corpus_file, tmp_path):
    result = pretrain(small_args(corpus_file, tmp_path, no_nsp=True, plot=True), log=quiet)
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    for r in records:                         # no NSP numbers at all, not a fake 50%
        assert not {"nsp_loss", "nsp_acc", "nsp_majority", "n_pairs"} & set(r), r
        assert r["loss"] == r["mlm_loss"]
    # the NSP head took no gradient in the last step: its loss is not in the total
    grads = result.model.params.grads
    assert not grads["cls.seq_relationship.weight"].any() and not grads["bert.pooler.dense.weight"].any()
    assert grads["cls.predictions.transform.dense.weight"].any()
    checks = {c.name: c for c in diagnose(tmp_path, measure=False).checks}
    nsp = checks["NSP: beyond the class prior"]
    assert (nsp.verdict, nsp.evidence) == ("not checked", "not trained: --no-nsp")
    # packed sentences are sequences, not pairs
    assert "training sequences" in checks["repeated sequences: --dupe-factor against the steps"].evidence
    assert "pairs" not in checks["memorising: training against held-out"].evidence
    assert json.loads((tmp_path / "run.json").read_text())["data"]["not_next_share"] is None
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf = transformers.BertForPreTraining.from_pretrained(tmp_path / "model").eval()
    ids = np.array([[2, 10, 11, 12, 3]])
    ours = result.model.forward(ids, train=False).mlm_logits
    with torch.no_grad():
        theirs = hf(input_ids=torch.tensor(ids)).prediction_logits.numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)


def test_no_nsp_messages_never_speak_of_nsp_pairs(corpus_file, tmp_path, capsys):
    # --eval-instances 1 was refused for want of "one IsNext and one NotNext pair", and the doctor
    # advised a --dupe-factor by how often "each pair" came back
    short = [d for d in corpus_file.read_text().split("\n\n") if d.count("\n") < 10][:6]
    (tmp_path / "six.txt").write_text("\n\n".join(short) + "\n")
    out = tmp_path / "r"
    # 50 steps of 16 sequences go over the 34 training sequences about 24 times: the doctor advises
    code = main(["pretrain", "--corpus", str(tmp_path / "six.txt"), "--out", str(out), "--vocab-size", "150",
                 "--steps", "50", "--batch-size", "16", "--seq-len", "32", "--warmup", "0", "--eval-every", "50",
                 "--save-every", "50", "--eval-instances", "1", "--no-progress", "--no-plot", "--no-nsp"])
    said = capsys.readouterr()
    assert code == 0, said.err
    assert "IsNext" not in said.out + said.err and "NotNext" not in said.out + said.err, said
    assert json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])["n_masked"] > 0
    pairs = {c.name: c for c in diagnose(out, plot=False, measure=False).checks}[
        "repeated sequences: --dupe-factor against the steps"]
    assert pairs.verdict == "warning" and "each sequence then comes back" in pairs.advice, pairs
    assert "pair" not in pairs.evidence + pairs.advice, pairs


# ------------------------------------------------------------------ the masking flags
def _predicted(batch):
    return batch["mlm_labels"] != IGNORE_INDEX


def test_mlm_probability_sets_how_many_tokens_are_predicted(corpus_file, tmp_path):
    for p in (0.15, 0.3):
        _, _, stream, _ = prepare_data(small_args(corpus_file, tmp_path / str(p), mlm_probability=p,
                                                  batch_size=64), tmp_path / str(p), log=quiet)
        batch, counts = stream.next_batch(), []
        lengths = batch["attention_mask"].sum(axis=1)
        # BERT's count: round(p * length), at least 1, at most ceil(p * --seq-len)
        want = np.minimum(np.ceil(32 * p), np.maximum(1, np.round(lengths * p)))
        np.testing.assert_array_equal(_predicted(batch).sum(axis=1), want)
        masks = []
        for _ in range(20):
            b = stream.next_batch()
            masks.append((b["input_ids"][_predicted(b)] == stream.dataset.tokenizer.mask_id).mean())
        assert 0.75 < np.mean(masks) < 0.85          # 80% of the predicted tokens are [MASK], at any P


def _whole_words_cut(batch, tokenizer):
    """How many predicted tokens have a piece of their word that is not predicted; and how many predicted words
    have several pieces."""
    cut = several = 0
    for ids, chosen, labels in zip(batch["input_ids"], _predicted(batch), batch["mlm_labels"]):
        tokens = [tokenizer.vocab[int(label if c else i)] for i, c, label in zip(ids, chosen, labels)]
        for t in np.flatnonzero(chosen):
            after = t + 1 < len(tokens) and tokens[t + 1].startswith("##")
            # a piece right after [CLS] or [SEP] lost the start of its word when the segment was cut
            before = tokens[t].startswith("##") and tokens[t - 1] not in ("[CLS]", "[SEP]")
            several += after or before
            cut += (after and not chosen[t + 1]) or (before and not chosen[t - 1])
    return cut, several


def test_whole_word_masking_predicts_every_piece_of_a_chosen_word(corpus_file, tmp_path):
    found = {}
    for whole in (False, True):
        folder = tmp_path / str(whole)
        _, tok, stream, _ = prepare_data(small_args(corpus_file, folder, whole_word_masking=whole, batch_size=64),
                                         folder, log=quiet)
        assert stream.dataset.whole_word_mask is whole
        found[whole] = [sum(x) for x in zip(*(_whole_words_cut(stream.next_batch(), tok) for _ in range(5)))]
    assert found[True][0] == 0 and found[True][1] > 20      # words of several pieces, all predicted whole
    assert found[False][0] > 0                              # token by token, words get cut


# ------------------------------------------------------------------ --dropout
def test_dropout_sets_both_probabilities_of_the_run_model(corpus_file, tmp_path):
    config = check_args(small_args(corpus_file, tmp_path, dropout=0.25), probe_out=False)
    assert (config.hidden_dropout_prob, config.attention_probs_dropout_prob) == (0.25, 0.25)
    result = pretrain(small_args(corpus_file, tmp_path / "r", dropout=0.0, steps=2), log=quiet)
    c = result.model.config
    assert (c.hidden_dropout_prob, c.attention_probs_dropout_prob) == (0.0, 0.0)
    ids = np.array([[2, 10, 11, 12, 3]])
    a, b = (result.model.forward(ids, train=True).mlm_logits for _ in range(2))
    np.testing.assert_array_equal(a, b)          # dropout 0: training forwards draw no masks
    default = pretrain(small_args(corpus_file, tmp_path / "d", steps=2), log=quiet).model
    assert default.config.hidden_dropout_prob == 0.1
    assert not np.array_equal(*(default.forward(ids, train=True).mlm_logits for _ in range(2)))


def test_a_dropout_near_1_is_named_when_the_run_diverges(corpus_file, tmp_path, capsys):
    # it said "Try a lower --lr": at step 1, before any update, the learning rate has done nothing
    code = main(["pretrain", "--corpus", str(corpus_file), "--out", str(tmp_path / "r"), "--vocab-size", "400",
                 "--steps", "2", "--batch-size", "4", "--seq-len", "32", "--warmup", "0", "--eval-instances", "8",
                 "--no-progress", "--no-plot", "--dropout", "0.999999"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1, err
    assert err.startswith("minibert pretrain: error: step 1: ") and "--lr" not in err, err
    assert err.endswith("The likely cause is the dropout rate 0.999999: it keeps one activation in 1,000,000 "
                        "and multiplies it by 1,000,000; try a lower --dropout (BERT's is 0.1)."), err


# ------------------------------------------------------------------ --pre-ln
def small_config(**kw):
    return mb.BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=12, max_position_embeddings=16, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0, **kw)


def test_pre_ln_layer_computes_x_plus_sublayer_of_ln_x(rng):
    model = mb.BertModel(small_config(), seed=1, dtype="float64", pre_ln=True)
    w, c, ops = model.layers[0], model.config, model.ops
    x = rng.standard_normal((2, 5, 8))
    y = encoder.pre_ln_layer_forward(ops, x, w, None, c, None, False)[0]

    def ln(h, n):
        return ops.layernorm_forward(h, n.gamma, n.beta, c.layer_norm_eps)[0]

    def attention(h):
        q, k, v = (ops.split_heads(h @ wt.T + bt, 2) for wt, bt in zip(np.split(w.qkv.weight, 3),
                                                                          np.split(w.qkv.bias, 3)))
        return ops.merge_heads(ops.attention_forward(q, k, v, None)[0]) @ w.attn_out.weight.T + w.attn_out.bias

    def ffn(h):
        return ops.gelu_forward(h @ w.ffn_in.weight.T + w.ffn_in.bias)[0] @ w.ffn_out.weight.T + w.ffn_out.bias
    h = x + attention(ln(x, w.ln1))
    np.testing.assert_allclose(y, h + ffn(ln(h, w.ln2)), rtol=0, atol=1e-12)
    post = encoder.layer_forward(ops, x, w, None, c, None, False)[0]
    assert not np.allclose(post, y)               # BERT's order computes another function


def test_pre_ln_layer_backward_matches_finite_differences(rng):
    model = mb.BertModel(small_config(), seed=2, dtype="float64", pre_ln=True)
    # the LayerNorms away from 1 and 0, so that a gradient that ignored them would show
    model.params.data[...] += 0.3 * rng.standard_normal(model.params.data.shape)
    w, c, ops = model.layers[1], model.config, model.ops
    x = rng.standard_normal((2, 5, 8))
    mask = np.ones((2, 5), dtype=np.int64)
    mask[1, 3:] = 0
    bias = ops.attention_mask_bias(mask, np.float64)
    forward = lambda: encoder.pre_ln_layer_forward(ops, x, w, bias, c, None, False)[0]  # noqa: E731
    y, cache = encoder.pre_ln_layer_forward(ops, x, w, bias, c, None, False)
    dy = rng.standard_normal(y.shape)
    model.zero_grad()
    dx, skip = encoder.layer_backward(ops, dy, cache, w, model.params.add_grad)
    assert skip is None                      # a pre-LN layer's input gradient comes in one part
    assert max_rel_error(dx, numerical_gradient(forward, x, dy)) < 1e-7
    names = [n for n in model.params.params if n.startswith("encoder.layer.1.")]
    assert len(names) == 16
    for name in names:
        if name.endswith("key.bias"):        # softmax ignores a shift shared by a query's scores: 0
            continue
        num = numerical_gradient(forward, model.params.params[name], dy)
        assert max_rel_error(model.params.grads[name], num) < 1e-7, name


def test_pre_ln_model_gradients_match_finite_differences(rng):
    from conftest import padded_batch
    model = mb.BertForPreTraining(small_config(), seed=3, dtype="float64", pre_ln=True)
    model.params.data[...] += 0.3 * rng.standard_normal(model.params.data.shape)
    assert "bert.encoder.LayerNorm.weight" in model.params.params
    batch = padded_batch(rng, 40, B=3, T=9)
    model.forward(**batch, train=False)
    model.backward()
    grads = {k: g.copy() for k, g in model.params.grads.items()}
    loss = lambda: float(model.forward(**batch, train=False).loss)  # noqa: E731
    for name, param in model.params.params.items():
        if name.endswith("key.bias"):
            continue
        assert max_rel_error(grads[name], numerical_gradient(loss, param)) < 1e-7, name


def test_pre_ln_run_resumes_exactly_and_is_not_exported(corpus_file, tmp_path):
    logs = []
    once = pretrain(small_args(corpus_file, tmp_path / "once", pre_ln=True), log=logs.append)
    assert "bert.encoder.LayerNorm.weight" in once.model.params.params
    pretrain(small_args(corpus_file, tmp_path / "twice", pre_ln=True, stop_at=6), log=quiet)
    pretrain(small_args(corpus_file, tmp_path / "twice", pre_ln=True, resume=True), log=quiet)
    assert train_losses(tmp_path / "once") == train_losses(tmp_path / "twice")      # bit for bit
    refusal = [line for line in logs if str(line).startswith("model not exported")]
    assert len(refusal) == 1 and PRE_LN_EXPORT in refusal[0] and "post-LN" in refusal[0]
    assert not (tmp_path / "once" / "model").exists() and list_checkpoints(tmp_path / "once")
    with pytest.raises(ValueError, match="cannot be saved as Hugging Face's BertForPreTraining.*post-LN"):
        once.model.save_pretrained(tmp_path / "export")
    assert not (tmp_path / "export").exists()
    # a post-LN model of the same seed starts elsewhere: the flag reaches the model
    post = pretrain(small_args(corpus_file, tmp_path / "post", steps=2, warmup=0), log=quiet)
    assert train_losses(tmp_path / "post")[0] != train_losses(tmp_path / "once")[0]
    assert Path(post.out, "model", "config.json").is_file()


def test_fill_mask_on_a_finished_pre_ln_run_says_it_has_no_model(corpus_file, tmp_path, capsys):
    # it said the model would be "written when the run finishes", of a finished run
    run = tmp_path / "r"
    pretrain(small_args(corpus_file, run, pre_ln=True, steps=2, warmup=0), log=quiet)
    for folder in (run, run / "model"):
        code = main(["fill-mask", str(folder), "the [MASK] returns a value ."])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1, err
        assert err == (f"minibert fill-mask: error: {run} is the folder of a --pre-ln run, which has no model "
                       f"folder even when finished: {PRE_LN_EXPORT}. Its weights are only in its checkpoints; "
                       f"for fill-mask, train without --pre-ln"), err


# ------------------------------------------------------------------ the reference results' tool
def _ablation_tool(monkeypatch, calls, stop_after=None):
    """tools/make_ablation_results.py with its training replaced by a record of the calls: a run's
    numbers are made from its name and seed, and ``stop_after`` runs end the job as a kill would."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "make_ablation_results", Path(__file__).resolve().parents[1] / "tools" / "make_ablation_results.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)

    class Killed(Exception):
        pass

    def one_run(name, seed, flags, tmp, batches, base, steps):
        if stop_after is not None and len(calls) == stop_after:
            raise Killed
        calls.append((name, seed))
        loss = 5.0 + len(name) / 10 + seed / 100
        return dict(seed=seed, evals=[[0, 9.0, 0.0, 0.5, 6.0], [steps, loss, 0.2, 0.6, 6.0]],
                    common=dict(mlm_loss=loss, mlm_acc=0.2))
    monkeypatch.setattr(tool, "one_run", one_run)
    monkeypatch.setattr(tool, "common_batches", lambda seed, tmp, base, steps: [])
    return tool, Killed


def test_the_ablation_tool_keeps_finished_runs_and_resumes_where_it_stopped(monkeypatch, tmp_path, capsys):
    out = tmp_path / "ablations.json"
    argv = ["--steps", "20", "--seeds", "2", "--out", str(out)]
    whole = []
    tool, _ = _ablation_tool(monkeypatch, whole)
    tool.main(argv + ["--out", str(tmp_path / "whole.json")])
    assert len(whole) == 12 and json.loads((tmp_path / "whole.json").read_text())["complete"] is True

    calls = []
    tool, Killed = _ablation_tool(monkeypatch, calls, stop_after=5)
    with pytest.raises(Killed):
        tool.main(argv)
    part = json.loads(out.read_text())            # written after each run: the five finished ones
    assert part["complete"] is False
    assert [(n, r["seed"]) for n, a in part["ablations"].items() for r in a["runs"]] == calls
    assert not list(tmp_path.glob("*.part"))

    again = []
    tool, _ = _ablation_tool(monkeypatch, again)
    tool.main(argv + ["--resume"])
    assert again == whole[5:]                      # only what the file lacked
    assert "default seed 0: in" in capsys.readouterr().out
    assert json.loads(out.read_text()) == json.loads((tmp_path / "whole.json").read_text())


def test_the_ablation_tool_refuses_to_resume_another_recipe(monkeypatch, tmp_path, capsys):
    out = tmp_path / "ablations.json"
    tool, _ = _ablation_tool(monkeypatch, [])
    tool.main(["--steps", "20", "--seeds", "1", "--out", str(out)])
    before = out.read_text()
    with pytest.raises(SystemExit):
        tool.main(["--steps", "30", "--seeds", "1", "--out", str(out), "--resume"])
    assert "holds runs of another recipe (recipe, steps differ)" in capsys.readouterr().err
    assert out.read_text() == before


def test_the_ablation_tool_splits_over_processes_and_joins_the_parts(monkeypatch, tmp_path, capsys):
    """--only runs one ablation into a file of its own; --merge joins such files into the whole file,
    equal to one job's, and refuses a part made with another recipe."""
    argv = ["--steps", "20", "--seeds", "2"]
    tool, _ = _ablation_tool(monkeypatch, [])
    tool.main(argv + ["--out", str(tmp_path / "whole.json")])
    names = list(tool.ABLATIONS)
    parts = []
    for i in range(0, len(names), 2):
        calls = []
        tool, _ = _ablation_tool(monkeypatch, calls)
        parts.append(tmp_path / f"part{i}.json")
        tool.main(argv + ["--out", str(parts[-1]), "--only", names[i], "--only", names[i + 1]])
        assert calls == [(n, s) for n in names[i:i + 2] for s in (0, 1)]
        assert json.loads(parts[-1].read_text())["complete"] is False
    out = tmp_path / "joined.json"
    tool.main(argv + ["--out", str(out), "--merge"] + [str(p) for p in parts[:-1]])
    assert json.loads(out.read_text())["complete"] is False and "not all 12 yet" in capsys.readouterr().out
    tool.main(argv + ["--out", str(out), "--merge"] + [str(p) for p in parts])
    assert json.loads(out.read_text()) == json.loads((tmp_path / "whole.json").read_text())
    tool.main(["--steps", "30", "--seeds", "2", "--out", str(tmp_path / "other.json"), "--only", "default"])
    with pytest.raises(SystemExit):
        tool.main(argv + ["--out", str(out), "--merge", str(tmp_path / "other.json")])
    assert "cannot be joined" in capsys.readouterr().err


def test_the_ablation_tool_does_not_record_a_run_a_signal_cut_short(monkeypatch, tmp_path, capsys):
    """A time limit's SIGTERM makes pretrain stop cleanly and return: such a run is not a result."""
    import importlib.util
    from minibert.train.args import RunResult
    spec = importlib.util.spec_from_file_location(
        "make_ablation_results", Path(__file__).resolve().parents[1] / "tools" / "make_ablation_results.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    ran = []

    def pretrain(args, log):
        ran.append(args.seed)
        done = args.seed == 0                     # the second run is cut short at step 7
        return RunResult(out=tmp_path, step=args.steps if done else 7, stopped_by=None if done else "SIGTERM",
                         history=[dict(kind="eval", step=0, mlm_loss=9.0)])
    monkeypatch.setattr(tool, "pretrain", pretrain)
    monkeypatch.setattr(tool, "evaluate", lambda model, batches: dict(mlm_loss=5.0, mlm_acc=0.2))
    monkeypatch.setattr(tool, "common_batches", lambda seed, tmp, base, steps: [])
    out = tmp_path / "ablations.json"
    with pytest.raises(SystemExit, match="default seed 1: stopped at step 7 of 20 .SIGTERM.; not recorded"):
        tool.main(["--steps", "20", "--seeds", "2", "--out", str(out)])
    assert ran == [0, 1]
    kept = json.loads(out.read_text())
    assert [r["seed"] for r in kept["ablations"]["default"]["runs"]] == [0] and kept["complete"] is False


def test_the_ablation_tool_runs_ablations_in_parallel_processes_and_gets_the_same_numbers(tmp_path):
    """--jobs 2: two ablations, each in a process of its own, give the very numbers of one process
    running both (the CPU path is deterministic), and the processes' files are cleared away."""
    import subprocess
    import sys
    tool = str(Path(__file__).resolve().parents[1] / "tools" / "make_ablation_results.py")
    argv = [sys.executable, tool, "--steps", "10", "--seeds", "1", "--only", "default", "--only", "no dropout"]
    one = subprocess.run(argv + ["--out", str(tmp_path / "one.json")], capture_output=True, text=True, timeout=600)
    assert one.returncode == 0, one.stderr
    two = subprocess.run(argv + ["--out", str(tmp_path / "two.json"), "--jobs", "2"], capture_output=True,
                         text=True, timeout=600)
    assert two.returncode == 0, two.stderr
    assert json.loads((tmp_path / "two.json").read_text()) == json.loads((tmp_path / "one.json").read_text())
    assert "default seed 0: held-out MLM loss" in two.stdout and "no dropout seed 0" in two.stdout
    assert not (tmp_path / "two.json.jobs").exists()
