"""Other people's BERT checkpoints: transformers' BertForMaskedLM (no pooler, no next-sentence head),
a vocab.txt that does not fit the model, and fill-mask's output on them."""
import copy
import warnings

import numpy as np
import pytest

import minibert as mb
from minibert.data.tokenizer import WordPieceTokenizer
from minibert.cli import main
from minibert.model.inference import fill_mask
from minibert.data.vocab import bert_special_layout

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

WORDS = ("the a an cat dog sat on mat in house garden tree ran to from big small red blue green old new "
         "and or but is was are were it he she they we you i of for with by at as this that there here "
         "what which who when where why how all any some one two three four five six seven eight nine "
         "ten first last next good bad long short high low man woman child day night year time way "
         "water fire earth air book page word line code file run test model data ##s ##ed ##ing . , !").split()
TEXT = "the old cat sat on the [MASK] in the garden ."


@pytest.fixture(scope="module")
def masked_lm(tmp_path_factory):
    """A BertForMaskedLM saved by transformers itself, with a vocab.txt beside it."""
    vocab = bert_special_layout(num_unused=5) + list(WORDS)
    config = transformers.BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                                     initializer_range=0.5)   # wide logits: no near ties in the ranking
    torch.manual_seed(0)
    model = transformers.BertForMaskedLM(config).eval()
    folder = tmp_path_factory.mktemp("masked-lm")
    model.save_pretrained(folder)
    (folder / "vocab.txt").write_text("".join(t + "\n" for t in vocab))
    return folder, model, vocab


def transformers_probabilities(model, tokenizer, text) -> np.ndarray:
    """transformers' own softmax over the vocabulary at each [MASK] of ``text``."""
    enc = tokenizer.encode(text)
    ids = torch.tensor([enc["input_ids"]])
    with torch.no_grad():
        logits = model(input_ids=ids, token_type_ids=torch.tensor([enc["token_type_ids"]]),
                       attention_mask=torch.tensor([enc["attention_mask"]])).logits[0].double()
    return torch.softmax(logits[ids[0] == tokenizer.mask_id], -1).numpy()


def expected_top(probs, vocab, k):
    order = [i for i in np.argsort(-probs, kind="stable") if not vocab[i].startswith(("[unused", "[PAD]",
                                                                                        "[UNK]", "[CLS]",
                                                                                        "[SEP]", "[MASK]"))]
    return [(vocab[i], probs[i]) for i in order[:k]]


def test_from_pretrained_strict_false_loads_a_masked_lm_and_names_what_was_absent(masked_lm):
    folder, reference, vocab = masked_lm
    with pytest.raises(ValueError, match="missing keys.*strict=False"):   # strict by default, with the way out
        mb.BertForPreTraining.from_pretrained(folder)
    with pytest.warns(UserWarning) as caught:
        model = mb.BertForPreTraining.from_pretrained(folder, strict=False, dtype="float64")
    assert len(caught) == 1
    line = str(caught[0].message)
    assert "\n" not in line and line == (f"{folder}: absent, left as initialised: bert.pooler.dense.{{weight, bias}}, "
                                         f"cls.seq_relationship.{{weight, bias}}")
    assert model.loading_info.missing == ["bert.pooler.dense.weight", "bert.pooler.dense.bias",
                                          "cls.seq_relationship.weight", "cls.seq_relationship.bias"]
    assert model.loading_info.unexpected == []
    tokenizer = WordPieceTokenizer.from_vocab_file(folder / "vocab.txt")
    got = fill_mask(model, tokenizer, TEXT, top_k=10)[0]
    want = expected_top(transformers_probabilities(copy.deepcopy(reference).double(), tokenizer, TEXT)[0], vocab, 10)
    assert [t for t, _ in got] == [t for t, _ in want]
    np.testing.assert_allclose([p for _, p in got], [p for _, p in want], rtol=1e-9)   # both in float64


def test_a_bare_encoder_loads_it_too_and_a_complete_checkpoint_warns_nothing(masked_lm, tmp_path):
    folder, _, _ = masked_lm
    with pytest.warns(UserWarning, match=r"absent, left as initialised: pooler.dense.{weight, bias}$"):
        mb.BertModel.from_pretrained(folder, strict=False)
    mb.BertForPreTraining(mb.BertConfig.from_json_file(folder / "config.json")).save_pretrained(tmp_path / "whole")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = mb.BertForPreTraining.from_pretrained(tmp_path / "whole", strict=False)
    assert model.loading_info == ([], [])


def test_fill_mask_on_a_masked_lm_saved_by_transformers_predicts_what_transformers_does(masked_lm, capsys):
    folder, reference, vocab = masked_lm
    code = main(["fill-mask", str(folder), TEXT, "--top-k", "4"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err.strip().splitlines() == [
        f"note: {folder} has no bert.pooler.dense.{{weight, bias}}, cls.seq_relationship.{{weight, bias}} "
        f"(fill-mask does not use them)"]
    tokenizer = WordPieceTokenizer.from_vocab_file(folder / "vocab.txt")
    want = expected_top(transformers_probabilities(reference, tokenizer, TEXT)[0], vocab, 4)
    shown = "  ".join(f"{t} ({p:.3f})" if p >= 0.001 else f"{t} ({p:.1e})" for t, p in want)
    assert captured.out.splitlines() == [TEXT, f"  [MASK] #1: {shown}"]


def test_a_checkpoint_without_the_masked_lm_head_is_one_line(masked_lm, tmp_path, capsys):
    folder, _, vocab = masked_lm
    config = transformers.BertConfig.from_json_file(str(folder / "config.json"))
    transformers.BertModel(config).save_pretrained(tmp_path)     # an encoder alone: nothing to predict with
    (tmp_path / "vocab.txt").write_text("".join(t + "\n" for t in vocab))
    capsys.readouterr()                                           # (transformers' own progress bar)
    assert main(["fill-mask", str(tmp_path), TEXT]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "lacks weights that fill-mask needs: cls.predictions" in err, err


@pytest.mark.parametrize("change", [+49, -20])
def test_a_vocab_txt_of_another_size_than_the_model_is_refused_at_load(masked_lm, tmp_path, capsys, change):
    # longer: ran until a word mapped past the embedding table; shorter: "token id N is outside the vocabulary"
    folder, _, vocab = masked_lm
    complete = mb.BertForPreTraining(mb.BertConfig.from_json_file(folder / "config.json"))
    complete.save_pretrained(tmp_path)
    other = vocab + [f"extra{i}" for i in range(change)] if change > 0 else vocab[:change]
    (tmp_path / "vocab.txt").write_text("".join(t + "\n" for t in other))
    assert main(["fill-mask", str(tmp_path), "extra3 the [MASK] sat ."]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"minibert fill-mask: error: {tmp_path / 'vocab.txt'} has {len(other)} tokens but the model's "
                   f"vocabulary has {len(vocab)} (vocab_size in its config.json): the two belong to different "
                   f"models; use the vocab.txt the model was trained with")
    tokenizer = WordPieceTokenizer(other)
    with pytest.raises(ValueError, match=f"has {len(other)} tokens but the model's vocabulary has {len(vocab)}"):
        fill_mask(complete, tokenizer, "the [MASK] .")           # the library's fill_mask checks it too
