"""The demo's held-out numbers: top-k accuracy of the model and of guessing by frequency, and
examples drawn from held-out text, checked against a brute-force ranking."""
import numpy as np
import pytest

from minibert.demo import show_heldout
from minibert.train import TrainArgs, evaluate, heldout, pretrain


@pytest.fixture(scope="module")
def run(corpus_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("heldout") / "run"
    return pretrain(TrainArgs(corpus=str(corpus_file), vocab_size=1500, config="tiny", steps=30, heldout_fraction=0.3, batch_size=8,
                              seq_len=32, lr=3e-3, warmup=3, eval_every=30, save_every=30, log_every=10,
                              eval_instances=128, progress=False, plot=False, out=str(out)), log=lambda m: None)


def test_frequency_ranks_put_the_most_frequent_first_and_break_ties_by_id():
    assert heldout.frequency_ranks(np.array([3.0, 9.0, 3.0, 0.0, 5.0])).tolist() == [3, 1, 4, 5, 2]


def test_ranks_agree_with_a_brute_force_ranking_and_the_evaluation(run):
    found = heldout.predictions(run.model, run.eval_batches, run.token_counts)
    assert len(found) == run.final_eval["n_masked"]
    by_count = sorted(range(len(run.token_counts)), key=lambda i: (-run.token_counts[i], i))
    for p in found[:50]:
        batch = run.eval_batches[p.batch]
        assert batch["mlm_labels"].reshape(-1)[p.position] == p.true_id
        assert batch["input_ids"].reshape(-1)[p.position] == p.shown_id
        logits = run.model.forward(**{k: v[p.position // batch["input_ids"].shape[1]][None]
                                      for k, v in batch.items()}, train=False).mlm_logits
        row = np.asarray(logits)[list(np.flatnonzero(batch["mlm_labels"][p.position // batch["input_ids"].shape[1]]
                                                     != -100)).index(p.position % batch["input_ids"].shape[1])]
        assert p.model_rank == 1 + int((row > row[p.true_id]).sum())
        assert p.frequency_rank == by_count.index(p.true_id) + 1
        assert p.top_ids[0] == int(np.argmax(row)) and np.all(np.diff(p.top_probs) <= 0)
    model1, frequency1 = heldout.top_k_accuracy(found, 1)
    # top-1 is the evaluation's MLM accuracy; the frequency guess's top-1 is the share of its first token
    assert model1 == pytest.approx(evaluate(run.model, run.eval_batches)["mlm_acc"], abs=1e-12)
    assert frequency1 == pytest.approx(np.mean([p.true_id == by_count[0] for p in found]))
    assert heldout.top_k_accuracy(found, len(run.token_counts)) == (1.0, 1.0)
    assert heldout.top_k_accuracy(found, 5)[0] >= model1


def test_examples_are_drawn_by_the_seed_among_masked_whole_words(run):
    found = heldout.predictions(run.model, run.eval_batches, run.token_counts)
    first = heldout.examples(found, run.eval_batches, run.tokenizer, n=3, seed=0)
    again = heldout.examples(found, run.eval_batches, run.tokenizer, n=3, seed=0)
    other = heldout.examples(found, run.eval_batches, run.tokenizer, n=3, seed=1)
    where = lambda examples: [(e["prediction"].batch, e["prediction"].position) for e in examples]  # noqa: E731
    assert where(first) == where(again) and where(first) != where(other)
    for ex in first:
        p = ex["prediction"]
        assert run.eval_batches[p.batch]["input_ids"].reshape(-1)[p.position] == run.tokenizer.mask_id
        assert ex["true"].isalpha() and ex["text"].count("____") == 1
        assert ex["text"].split("____")[1][:1] in ("", " ")       # a whole word, not the start of one
        assert len(ex["top"]) == 5


def test_the_demo_prints_top_k_against_the_frequency_guess(run, capsys):
    show_heldout(run, examples_shown=2)
    text = capsys.readouterr().out
    assert "MLM top-1 accuracy" in text and "MLM top-5 accuracy" in text and text.count("at [MASK] only") == 2
    top = run.tokenizer.vocab[int(np.argmax(run.token_counts))]
    assert f"always {top!r}" in text
    assert text.count(" under minibert, ") == 2     # one line per example
