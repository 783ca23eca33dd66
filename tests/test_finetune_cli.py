"""``minibert finetune`` end to end: a small pre-trained model (written here) fine-tuned on task folders in
GLUE's layout (SST-2 and STS-B made here; MNLI's two dev and two test files), its outputs (metrics.jsonl,
results.json, GLUE's submission files, a model transformers loads), and hostile input in one line."""
import json

import numpy as np
import pytest

import minibert as mb
from minibert.cli import main

WORDS = ["the", "film", "was", "a", "story", "of", "people", "and", "it", "is", "good", "bad"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    return small_bert(tmp_path_factory.mktemp("model"))


def small_bert(folder):
    """A small BERT in Hugging Face's format with its vocab.txt, as `minibert pretrain` exports one."""
    config = mb.BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, max_position_embeddings=64)
    mb.BertForPreTraining(config, seed=2).save_pretrained(folder)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    return folder


def sentences(rng, n):
    out = []
    for _ in range(n):
        y = int(rng.integers(0, 2))
        words = list(rng.choice(WORDS[:10], int(rng.integers(3, 9))))
        words.insert(int(rng.integers(0, len(words) + 1)), "good" if y else "bad")
        out.append((" ".join(words), y))
    return out


def sst2_folder(root, rng, bad_line=None):
    folder = root / "SST-2"
    folder.mkdir(parents=True)
    for split, n in (("train", 320), ("dev", 200)):
        lines = [f"{s}\t{y}" for s, y in sentences(rng, n)]
        if bad_line and split == "train":
            lines[bad_line - 2] = "a film\tpositive"
        (folder / f"{split}.tsv").write_text("sentence\tlabel\n" + "\n".join(lines) + "\n")
    (folder / "test.tsv").write_text("index\tsentence\n" + "".join(f"{i}\t{s}\n" for i, (s, _) in
                                                                   enumerate(sentences(rng, 7))))
    return folder


def test_sst2_in_glues_layout_learned_with_every_output(pretrained, tmp_path, rng, capsys):
    sst2_folder(tmp_path / "glue_data", rng)
    out = tmp_path / "out"
    assert main(["finetune", "--task", "SST-2", "--model", str(pretrained), "--data-dir", str(tmp_path / "glue_data"),
                 "--out", str(out), "--lr", "2e-3", "--epochs", "6", "--batch-size", "16", "--seed", "5"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["dev"]["dev"]["accuracy"] > 0.95 and results["new_weights"].endswith("classifier")
    assert "dev: accuracy" in capsys.readouterr().out
    log = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "step" in r] == list(range(1, 6 * 20 + 1))
    assert log[-1]["split"] == "dev" and (out / "finetune.png").stat().st_size > 10_000
    predictions = (out / "predictions" / "SST-2.tsv").read_text().splitlines()
    assert predictions[0] == "index\tprediction" and len(predictions) == 8
    assert all(line.split("\t")[1] in ("0", "1") for line in predictions[1:])

    torch = pytest.importorskip("torch", reason="transformers loads the fine-tuned model: torch==2.13.0")
    transformers = pytest.importorskip("transformers", reason="transformers loads the fine-tuned model")
    hf = transformers.BertForSequenceClassification.from_pretrained(out / "model").eval()
    assert hf.config.id2label == {0: "0", 1: "1"}
    ours, _, note = __import__("minibert.finetune.load", fromlist=["load"]).load(out, 2)
    assert note == "every weight from the checkpoint"
    ids = np.array([[2, 5, 6, 7, 15, 3]])
    with torch.no_grad():
        ref = hf(torch.from_numpy(ids)).logits.numpy()
    np.testing.assert_allclose(ours.forward(ids, train=False).logits, ref, atol=1e-5)


def test_stsb_a_regression_and_mnli_with_two_dev_and_two_test_files(pretrained, tmp_path, rng):
    sts = tmp_path / "sts"
    sts.mkdir()
    head = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
    rows = [(s1, s2, 5.0 * rng.random()) for (s1, _), (s2, _) in zip(sentences(rng, 40), sentences(rng, 40))]
    for split in ("train", "dev"):
        (sts / f"{split}.tsv").write_text(head + "\tscore\n" + "".join(
            f"{i}\tg\tf\ty\to\ts\ts\t{a}\t{b}\t{score:.3f}\n" for i, (a, b, score) in enumerate(rows)))
    (sts / "test.tsv").write_text(head + "\n" + "".join(f"{i}\tg\tf\ty\to\ts\ts\t{a}\t{b}\n"
                                                       for i, (a, b, _) in enumerate(rows[:5])))
    assert main(["finetune", "--task", "stsb", "--model", str(pretrained), "--data-dir", str(sts),
                 "--out", str(tmp_path / "o1"), "--epochs", "1", "--batch-size", "16"]) == 0
    dev = json.loads((tmp_path / "o1" / "results.json").read_text())["dev"]["dev"]
    assert set(dev) == {"pearson", "spearman"}
    scores = [float(line.split("\t")[1]) for line in (tmp_path / "o1/predictions/STS-B.tsv").read_text().splitlines()[1:]]
    assert len(scores) == 5 and all(0 <= s <= 5 for s in scores)

    mnli = tmp_path / "mnli"
    mnli.mkdir()
    head = "index\tpromptID\tpairID\tgenre\tp1\tp2\tq1\tq2\tsentence1\tsentence2"
    labels = ("contradiction", "entailment", "neutral")
    for split, extra in (("train", "\tlabel1\tgold_label"), ("dev_matched", "\tgold_label"),
                         ("dev_mismatched", "\tgold_label")):
        (mnli / f"{split}.tsv").write_text(head + extra + "\n" + "".join(
            f"{i}\tp\tq\tg\ta\tb\tc\td\t{a}\t{b}" + (f"\t{labels[i % 3]}" * extra.count("\t")) + "\n"
            for i, ((a, _), (b, _)) in enumerate(zip(sentences(rng, 30), sentences(rng, 30)))))
    for split in ("test_matched", "test_mismatched"):
        (mnli / f"{split}.tsv").write_text(head + "\n" + "0\tp\tq\tg\ta\tb\tc\td\tthe film\tit was\n")
    assert main(["finetune", "--task", "mnli", "--model", str(pretrained), "--data-dir", str(mnli),
                 "--out", str(tmp_path / "o2"), "--epochs", "1"]) == 0
    assert set(json.loads((tmp_path / "o2" / "results.json").read_text())["dev"]) == {"dev_matched", "dev_mismatched"}
    for name in ("MNLI-m.tsv", "MNLI-mm.tsv"):
        line = (tmp_path / "o2" / "predictions" / name).read_text().splitlines()[1]
        assert line.split("\t")[0] == "0" and line.split("\t")[1] in labels


def test_hostile_input_is_one_line(pretrained, tmp_path, rng, capsys):
    sst2_folder(tmp_path / "bad", rng, bad_line=5)
    good = sst2_folder(tmp_path / "good", rng)
    long = sst2_folder(tmp_path / "long", rng)
    lines = (long / "dev.tsv").read_text().splitlines()
    lines[3] = "the film " * 20_000 + "\t1"                  # a file's worth of text in one field
    (long / "dev.tsv").write_text("\n".join(lines) + "\n")
    common = ["--out", str(tmp_path / "o")]
    cases = [
        (["--task", "sst2", "--model", str(pretrained), "--data-dir", str(tmp_path / "bad")],
         "SST-2/train.tsv, line 5, column 'label': 'positive' is not one of sst2's labels (0, 1)"),
        (["--task", "sst2", "--model", str(pretrained), "--data-dir", str(tmp_path / "none")],
         "no train.tsv there or in SST-2/"),
        (["--task", "sst2", "--model", str(pretrained), "--data-dir", str(long)],
         "SST-2/dev.tsv, line 4, column 'sentence': a text of 180,000 characters"),
        (["--task", "sst2", "--model", str(pretrained), "--data-dir", str(good), "--max-seq-length",
          "65"], "--max-seq-length 65: the model reads 64 tokens at most"),
        (["--task", "sst2", "--model", str(pretrained), "--data-dir", str(good), "--labels", "x,y"],
         "--labels is for --task custom: sst2's columns and labels are GLUE's"),     # not ignored in silence
        (["--task", "sst2", "--model", str(pretrained), "--data-dir", str(good), "--max-seq-length", "2"],
         "sst2's examples need 3 at least: [CLS], a token of the text and [SEP]"),   # not every text cut to nothing
        (["--task", "squad", "--model", str(pretrained), "--data-dir", str(tmp_path)], "no GLUE task 'squad'"),
        (["--task", "sst2", "--model", str(tmp_path / "nomodel"), "--data-dir", str(tmp_path / "bad")], None),
        (["--task", "sst2", "--model", str(pretrained), "--data-dir", str(tmp_path / "bad"), "--epochs", "0"],
         "--epochs must be 1 or more"),
    ]
    for args, says in cases:
        assert main(["finetune", *args, *common]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith("minibert finetune: error: ")
        assert says is None or says in err, err


def test_a_custom_csv_task_with_named_columns(pretrained, tmp_path, rng):
    folder = tmp_path / "reviews"
    folder.mkdir()
    for split, n in (("train", 320), ("dev", 100)):
        rows = "".join(f'{i},"{s}, really",{"pos" if y else "neg"}\n' for i, (s, y) in enumerate(sentences(rng, n)))
        (folder / f"{split}.csv").write_text("id,review,stars\n" + rows)
    (folder / "test.csv").write_text('id,review\n17,"the film, it was good"\n')
    out = tmp_path / "out"
    assert main(["finetune", "--task", "custom", "--text-a", "review", "--label", "stars", "--id", "id",
                 "--model", str(pretrained), "--data-dir", str(folder), "--out", str(out), "--lr", "2e-3",
                 "--epochs", "6", "--batch-size", "16", "--seed", "5"]) == 0
    results = json.loads((out / "results.json").read_text())
    dev = results["dev"]["dev"]
    assert set(dev) == {"accuracy", "f1"} and dev["accuracy"] > 0.95
    assert (out / "predictions" / "custom.tsv").read_text().splitlines()[1].split("\t") == ["17", "pos"]
    assert results["test"] is None                      # a test file without the label's column: predictions only


def test_a_custom_tasks_test_file_with_labels_is_scored_too(pretrained, tmp_path, rng, capsys):
    folder = tmp_path / "topics"
    folder.mkdir()
    for split, n in (("train", 320), ("dev", 60), ("test", 90)):
        rows = "".join(f"{s}\t{'up' if y else 'down'}\tx\n" for s, y in sentences(rng, n))
        (folder / f"{split}.tsv").write_text("text\tlabel\tother\n" + rows)
    out = tmp_path / "out"
    assert main(["finetune", "--task", "custom", "--text-a", "text", "--label", "label", "--model", str(pretrained),
                 "--data-dir", str(folder), "--out", str(out), "--lr", "2e-3", "--epochs", "6", "--batch-size", "16",
                 "--seed", "5"]) == 0
    test = json.loads((out / "results.json").read_text())["test"]["test"]
    gold = [line.split("\t")[1] for line in (folder / "test.tsv").read_text().splitlines()[1:]]
    predicted = [line.split("\t")[1] for line in (out / "predictions" / "custom.tsv").read_text().splitlines()[1:]]
    assert test["accuracy"] == np.mean([a == b for a, b in zip(predicted, gold)]) > 0.95
    assert f"test: accuracy {test['accuracy']:.4f}, f1 {test['f1']:.4f}" in capsys.readouterr().out
    (folder / "test.tsv").write_text("text\tlabel\nthe film\tup\na story\tsideways\n")
    assert main(["finetune", "--task", "custom", "--text-a", "text", "--label", "label", "--model", str(pretrained),
                 "--data-dir", str(folder), "--out", str(tmp_path / "again")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "test.tsv, line 3, column 'label': 'sideways' is not one of" in err, err


@pytest.mark.parametrize("args, says", [
    (["--text-a", "review"], "--task custom needs --text-a COLUMN and --label COLUMN"),
    (["--text-a", "review", "--label", "stars", "--labels", "neg"], "two or more distinct names"),
    (["--text-a", "words", "--label", "stars"], "line 1: no column 'words' in the header"),
    (["--text-a", "review", "--label", "stars", "--labels", "neg,pos"], "train.csv, line 3, column 'stars': "
                                                                        "'meh' is not one of custom's labels"),
])
def test_a_custom_task_refused_in_one_line(pretrained, tmp_path, capsys, args, says):
    (tmp_path / "train.csv").write_text('review,stars\n"good, yes",pos\nso so,meh\n')
    (tmp_path / "dev.csv").write_text('review,stars\nbad,neg\n')
    assert main(["finetune", "--task", "custom", *args, "--model", str(pretrained), "--data-dir", str(tmp_path),
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err, err


@pytest.mark.parametrize("suffix, row, says", [
    (".tsv", "what a great\tplay it was\tpos", "train.tsv, line 3: 3 fields, where the header has 2: a tab inside a text?"),
    (".csv", "what a great, play it was,pos", "train.csv, line 3: 3 fields, where the header has 2: a comma in a text "
                                              "outside quotes?"),
])
def test_a_custom_row_with_more_fields_than_its_header_is_refused(pretrained, tmp_path, capsys, suffix, row, says):
    # where the extra field was dropped, 'play it was' became a third class and the task was trained as such
    sep = "\t" if suffix == ".tsv" else ","
    (tmp_path / f"train{suffix}").write_text(f"review{sep}stars\ngood{sep}pos\n{row}\nbad{sep}neg\n")
    (tmp_path / f"dev{suffix}").write_text(f"review{sep}stars\nbad{sep}neg\n")
    assert main(["finetune", "--task", "custom", "--text-a", "review", "--label", "stars", "--model", str(pretrained),
                 "--data-dir", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err, err


@pytest.mark.parametrize("there", ["run.json", "results.json", "model"])
def test_a_new_job_writes_over_no_run_and_no_outputs_it_did_not_write(pretrained, tmp_path, rng, capsys, there):
    sst2_folder(tmp_path / "glue", rng)
    out = tmp_path / "out"
    out.mkdir()
    if there == "model":
        (out / "model").mkdir()
        (out / "model" / "config.json").write_text("{}")
    else:
        (out / there).write_text("{}")
    (out / "metrics.jsonl").write_text("a pre-training run's records\n")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert main(["finetune", "--task", "sst2", "--model", str(pretrained), "--data-dir", str(tmp_path / "glue"),
                 "--out", str(out), "--epochs", "1"]) == 2
    err = capsys.readouterr().err.strip()
    says = ("is a pre-training run's folder (run.json there)" if there == "run.json" else
            f"already holds metrics.jsonl, {there}, which fine-tuning writes")
    assert len(err.splitlines()) == 1 and says in err, err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_the_search_runs_each_setting_with_each_seed_and_keeps_the_best(pretrained, tmp_path, rng, capsys):
    sst2_folder(tmp_path / "glue", rng)
    out = tmp_path / "out"
    assert main(["finetune", "--task", "sst2", "--model", str(pretrained), "--data-dir", str(tmp_path / "glue"),
                 "--out", str(out), "--search", "lr=2e-3,1e-5;epochs=6", "--batch-size", "16", "--seeds", "2"]) == 0
    results = json.loads((out / "results.json").read_text())
    table = results["search"]
    assert [(row["lr"], row["epochs"], [r["seed"] for r in row["runs"]]) for row in table] == \
        [(2e-3, 6, [0, 1]), (1e-5, 6, [0, 1])]
    for row in table:
        values = [r["dev"]["dev"]["accuracy"] for r in row["runs"]]
        assert row["mean"] == pytest.approx(np.mean(values)) and row["spread"] == pytest.approx(np.std(values, ddof=1))
    assert table[0]["mean"] > 0.95 > table[1]["mean"]          # 1e-5 from random weights learns nothing
    assert results["recipe"]["lr"] == 2e-3 and results["dev"]["dev"]["accuracy"] == max(
        r["dev"]["dev"]["accuracy"] for r in table[0]["runs"])
    printed = capsys.readouterr().out
    assert "dev accuracy (mean +- spread over 2 seeds)" in printed and "best: batch 16, lr 0.002, 6 epochs" in printed


def test_the_whole_grid_and_its_parts():
    from minibert.finetune.search import grid
    from minibert.finetune.train import Recipe

    full = grid("", Recipe())
    assert len(full) == 18 and {(r.batch_size, r.lr, r.epochs) for r in full} == {
        (b, lr, e) for b in (16, 32) for lr in (5e-5, 3e-5, 2e-5) for e in (2, 3, 4)}
    assert [(r.lr, r.batch_size, r.epochs) for r in grid("lr=5e-5, 3e-5; epochs=4", Recipe(batch_size=8))] == \
        [(5e-5, 8, 4), (3e-5, 8, 4)]
    assert grid(None, Recipe(lr=1e-4)) == [Recipe(lr=1e-4)]
    for bad in ("lr", "lr=fast", "warmup=0.2", "epochs=0", "lr=2"):
        with pytest.raises(ValueError, match="--search"):
            grid(bad, Recipe())


def test_without_data_dir_the_task_is_downloaded_once_into_the_data_folder(pretrained, tmp_path, rng, monkeypatch):
    import hashlib
    import io
    import zipfile

    from minibert.finetune import download as dl

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for split, n in (("train", 40), ("dev", 20)):
            z.writestr(f"SST-2/{split}.tsv", "sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in sentences(rng, n)))
    (tmp_path / "SST-2.zip").write_bytes(buffer.getvalue())
    data = buffer.getvalue()
    monkeypatch.setitem(dl.ZIPS, "sst2", ("SST-2.zip", len(data), hashlib.sha256(data).hexdigest(), "t"))
    monkeypatch.setattr(dl, "urls", lambda t: [(tmp_path / "SST-2.zip").as_uri()])
    monkeypatch.setenv("MINIBERT_DATA", str(tmp_path / "data"))
    args = ["finetune", "--task", "sst2", "--model", str(pretrained), "--epochs", "1"]
    assert main([*args, "--out", str(tmp_path / "o1")]) == 0
    assert (tmp_path / "data" / "glue" / "SST-2" / "train.tsv").is_file()
    (tmp_path / "SST-2.zip").unlink()                      # the second run finds the files: no download
    assert main([*args, "--out", str(tmp_path / "o2")]) == 0


def test_mixed_precision_learns_the_task_too_and_a_missing_gpu_is_one_line(pretrained, tmp_path, rng, capsys):
    sst2_folder(tmp_path / "glue", rng)
    out = tmp_path / "out"
    assert main(["finetune", "--task", "sst2", "--model", str(pretrained), "--data-dir", str(tmp_path / "glue"),
                 "--out", str(out), "--lr", "2e-3", "--epochs", "6", "--batch-size", "16", "--seed", "5",
                 "--mixed-precision"]) == 0
    assert json.loads((out / "results.json").read_text())["dev"]["dev"]["accuracy"] > 0.95
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed here: the missing-GPU message is not what this machine gives")
    except ImportError:
        pass
    capsys.readouterr()
    assert main(["finetune", "--task", "sst2", "--model", str(pretrained), "--data-dir", str(tmp_path / "glue"),
                 "--out", str(out), "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "CuPy" in err, err
