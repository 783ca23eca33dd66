"""The Python API refuses at its door what a student in a notebook could plausibly pass by mistake, where it
was taken for something else and gave a wrong result without a word (a truthy NaN for "finite", a str for a
switch, a negative index, probabilities for classes), or failed deep inside with another library's message."""
import numpy as np
import pytest

import minibert as mb
from minibert import optim
from minibert.data.builtin import builtin_corpus
from minibert.data.instances import create_instances_from_document
from minibert.data.masking import mask_token_ids, mask_tokens, masking_tables
from minibert.data.pretraining_data import build_pretraining_dataset
from minibert.data.tokenizer import WordPieceTokenizer, train_wordpiece
from minibert.finetune import metrics
from minibert.train import TrainArgs, check_args, fill_mask

CONFIG = dict(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
              max_position_embeddings=16)
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "##s"]


@pytest.fixture(scope="module")
def model():
    return mb.BertForPreTraining(mb.BertConfig(**CONFIG))


def refused(call, kind, says):
    with pytest.raises(kind) as err:
        call()
    assert says in str(err.value), str(err.value)


@pytest.mark.parametrize("finite", [float("nan"), 3.5, None, np.float64(np.inf), "yes"])
def test_the_loss_scaler_takes_a_verdict_not_a_number(finite):
    # a NaN norm was truthy: the step was taken and the weights became NaN
    refused(lambda: optim.LossScaler().update(finite), TypeError, "takes whether the gradients are finite")
    scaler = optim.LossScaler()
    assert scaler.update(np.isfinite(np.float32(1.0))) is True and scaler.update(np.array(False)) is False


def test_the_optimiser_takes_the_models_parameters_and_a_verdict(model):
    for call in (lambda: optim.AdamW(model), lambda: optim.clip_grad_norm(model),
                 lambda: optim.unscale_and_clip(model)):
        refused(call, TypeError, "takes the model's parameters, model.params (a ParamStore), not BertForPreTraining")
    refused(lambda: optim.AdamW(model.params, bias_correction="False"), TypeError, "bias_correction must be True")
    refused(lambda: optim.AdamW(model.params).step(take=1.0), TypeError, "take takes whether the gradients")


@pytest.mark.parametrize("setting, says", [
    (dict(resume="no"), "--resume (resume) is a switch: True or False, got str 'no'"),
    (dict(bias_correction="False"), "--bias-correction (bias_correction) is a switch: True or False"),
    (dict(lr="1e-3"), "--lr (lr) must be a number, got str '1e-3'"),
    (dict(max_grad_norm=None), "--max-grad-norm (max_grad_norm) must be a number, got NoneType None (0: no clipping)"),
    (dict(warmup=0.1), "a number of steps, not a fraction of them"),
    (dict(stop_at=1.5), "--stop-at (stop_at) must be a whole number"),
    (dict(corpus=["A sentence."]), "write its documents to a file"),
])
def test_train_args_of_the_wrong_kind_are_named(tmp_path, setting, says):
    refused(lambda: check_args(TrainArgs(**{"out": str(tmp_path / "run"), **setting}), probe_out=False),
            ValueError, says)


def test_train_args_take_a_bert_config_and_the_model_its_own_copy(tmp_path):
    config = mb.BertConfig.from_preset("tiny")
    assert check_args(TrainArgs(config=config, out=str(tmp_path / "run")), probe_out=False) == config
    kept = mb.BertConfig(**CONFIG)
    model = mb.BertForPreTraining(kept)
    kept.max_position_embeddings = 32          # the caller's config edited later: the model keeps its sizes
    assert model.config.max_position_embeddings == 16 and model.config is not kept


def test_the_tokenizer_takes_an_ordered_vocabulary_and_a_casing():
    tok = WordPieceTokenizer(VOCAB)
    assert tok.convert_tokens_to_ids("a") == 5 and tok.convert_tokens_to_ids(["a", "zz"]) == [5, 1]
    refused(lambda: WordPieceTokenizer(set(VOCAB)), TypeError, "a list of token strings in id order, got set")
    refused(lambda: WordPieceTokenizer(t for t in VOCAB), TypeError, "got generator")
    for casing in ("False", None):
        refused(lambda: WordPieceTokenizer(VOCAB, do_lower_case=casing), TypeError, "do_lower_case must be True")
    refused(lambda: train_wordpiece(["a b"], 200, do_lower_case="no"), TypeError, "do_lower_case must be True")


def test_masking_takes_tokens_a_generator_and_a_cap():
    rng = np.random.default_rng(0)
    refused(lambda: mask_tokens([101, 2000, 102], VOCAB, rng), TypeError, "not ints: give instance.tokens")
    refused(lambda: mask_tokens(["a", "b"], "ab", rng), ValueError, "got a string")
    refused(lambda: mask_tokens(["a", "b"], VOCAB, 0), TypeError, "rng must be a numpy.random.Generator")
    tables = masking_tables({t: i for i, t in enumerate(VOCAB)}, VOCAB[5:])
    for call in (lambda: mask_tokens(["a", "b"], VOCAB, rng, max_predictions_per_seq=-1),
                 lambda: mask_token_ids(np.array([[5, 6]]), np.array([2]), rng, tables, 0.15, -1)):
        refused(call, ValueError, "max_predictions_per_seq must be a whole number >= 0, got -1")
    refused(lambda: mask_tokens(["a"], VOCAB, rng, whole_word_mask="no"), TypeError, "whole_word_mask must be True")


def test_a_document_index_out_of_range_is_refused():
    # -1 passed Python's indexing, and the NotNext B was drawn from A's own document
    docs = [[["a", "b"]], [["b", "a"]]]
    for index in (-1, 2, 0.0):
        refused(lambda: create_instances_from_document(docs, index, 16, 0.1, np.random.default_rng(0)), ValueError,
                "document_index must be a whole number in [0, 2)")
    refused(lambda: create_instances_from_document(docs[:1], 0, 16, 0.1, np.random.default_rng(0)), ValueError,
            "needs at least 2")


def test_the_dataset_takes_a_corpus_a_tokenizer_and_switches():
    tok = train_wordpiece(["the cat sat on the mat"] * 5, vocab_size=130)
    corpus = builtin_corpus(cache_dir=False)
    refused(lambda: build_pretraining_dataset([["A b."]], tok), TypeError, "corpus must be a minibert.data Corpus")
    refused(lambda: build_pretraining_dataset(corpus, "vocab.txt"), TypeError, "tokenizer must be a WordPieceTokenizer")
    refused(lambda: build_pretraining_dataset(corpus, tok, nsp=None, cache_dir=False), TypeError,
            "nsp must be True or False")


def test_the_metrics_compare_class_numbers_and_finite_values():
    for call in (lambda: metrics.accuracy([0.9, 0.2], [1, 0]), lambda: metrics.f1(["yes", "no"], ["yes", "no"])):
        refused(call, ValueError, "must be class numbers")
    refused(lambda: metrics.spearman([1, np.nan, 2], [1, 2, 3]), ValueError, "hold NaN or infinite values")
    assert metrics.accuracy(np.array([1.0, 0.0]), [1, 1]) == 0.5       # whole numbers as floats are classes


def test_a_classifier_is_saved_only_with_its_labels_right(tmp_path):
    from minibert.finetune.model import BertForSequenceClassification
    classifier = BertForSequenceClassification(mb.BertConfig(**CONFIG), num_labels=3)
    for labels, kind, says in ((["neg", "pos"], ValueError, "labels names 2 labels for a model of 3 outputs"),
                               ("abc", TypeError, "labels must be a list of the label names")):
        refused(lambda: classifier.save_pretrained(tmp_path / "c", labels=labels), kind, says)
        assert not (tmp_path / "c").exists()                # nothing written before the check


def test_fill_mask_names_a_model_without_the_masked_lm_head(model):
    tok = WordPieceTokenizer(VOCAB)
    refused(lambda: fill_mask(mb.BertModel(mb.BertConfig(**CONFIG)), tok, "a [MASK]"), TypeError,
            "fill_mask needs a BertForPreTraining")
    refused(lambda: fill_mask(model, "a [MASK]", tok), TypeError, "tokenizer must be a WordPieceTokenizer")


def test_a_gradient_check_takes_df_of_the_outputs_shape():
    # broadcast, a df of shape (5,) for a (3, 5) output checked another gradient than the backward's dout
    from minibert.gradcheck import numerical_gradient
    x = np.random.default_rng(0).standard_normal((3, 5))
    refused(lambda: numerical_gradient(lambda: 2 * x, x, np.ones(5)), ValueError,
            "df must have the shape of f's output, (3, 5), got (5,)")
    assert np.allclose(numerical_gradient(lambda: 2 * x, x, np.ones((3, 5))), 2.0)
