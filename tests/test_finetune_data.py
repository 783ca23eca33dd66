"""The GLUE tasks' files read as the benchmark lays them out, and GLUE's metrics against SciPy's and
scikit-learn's definitions.

Each task's files are written here in the task's exact format (its header line, its columns in their
order, CoLA's training file without a header, MNLI's 12-column training and 16-column dev files), a
few lines each; then hostile files, each refused in one line naming file, line and column.
"""
import numpy as np
import pytest
import scipy.stats

from minibert.finetune import glue, metrics

# (file, header line or None, rows): the columns of GLUE's distributed files, in their order
MNLI_HEAD = ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
             "sentence2_parse\tsentence1\tsentence2")
FORMATS = {
    "cola": [("train", None, ["gj04\t1\t\tOur friends won't buy this analysis.",
                              "gj04\t0\t*\tThey drank the pub."]),
             ("dev", None, ["gj04\t1\t\tThe sailors rode the breeze clear of the rocks."]),
             ("test", "index\tsentence", ["0\tBill whistled past the house."])],
    "sst2": [("train", "sentence\tlabel", ["hide new secretions \t0", "a gorgeous film \t1"]),
             ("dev", "sentence\tlabel", ["it 's a charming journey . \t1"]),
             ("test", "index\tsentence", ["0\tuneasy mishmash of styles"])],
    "mrpc": [("train", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
              ["1\t702876\t702977\tAmrozi accused his brother .\tReferring to him , Amrozi accused his brother ."]),
             ("dev", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String", ["0\t1\t2\tHe said .\tShe said ."]),
             ("test", "index\t#1 ID\t#2 ID\t#1 String\t#2 String", ["0\t1089874\t1089925\tA b .\tC d ."])],
    "stsb": [("train", "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
              ["0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA plane is taking off.\tAn air plane is taking "
               "off.\t5.000"]),
             ("dev", "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
              ["0\tmain-captions\tMSRvid\t2012test\t0000\tnone\tnone\tA man with a hard hat.\tA man wears a hat.\t2.5"]),
             ("test", "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2",
              ["0\tmain-captions\tMSRvid\t2012test\t0024\tnone\tnone\tA girl is styling her hair.\tA girl is "
               "brushing her hair."])],
    "qqp": [("train", "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate", ["133273\t213221\t213222\tHow?\tWhy?\t0"]),
            ("dev", "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate", ["201359\t303345\t303346\tWhy?\tWhy?\t1"]),
            ("test", "id\tquestion1\tquestion2", ["0\tWould the idea work?\tIs it a good idea?"])],
    "mnli": [("train", MNLI_HEAD + "\tlabel1\tgold_label",
              ["0\t31193\t31193n\tgovernment\t( ( a ) )\t( b )\t(ROOT (a))\t(ROOT (b))\tConceptually cream skimming."
               "\tProduct and geography.\tneutral\tneutral"]),
             ("dev_matched", MNLI_HEAD + "\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label",
              ["0\t63735\t63735n\tslate\t( a )\t( b )\t(ROOT a)\t(ROOT b)\tThe new rights.\tEveryone loves them."
               "\tneutral\tentailment\tneutral\tneutral\tneutral\tneutral"]),
             ("dev_mismatched", MNLI_HEAD + "\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label",
              ["0\t75290\t75290c\tletters\t( a )\t( b )\t(ROOT a)\t(ROOT b)\tYour contribution helped.\tIt did not."
               "\tcontradiction\tcontradiction\tcontradiction\tcontradiction\tcontradiction\tcontradiction"]),
             ("test_matched", MNLI_HEAD, ["0\t31493\t31493\ttravel\t( a )\t( b )\t(ROOT a)\t(ROOT b)\tHi.\tHello."]),
             ("test_mismatched", MNLI_HEAD, ["0\t1\t1\tverbatim\t( a )\t( b )\t(ROOT a)\t(ROOT b)\tOK.\tFine."])],
    "qnli": [("train", "index\tquestion\tsentence\tlabel", ["0\tWhen?\tIn 1990.\tentailment"]),
             ("dev", "index\tquestion\tsentence\tlabel", ["0\tWho?\tNobody knows.\tnot_entailment"]),
             ("test", "index\tquestion\tsentence", ["0\tWhat?\tThat."])],
    "rte": [("train", "index\tsentence1\tsentence2\tlabel", ["0\tNo weapons found.\tWeapons found.\tnot_entailment"]),
            ("dev", "index\tsentence1\tsentence2\tlabel", ["0\tDana won.\tDana took part.\tentailment"]),
            ("test", "index\tsentence1\tsentence2", ["0\tA.\tB."])],
    "wnli": [("train", "index\tsentence1\tsentence2\tlabel", ["0\tI stuck a pin.\tI stuck it.\t1"]),
             ("dev", "index\tsentence1\tsentence2\tlabel", ["0\tThe drain is clogged.\tThe hair is clogged.\t0"]),
             ("test", "index\tsentence1\tsentence2", ["0\tX.\tY."])],
}


def write(folder, name, header, rows):
    path = folder / f"{name}.tsv"
    path.write_text("".join(f"{line}\n" for line in ([header] if header else []) + rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_glue_format_is_read(tmp_path, name):
    t = glue.task(name)
    assert {f for f, _, _ in FORMATS[name]} == {"train", *t.dev_files, *t.test_files}
    for split, header, rows in FORMATS[name]:
        test = split.startswith("test")
        ex = glue.read_split(t, write(tmp_path, split, header, rows), test=test)
        fields = rows[0].split("\t")
        assert len(ex.text_a) == len(rows) and ex.text_a[0] in fields
        assert (ex.text_b is None) == (name in ("cola", "sst2"))
        if test:
            assert ex.labels is None and ex.ids == [r.split("\t")[0] for r in rows]
        elif t.labels is None:
            assert ex.labels[0] == float(fields[-1])
        else:
            assert t.labels[ex.labels[0]] == fields[-1 if name not in ("cola", "mrpc") else (1 if name == "cola" else 0)]


def test_the_fields_land_where_they_belong(tmp_path):
    mrpc = glue.read_split(glue.task("MRPC"), write(tmp_path, "train", *FORMATS["mrpc"][0][1:]))
    assert mrpc.text_a == ["Amrozi accused his brother ."]
    assert mrpc.text_b == ["Referring to him , Amrozi accused his brother ."] and list(mrpc.labels) == [1]
    cola = glue.read_split(glue.task("cola"), write(tmp_path, "train", *FORMATS["cola"][0][1:]))
    assert cola.text_a == ["Our friends won't buy this analysis.", "They drank the pub."]
    assert list(cola.labels) == [1, 0]
    mnli = glue.read_split(glue.task("mnli"), write(tmp_path, "dev_matched", *FORMATS["mnli"][1][1:]))
    assert (mnli.text_a, mnli.text_b, list(mnli.labels)) == (["The new rights."], ["Everyone loves them."], [2])


@pytest.mark.parametrize("task, header, line, says", [
    ("rte", "index\tsentence1\tsentence2\tlabel", "0\tA.\tB.\tmaybe",
     "train.tsv, line 2, column 'label': 'maybe' is not one of rte's labels (entailment, not_entailment)"),
    ("rte", "index\tsentence1\tsentence2\tlabel", "0\tA.\tB.", "train.tsv, line 2: 3 columns, where rte's format has"),
    ("rte", "index\tsentence1\tlabel", "0\tA.\tentailment", "train.tsv, line 1: no column 'sentence2' in the header"),
    ("stsb", "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
     "0\tg\tf\ty\to\ts\ts\tA.\tB.\t7.5", "train.tsv, line 2, column 'score': '7.5' is not a similarity score"),
    ("stsb", "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
     "0\tg\tf\ty\to\ts\ts\tA.\tB.\tnan", "column 'score': 'nan' is not a similarity score"),
    ("cola", None, "gj04\tyes\t\tA sentence.", "train.tsv, line 1, column 2: 'yes' is not one of cola's labels"),
    ("sst2", "sentence\tlabel", None, "train.tsv: no examples below its header line"),
])
def test_a_hostile_file_is_refused_in_one_line(tmp_path, task, header, line, says):
    path = write(tmp_path, "train", header, [line] if line else [])
    with pytest.raises(glue.TaskDataError) as err:
        glue.read_split(glue.task(task), path)
    assert says in str(err.value) and "\n" not in str(err.value) and str(path) in str(err.value)


def test_a_missing_file_an_unknown_task_and_bytes_that_are_not_utf8(tmp_path):
    with pytest.raises(glue.TaskDataError, match=r"dev_matched.tsv: not found \(mnli reads train.tsv, dev_matched"):
        glue.read_split(glue.task("mnli"), tmp_path / "dev_matched.tsv")
    with pytest.raises(glue.TaskDataError, match="no GLUE task 'squad'"):
        glue.task("squad")
    (tmp_path / "train.tsv").write_bytes(b"sentence\tlabel\n\xff\xfe\t1\n")
    with pytest.raises(glue.TaskDataError, match="cannot be read as UTF-8"):
        glue.read_split(glue.task("sst2"), tmp_path / "train.tsv")


def test_windows_line_ends_are_read_as_line_ends(tmp_path):
    (tmp_path / "train.tsv").write_bytes(b"sentence\tlabel\r\na film\t1\r\n")
    ex = glue.read_split(glue.task("sst2"), tmp_path / "train.tsv")
    assert ex.text_a == ["a film"] and list(ex.labels) == [1]


@pytest.mark.parametrize("seed", range(5))
def test_the_metrics_are_scikit_learns_and_scipys(seed):
    sklearn_metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn is the metrics' reference: "
                                                                     "pip install -e '.[test]'")
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 400))
    for k in (2, 3):
        gold, pred = rng.integers(0, k, n), rng.integers(0, k, n)
        agree = rng.random(n) < 0.5                              # better than chance, as a model is
        pred[agree] = gold[agree]
        assert metrics.accuracy(pred, gold) == pytest.approx(sklearn_metrics.accuracy_score(gold, pred), abs=1e-15)
        assert metrics.matthews(pred, gold) == pytest.approx(sklearn_metrics.matthews_corrcoef(gold, pred), abs=1e-12)
        if k == 2:
            assert metrics.f1(pred, gold) == pytest.approx(sklearn_metrics.f1_score(gold, pred), abs=1e-12)
    scores = rng.integers(0, 11, n) / 2.0                        # STS-B's scores, ties and all
    guess = scores + rng.normal(0, 1.5, n).round(1)
    assert metrics.pearson(guess, scores) == pytest.approx(scipy.stats.pearsonr(guess, scores)[0], abs=1e-12)
    assert metrics.spearman(guess, scores) == pytest.approx(scipy.stats.spearmanr(guess, scores)[0], abs=1e-12)


def test_metrics_at_their_edges():
    assert metrics.f1([0, 0], [0, 0]) == 0.0 and metrics.matthews([1, 1], [1, 1]) == 0.0
    assert metrics.pearson([1.0, 1.0], [0.0, 2.0]) == 0.0
    assert metrics.matthews([0, 1, 0, 1], [0, 1, 0, 1]) == 1.0 and metrics.matthews([1, 0], [0, 1]) == -1.0
    assert list(metrics.ranks(np.array([3.0, 1.0, 3.0, 2.0]))) == [3.5, 1.0, 3.5, 2.0]
    with pytest.raises(ValueError, match="same length"):
        metrics.accuracy([1, 0], [1])


def test_an_example_too_long_is_cut_as_bert_cuts_a_pair_and_counted():
    from minibert.data.tokenizer import WordPieceTokenizer
    from minibert.finetune.features import encode

    tok = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"])
    pairs = glue.Examples(["a a a a a", "a"], ["b b", "c"], np.array([0, 1]), None, "here")
    f = encode(tok, pairs, 8)                 # the first pair has 5 + 2 + 3 tokens: the longer A loses two
    assert f.truncated == 1
    assert [tok.vocab[i] for i in f.input_ids[0]] == ["[CLS]", "a", "a", "a", "[SEP]", "b", "b", "[SEP]"]
    assert f.token_type_ids[0] == [0, 0, 0, 0, 0, 1, 1, 1] and len(f.input_ids[1]) == 5
    assert encode(tok, pairs, 10).truncated == 0
