"""The committed results files that notebooks 6, 7 and 8 read agree with their sources and prose.

No kernel and no training: these checks read committed files only.

* ``benchmarks/results/h100_step.json`` (notebook 7's GPU table) holds the figures of
  ``benchmarks/RESULTS.md``, section 0b, from which it was copied;
* the committed metrics files exist, are small, and say what their READMEs say;
* ``notebooks/pretrained/fine_tuning_sweep.json`` (notebook 8's table of settings) is complete,
  and notebook 8's prose counts its pairs as the table does;
* the values that the notebooks' check cells compare a new run against are the ones their
  committed runs printed;
* notebook 12's ablation results: the built-in corpus's file is complete, and every run of the
  WikiText-2 file went to its end (that file may still lack seeds, and says whether it does).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
PRETRAINED = NOTEBOOKS / "pretrained"
MAX_BYTES = 200_000


def notebook(name):
    cells = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))["cells"]
    prose = " ".join(" ".join("".join(c["source"]).split()) for c in cells if c["cell_type"] == "markdown")
    code = [c for c in cells if c["cell_type"] == "code"]
    return prose, code


def printed(cell):
    return "".join("".join(o["text"]) if isinstance(o["text"], list) else o["text"]
                   for o in cell.get("outputs", []) if o["output_type"] == "stream")


def cell_with(code, marker):
    found = [c for c in code if marker in "".join(c["source"])]
    assert len(found) == 1, f"{len(found)} code cells contain {marker!r}"
    return found[0]


def read_metrics(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# ------------------------------------------------------------------------ notebook 7
def results_md_rows():
    """RESULTS.md's GPU rows ('| small, 128 | ...'), in the order of its tables: before, after."""
    rows = {}
    for line in (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| (small|base), (128|512) \| ([\d.]+) \| ([\d.]+) \| ?([\d.]*) ?\| \**([\d.]+)x", line)
        if m:
            rows.setdefault((m[1], int(m[2])), []).append(
                (float(m[3]), float(m[4]), float(m[5]) if m[5] else None, float(m[6])))
    return rows


def test_h100_results_file_holds_the_figures_of_results_md():
    h100 = json.loads((ROOT / "benchmarks" / "results" / "h100_step.json").read_text(encoding="utf-8"))
    rows = results_md_rows()
    for k, table in enumerate(["before_fused_kernels", "after_fused_kernels"]):   # RESULTS.md's order
        assert len(h100["tables"][table]) == 4
        for r in h100["tables"][table]:
            assert rows[r["preset"], r["seq_len"]][k] == \
                (r["minibert_ms"], r["torch_gathered_ms"], r["torch_stock_ms"], r["ratio"]), (table, r)
    assert h100["source"]["recorded_in_commit"].startswith("56702a7")


def test_notebook_7_prints_no_error_text():
    _, code = notebook("07_gpu_with_cupy.ipynb")
    for cell in code:
        for word in ("Error", "Traceback", "cudaError"):
            assert word not in printed(cell), f"notebook 7 prints {word!r}"


# ------------------------------------------------------------------------ notebook 6
CURVES = ["adamw", "bert-adam", "adamw-no-warmup", "bert-adam-no-warmup", "bert-adam-lr1e-3",
          "lr3e-2", "lr3e-1", "lr1", "overfit"]


@pytest.mark.parametrize("name", CURVES)
def test_curves_are_committed_small_and_documented(name):
    path = PRETRAINED / "curves" / f"{name}.jsonl"
    assert path.stat().st_size < MAX_BYTES
    records = read_metrics(path)
    assert {r["kind"] for r in records} == {"train", "eval"}
    assert f"--out runs/curves/{name}\n" in (PRETRAINED / "curves" / "README.md").read_text(encoding="utf-8")


def test_docs_bert_h64_metrics_match_its_readme():
    path = PRETRAINED / "docs-bert-h64" / "metrics.jsonl"
    assert path.stat().st_size < MAX_BYTES
    evals = [r for r in read_metrics(path) if r["kind"] == "eval"]
    readme = " ".join((PRETRAINED / "docs-bert-h64" / "README.md").read_text(encoding="utf-8").split())
    last, by_step = evals[-1], {e["step"]: e for e in evals}
    assert last["step"] == 5000
    assert f"| MLM loss (nats per masked token) | **{last['mlm_loss']:.2f}** | {last['unigram_baseline']:.2f}:" in readme
    assert f"| MLM accuracy | **{last['mlm_acc']:.1%}** |" in readme
    assert f"| NSP accuracy | **{last['nsp_acc']:.1%}** |" in readme
    assert f"on {last['n_masked']:,} masked tokens and {last['n_pairs']} sentence pairs" in readme
    way = ", ".join(f"{by_step[s]['mlm_loss']:.2f} at {'step ' if s == 1000 else ''}{s:,}" for s in (1000, 2000, 3000))
    assert f"On the way: held-out MLM loss {way}, {by_step[4000]['mlm_loss']:.2f} at 4,000" in readme


# ------------------------------------------------------------------------ notebook 8
def test_fine_tuning_sweep_is_complete_and_the_prose_counts_it():
    sweep = json.loads((PRETRAINED / "fine_tuning_sweep.json").read_text(encoding="utf-8"))
    acc = {(r["lr"], r["epochs"], r["start"], r["seed"]): r["final_accuracy"] for r in sweep["runs"]}
    settings = sorted({(lr, epochs) for lr, epochs, _, _ in acc})
    assert len(acc) == len(settings) * 3 * 2
    ahead = behind = tied = 0
    for lr, epochs in settings:
        if lr < 1e-3:
            continue
        for seed in (0, 1, 2):
            a, b = acc[lr, epochs, "pre-trained", seed], acc[lr, epochs, "random init", seed]
            ahead, tied, behind = ahead + (a > b), tied + (a == b), behind + (a < b)
    # every run measured on the development sentences too, as often as on the test sentences: a setting is
    # chosen on those (the notebook's lines under its table), then reported on the test sentences
    for r in sweep["runs"]:
        dev = r["dev_accuracy_every_2_epochs"]
        assert len(dev) == len(r["accuracy_every_2_epochs"]) and r["final_dev_accuracy"] == dev[-1]
        assert all(0 <= a <= 1 and abs(400 * a - round(400 * a)) < 1e-9 for a in dev)     # of 400 sentences
    prose, _ = notebook("08_fine_tuning.ipynb")
    assert tied == 0
    assert f"the pre-trained start is ahead in {ahead} of the {ahead + behind} pairs and behind in {behind}" in prose


def test_notebook_8_checks_compare_with_the_committed_run():
    _, code = notebook("08_fine_tuning.ipynb")
    table = printed(cell_with(code, "mean over the seeds"))
    means = dict(re.findall(r"^\s*(pre-trained|random init)\s+mean over the seeds:.* ([\d.]+) at the end$", table, re.M))
    check = "".join(cell_with(code, "committed = {")["source"])
    for name, value in means.items():
        assert f'"{name}": {value}' in check, name
    tags = printed(cell_with(code, "token tagging after"))
    rows = re.findall(r"^\s*(pre-trained|random init)\s+seed \d:\s+([\d.]+)\s+([\d.]+)$", tags, re.M)
    check = "".join(cell_with(code, "committed_tags = {")["source"])
    for name in ("pre-trained", "random init"):
        values = [(float(a), float(b)) for n, a, b in rows if n == name]
        mean = tuple(round(sum(v[k] for v in values) / len(values), 1) for k in (0, 1))
        committed = tuple(float(x) for x in re.search(rf'"{name}": \(([\d.]+), ([\d.]+)\)', check).groups())
        assert all(abs(m - c) <= 0.1 + 1e-9 for m, c in zip(mean, committed)), (name, mean, committed)


def test_the_ablation_results_of_notebook_12_are_complete():
    """Every setting of tools/make_ablation_results.py, three seeds each, run to the end; NSP numbers
    only where NSP was trained, and held-out numbers on the default's batches for every run."""
    path = PRETRAINED / "ablations.json"
    assert path.stat().st_size < MAX_BYTES
    results = json.loads(path.read_text(encoding="utf-8"))
    flags = {name: a["flag"] for name, a in results["ablations"].items()}
    assert flags == {"default": "", "no NSP": "--no-nsp", "30% masked": "--mlm-probability 0.3",
                     "whole words": "--whole-word-masking", "pre-LN": "--pre-ln", "no dropout": "--dropout 0"}
    nsp = results["columns"].index("nsp_acc")
    for name, a in results["ablations"].items():
        assert [r["seed"] for r in a["runs"]] == results["seeds"] == [0, 1, 2], name
        for run in a["runs"]:
            assert run["evals"][0][0] == 0 and run["evals"][-1][0] == results["steps"], name
            assert all((e[nsp] is None) == (name == "no NSP") for e in run["evals"]), name
            assert 0 < run["common"]["mlm_acc"] < 1 and run["common"]["mlm_loss"] > 0, name


def test_the_wikitext2_ablation_results_of_notebook_12_hold_whole_runs():
    """The WikiText-2 file may lack seeds (its "complete" says whether it does), but every run it holds
    went to the end, under the settings and columns of the built-in file, and notebook 12 reads it."""
    path = PRETRAINED / "ablations_wikitext2.json"
    assert path.stat().st_size < MAX_BYTES
    results = json.loads(path.read_text(encoding="utf-8"))
    builtin = json.loads((PRETRAINED / "ablations.json").read_text(encoding="utf-8"))
    assert results["columns"] == builtin["columns"], "notebook 12 reads both files with one column index"
    assert results["recipe"]["corpus"] == "wikitext-2" and results["recipe"]["config"] == "mini"
    assert results["recipe"]["steps"] == results["steps"]
    flags = {name: a["flag"] for name, a in builtin["ablations"].items()}
    assert {name: a["flag"] for name, a in results["ablations"].items()}.items() <= flags.items()
    nsp = results["columns"].index("nsp_acc")
    whole = set(results["ablations"]) == set(flags)
    for name, a in results["ablations"].items():
        seeds = [r["seed"] for r in a["runs"]]
        assert seeds == sorted(set(seeds)) and set(seeds) <= set(results["seeds"]), name
        whole = whole and seeds == results["seeds"]
        for run in a["runs"]:
            assert run["evals"][0][0] == 0 and run["evals"][-1][0] == results["steps"], name
            assert all((e[nsp] is None) == (name == "no NSP") for e in run["evals"]), name
            assert 0 < run["common"]["mlm_acc"] < 1 and run["common"]["mlm_loss"] > 0, name
    assert results["complete"] is whole, "the file's \"complete\" says whether every setting has every seed"
    cells = json.loads((NOTEBOOKS / "12_experiments.ipynb").read_text(encoding="utf-8"))["cells"]
    assert any("pretrained/ablations_wikitext2.json" in "".join(c["source"]) for c in cells if c["cell_type"] == "code")
