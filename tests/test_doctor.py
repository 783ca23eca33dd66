"""``minibert doctor``: the right verdict on runs broken on purpose and on healthy ones.

The runs of ``tests/data/doctor/`` are real ``minibert pretrain`` runs of ``make demo``'s recipe
with one thing changed (``tools/make_doctor_fixtures.py`` made them; its docstring says how the
labels were broken); only their ``run.json`` and ``metrics.jsonl`` are kept. Two short runs are
made here, live: one whose end the command line reports, one whose batches come slowly.
"""
import contextlib
import importlib.util
import io
import json
import math
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from minibert.cli import main
from minibert.train import TrainArgs, pretrain
from minibert.train import data as train_data
from minibert.train import doctor as doctor_module
from minibert.train.doctor import after_pretrain, diagnose, summary_after_run
from minibert.train.doctor_health import check_loss_scale, check_throughput, measure_bare_step
from minibert.train.doctor_references import REFERENCES
from minibert.train.run_facts import facts_from_corpus
from minibert.train.run_log import EARLY, OK, PROBLEM, UNCHECKED, VERDICTS, WARNING, RunLog, read_run
from test_train import small_args

FIXTURES = Path(__file__).resolve().parent / "data" / "doctor"
SHORT = {"MLM": "mlm", "NSP": "nsp", "memorising": "memorising", "repeated pairs": "pairs", "data": "data",
         "stability": "stability",
         "learning rate and warmup": "schedule", "throughput": "throughput", "against the reference runs": "reference"}

# the right verdict of every check on every case (see tests/data/doctor/README.md for why each is right)
ALL_OK = dict(mlm=OK, nsp=OK, memorising=OK, pairs=OK, data=OK, stability=OK, schedule=OK, throughput=OK,
              reference=OK)
EXPECTED = {
    "healthy": ALL_OK,
    # held-out MLM at the unigram baseline and NSP at its prior (the 50% trap), the rate named as the
    # cause; the loss rose during the warmup; far above the reference band
    "lr-10x": dict(ALL_OK, mlm=PROBLEM, nsp=PROBLEM, stability=WARNING, schedule=PROBLEM, reference=WARNING),
    # a loss spike of 1.4 nats at step 40 (the gradient norm 4.5), and the missing warmup named as its cause
    "no-warmup": dict(ALL_OK, stability=PROBLEM, schedule=PROBLEM),
    # at the unigram baseline with the usual learning rate: the labels are suspected, not the rate
    "mlm-shuffled": dict(ALL_OK, mlm=PROBLEM, nsp=PROBLEM, reference=WARNING),
    # right on every training pair from the first 100 steps, 50% held out; not called memorising
    "nsp-constant": dict(ALL_OK, nsp=PROBLEM),
    # every held-out document is a training document: only the data check can tell (a file corpus
    # has no reference runs)
    "one-document": dict(ALL_OK, data=PROBLEM, reference=UNCHECKED),
    # each pair seen 62 times, 98% of them right in training against 61% held out
    "dupe-1-long": dict(ALL_OK, pairs=WARNING),
    # the same steps with ten cuts of the text: each pair seen 6 times
    "dupe-10-long": ALL_OK,
    # WikiText-2 with mini on a GPU, 1,500 steps: learning on both tasks; no reference runs of this recipe
    "wikitext2-mini-gpu": dict(ALL_OK, reference=UNCHECKED),
}


# and what the evidence or the advice must say for the verdict to be the right one for the right reason
SAYS = {
    ("lr-10x", "schedule"): "10 times the reference for the tiny preset",
    ("lr-10x", "nsp"): "the 50% trap",
    ("no-warmup", "schedule"): "no warmup",
    ("mlm-shuffled", "mlm"): "are the MLM labels the tokens that were hidden",
    ("nsp-constant", "nsp"): "far faster than pairs can be learned",
    ("one-document", "data"): "10 of the 10 held-out documents also occur",
    ("dupe-1-long", "pairs"): "--dupe-factor 7",
    ("dupe-10-long", "pairs"): "each pair came back about 6 times",
    ("healthy", "reference"): "the 3 reference runs of this recipe",
    ("wikitext2-mini-gpu", "mlm"): "0.70 nats below the baseline",
    ("wikitext2-mini-gpu", "nsp"): "8.0 standard errors above chance",
}


def test_the_wikitext2_run_shared_its_gpu_and_the_throughput_check_says_so():
    """The README's WikiText-2 report: that run trained beside five others on one GPU, and a bare step
    timed afterwards (962,556 positions per second) showed it went at 17% of the GPU's speed."""
    log = read_run(FIXTURES / "wikitext2-mini-gpu")
    check = check_throughput(log, dict(tokens_per_s=962_556, rows=128))
    assert check.verdict == WARNING and "the run went at 17% of the speed of a bare step" in check.evidence
    assert "median 155,113 tokens per second" in check.evidence


def verdicts(result) -> dict:
    return {SHORT[c.name.split(":")[0]]: c.verdict for c in result.checks}


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIBERT_CACHE", str(tmp_path / "cache"))


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_each_verdict_on_runs_broken_on_purpose_and_healthy_ones(case):
    result = diagnose(FIXTURES / case, plot=False, measure=False)
    assert verdicts(result) == EXPECTED[case], "\n" + result.report()
    assert result.status == int(PROBLEM in EXPECTED[case].values())
    for c in result.checks:       # every verdict but ok says what to try
        assert c.evidence and (c.advice or c.verdict in (OK, EARLY, UNCHECKED)), c
        said = SAYS.get((case, SHORT[c.name.split(":")[0]]))
        assert said is None or said in c.evidence + c.advice, (said, c)


def test_the_reference_runs_are_healthy_against_each_other():
    runs = sorted(REFERENCES.glob("*/*/run.json"))
    assert len(runs) >= 3
    for run_json in runs:
        result = diagnose(run_json.parent, plot=False, measure=False)
        assert set(verdicts(result).values()) == {OK}, result.report()


# ------------------------------------------------------- two live runs


def small_run(corpus_file, out, **kw):
    """test_train's small run, longer: 40 steps of 8 sequences, records every 5."""
    longer = dict(steps=40, batch_size=8, warmup=4, eval_every=20, save_every=40, log_every=5, eval_instances=16)
    return small_args(corpus_file, out, **{**longer, **kw})


def as_command(a: TrainArgs) -> list:
    flags = ["pretrain", "--corpus", a.corpus, "--out", a.out, "--no-progress", "--no-plot"]
    for name in ("vocab_size", "steps", "batch_size", "seq_len", "lr", "warmup", "eval_every", "save_every",
                 "log_every", "eval_instances"):
        flags += [f"--{name.replace('_', '-')}", str(getattr(a, name))]
    return flags


@pytest.fixture(scope="module")
def live_run(corpus_file, tmp_path_factory):
    """A short real run through the command line: its folder, and what the command printed."""
    out = tmp_path_factory.mktemp("live") / "run"
    with pytest.MonkeyPatch.context() as m:
        m.setenv("MINIBERT_CACHE", str(out.parent / "cache"))
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = main(as_command(small_run(corpus_file, out)))
    assert code == 0
    return out, printed.getvalue()


def test_pretrain_ends_with_the_doctors_line(live_run):
    out, printed = live_run
    last = printed.strip().splitlines()[-1]
    assert last.startswith("doctor: ") and f"minibert doctor {out}" in last, printed
    # 40 steps: too few for a verdict on learning, and no problem
    assert "not enough data yet" in last and "problem" not in last.split(";")[0]


def test_the_command_writes_doctor_png_and_json(live_run, capsys):
    out, _ = live_run
    assert main(["doctor", str(out)]) == 0
    report = capsys.readouterr().out
    assert (out / "doctor.png").stat().st_size > 10_000 and report.strip().splitlines()[-1].startswith("doctor: ")
    assert main(["doctor", str(out), "--json", "--no-plot"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["status"] == 0 and len(answer["checks"]) == 9
    assert all(c["verdict"] in VERDICTS and c["evidence"] for c in answer["checks"])
    mlm = next(c for c in answer["checks"] if c["name"].startswith("MLM"))
    assert mlm["numbers"]["ln_v"] == pytest.approx(math.log(json.loads((out / "run.json").read_text())
                                                            ["data"]["vocab_size"]))


def test_an_old_run_folder_is_diagnosed_with_its_facts_computed_again(live_run, tmp_path):
    out, _ = live_run
    recorded = json.loads((out / "run.json").read_text())
    old = tmp_path / "old"
    old.mkdir()
    for name in ("metrics.jsonl", "vocab.txt"):
        shutil.copyfile(out / name, old / name)
    (old / "run.json").write_text(json.dumps({k: v for k, v in recorded.items() if k not in ("data", "model")}))
    log = read_run(old)
    assert "computed again" in log.notes[0]
    assert log.data == dict(recorded["data"], unigram_baseline=None)     # the same facts, from the corpus
    assert facts_from_corpus(recorded["args"], old) == log.data
    # without its vocabulary they cannot be computed: the checks that need them say so, the rest answer
    (old / "vocab.txt").unlink()
    result = diagnose(old, plot=False, measure=False)
    assert "could not be computed" in result.log.notes[0] and "vocab.txt" in result.log.notes[0]
    assert verdicts(result)["data"] == UNCHECKED
    assert "not known" in next(c for c in result.checks if c.name.startswith("NSP")).evidence
    assert result.status == 0 and result.log.vocab_size is None


def test_a_slow_data_pipeline_is_a_throughput_warning(corpus_file, tmp_path, monkeypatch, live_run):
    real = train_data.BatchStream.next_batch

    def slow(self):
        time.sleep(0.3)                  # a data pipeline far slower than the steps it feeds
        return real(self)
    monkeypatch.setattr(train_data.BatchStream, "next_batch", slow)
    a = small_run(corpus_file, tmp_path / "slow", steps=10, batch_size=4, eval_every=10, log_every=2)
    pretrain(a, log=lambda *args: None)
    check = next(c for c in diagnose(a.out, plot=False, measure=False).checks if c.name == "throughput")
    assert check.verdict == WARNING and "data pipeline" in check.evidence, check
    fed = next(c for c in diagnose(live_run[0], plot=False, measure=False).checks if c.name == "throughput")
    assert fed.numbers["data_wait"] < 0.2 < check.numbers["data_wait"]


def test_a_bare_step_is_timed_and_a_run_far_below_it_is_a_warning(live_run):
    log = read_run(live_run[0])
    bare = measure_bare_step(log, budget_s=0.3)
    assert bare["tokens_per_s"] > 0 and 4 <= bare["rows"] <= 8
    measured = check_throughput(log, "not timed").numbers
    run_speed = measured["tokens_per_s"] / measured["fill"]         # positions per second, padding included
    assert check_throughput(log, dict(tokens_per_s=3 * run_speed, rows=8)).verdict == WARNING
    assert check_throughput(log, dict(tokens_per_s=run_speed, rows=8)).verdict == OK
    if importlib.util.find_spec("cupy") is None:                    # a GPU run, diagnosed where there is none
        gpu_run = RunLog(log.path, dict(log.args, device="cuda"), log.data, log.model, log.train, log.evals)
        assert "cannot be built here" in measure_bare_step(gpu_run)


# ------------------------------------------------------- the loss scale (records written here)


def scaled(scales, skipped) -> RunLog:
    """A mixed-precision run's train records with these loss scales and skipped steps, 100 steps apart.

    Written here: a mixed-precision run on the CPU does not collapse its scale within minutes.
    """
    train = [dict(kind="train", step=100 * (i + 1), loss=6.0, mlm_loss=5.4, nsp_acc=0.7, grad_norm=1.0,
                  tokens_per_s=1e4, data_wait=0.0, loss_scale=s, skipped_steps=k)
             for i, (s, k) in enumerate(zip(scales, skipped))]
    return RunLog(Path("."), dict(mixed_precision=True, steps=100 * len(scales)), None, None, train, [])


def test_the_loss_scale_check_sees_a_collapse_and_many_skipped_steps():
    assert check_loss_scale(scaled([65536.0, 65536.0, 131072.0], [0, 0, 0])).verdict == OK
    assert check_loss_scale(scaled([65536.0, 32768.0, 32768.0], [0, 1, 0])).verdict == OK       # 0.3%
    assert check_loss_scale(scaled([32768.0, 16384.0, 8192.0], [5, 4, 3])).verdict == WARNING   # 4%
    assert check_loss_scale(scaled([1024.0, 16.0, 0.5], [6, 6, 7])).verdict == PROBLEM        # below 1
    assert check_loss_scale(scaled([65536.0] * 3, [30, 25, 20])).verdict == PROBLEM            # 25% lost
    assert check_loss_scale(scaled([], [])).verdict == EARLY


# ------------------------------------------------------- bad arguments, and a doctor that fails


def test_what_is_not_a_run_is_one_line_and_status_2(tmp_path, capsys):
    (tmp_path / "file.txt").write_text("text")
    (tmp_path / "empty").mkdir()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "run.json").write_text("{not json")
    torn = tmp_path / "torn"
    shutil.copytree(FIXTURES / "healthy", torn)
    lines = (torn / "metrics.jsonl").read_text().splitlines()
    (torn / "metrics.jsonl").write_text("\n".join(lines[:3] + ["{\"kind\": "] + lines[3:]) + "\n")
    for folder, said in [(tmp_path / "nowhere", "no such folder"), (tmp_path / "file.txt", "not a folder"),
                         (tmp_path / "empty", "no run.json"), (broken, "cannot be read"), (torn, "line 4")]:
        assert main(["doctor", str(folder)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and said in err and "Traceback" not in err, err
    with pytest.raises(SystemExit) as exit_:
        main(["doctor"])                                        # no folder at all: argparse's status 2
    assert exit_.value.code == 2


def test_a_torn_last_line_is_read_like_a_run_reads_it(tmp_path):
    torn = tmp_path / "torn"
    shutil.copytree(FIXTURES / "healthy", torn)
    with open(torn / "metrics.jsonl", "a") as f:
        f.write("{\"kind\": \"train\", \"st")                   # cut off mid-write
    assert read_run(torn).step == read_run(FIXTURES / "healthy").step


def test_records_lost_behind_the_checkpoints_are_said(live_run, tmp_path):
    # a metrics.jsonl deleted or cut read as a run that had not logged a step yet
    out, _ = live_run
    assert not any("records were lost" in note for note in read_run(out).notes)
    for name, keep, said in (("deleted", None, "metrics.jsonl is missing"), ("cut", 3, "metrics.jsonl ends at step 10")):
        folder = tmp_path / name
        shutil.copytree(out, folder)
        lines = (folder / "metrics.jsonl").read_text().splitlines(keepends=True)
        if keep is None:
            (folder / "metrics.jsonl").unlink()
        else:
            (folder / "metrics.jsonl").write_text("".join(lines[:keep]))
        notes = read_run(folder).notes
        assert f"{said}, but the run has a checkpoint at step 40: records were lost" in " ".join(notes), notes
        assert not any("has not logged a step" in note for note in notes)


def test_the_line_after_a_run_never_fails_the_run(monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the doctor")
    monkeypatch.setattr(doctor_module, "diagnose", broken)
    assert after_pretrain(SimpleNamespace(out=FIXTURES / "healthy", stopped_by=None), status=0) == 0
    assert capsys.readouterr().out == "doctor: could not diagnose the run (RuntimeError: a bug in the doctor)\n"
    assert after_pretrain(SimpleNamespace(out=FIXTURES / "healthy", stopped_by="stdout closed"), status=0) == 0
    assert capsys.readouterr().out == ""
    monkeypatch.undo()
    assert summary_after_run(FIXTURES / "healthy").startswith("doctor: no problem found")


def test_a_demo_folder_with_doctor_png_is_still_the_demos_to_replace():
    from minibert.demo import _written_by_a_run
    assert _written_by_a_run("doctor.png") and _written_by_a_run(".doctor.png.tmp")
    assert _written_by_a_run(".run.json.tmp")      # run.json is written again, whole, once the data is ready


def test_the_committed_runs_are_small_and_listed():
    for run_json in [*FIXTURES.glob("*/run.json"), *REFERENCES.glob("*/*/run.json")]:
        folder = run_json.parent
        assert sorted(p.name for p in folder.iterdir()) == ["metrics.jsonl", "run.json"], folder
        assert (folder / "metrics.jsonl").stat().st_size < 100_000, folder
    listed = (FIXTURES / "README.md").read_text(encoding="utf-8")
    assert {p.parent.name for p in FIXTURES.glob("*/run.json")} == set(EXPECTED)
    assert all(f"`{case}`" in listed for case in EXPECTED)


def _edit_line(folder, n, change):
    """Record n (1-based) of metrics.jsonl changed by ``change(record)``, the rest as they were."""
    lines = (folder / "metrics.jsonl").read_text().splitlines()
    record = json.loads(lines[n - 1])
    change(record)
    lines[n - 1] = json.dumps(record)
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")


def _edit_run(folder, change):
    info = json.loads((folder / "run.json").read_text())
    change(info)
    (folder / "run.json").write_text(json.dumps(info))


def _first(folder, kind):
    lines = (folder / "metrics.jsonl").read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if json.loads(line)["kind"] == kind)


@pytest.mark.parametrize("damage,said", [
    (lambda f: _edit_line(f, _first(f, "train"), lambda r: r.update(tokens_per_s=float("inf"))),
     "'tokens_per_s' is out of range (inf"),
    (lambda f: _edit_line(f, _first(f, "train"), lambda r: r.pop("tokens_per_s")), "'tokens_per_s' is missing"),
    (lambda f: _edit_line(f, _first(f, "eval"), lambda r: r.pop("unigram_baseline")), "'unigram_baseline' is missing"),
    (lambda f: _edit_run(f, lambda i: i["args"].update(batch_size=0)), "'batch_size' is out of range (0"),
    (lambda f: _edit_run(f, lambda i: i["model"].pop("intermediate_size")), "'intermediate_size' is missing"),
    (lambda f: _edit_run(f, lambda i: i["data"].update(train_tokens=float("inf"))), "'train_tokens' is out of range"),
    (lambda f: _edit_line(f, _first(f, "train"), lambda r: r.update(step=-5)), "'step' is out of range (-5"),
    (lambda f: _edit_line(f, _first(f, "train"), lambda r: r.update(step=10 ** 18)), "'step' is out of range (1000000"),
    (lambda f: _edit_line(f, _first(f, "train"), lambda r: r.update(lr="fast")), "'lr' is not a number"),
], ids=["tokens inf", "no tokens_per_s", "no unigram_baseline", "batch_size 0", "no intermediate_size",
        "train_tokens inf", "step -5", "step 1e18", "lr a string"])
def test_a_damaged_record_is_one_line_naming_file_line_and_field(tmp_path, capsys, damage, said):
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "healthy", run)
    damage(run)
    assert main(["doctor", str(run), "--no-plot"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err and "damaged" in err and "Traceback" not in err, err
    assert str(run) in err


def test_nan_losses_are_a_stability_problem(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "healthy", run)
    lines = (run / "metrics.jsonl").read_text().splitlines()
    trains = [n for n, line in enumerate(lines, 1) if json.loads(line)["kind"] == "train"]
    for n in trains[len(trains) // 2:]:
        _edit_line(run, n, lambda r: r.update(loss=float("nan"), mlm_loss=float("nan")))
    result = diagnose(run, plot=False, measure=False)
    stability = next(c for c in result.checks if c.name.startswith("stability"))
    assert stability.verdict == "problem" and "nan" in stability.evidence.lower(), stability
    assert result.status == 1
