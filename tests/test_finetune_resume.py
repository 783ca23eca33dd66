"""``minibert finetune --resume``: a job stopped anywhere (inside a run, at a run's last step, by --stop-at
or by Ctrl-C) and resumed, once or several times, ends with the same files, byte for byte, as the job
that never stopped; a folder of another job, or of none, is refused in one line."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from minibert.cli import main
from test_finetune_cli import small_bert, sst2_folder

ROOT = Path(__file__).resolve().parents[1]
SEARCH = ["--search", "lr=2e-3,1e-3;epochs=2", "--seeds", "2", "--batch-size", "16", "--save-every", "3"]
OUTPUTS = ("metrics.jsonl", "results.json", "predictions/SST-2.tsv", "model/model.safetensors",
           "model/config.json", "model/vocab.txt")


def finetune(model, data, out, *extra) -> int:
    return main(["finetune", "--task", "sst2", "--model", str(model), "--data-dir", str(data), "--out", str(out),
                 *extra])


def assert_same_outputs(a: Path, b: Path) -> None:
    for name in OUTPUTS:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    return small_bert(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return sst2_folder(tmp_path_factory.mktemp("glue"), np.random.default_rng(7))


@pytest.mark.parametrize("mixed", [False, True], ids=["float32", "mixed-precision"])
def test_a_search_stopped_three_times_ends_as_the_one_that_never_stopped(pretrained, data, tmp_path, capsys, mixed):
    flags = SEARCH + (["--mixed-precision"] if mixed else [])
    assert finetune(pretrained, data, tmp_path / "whole", *flags) == 0
    out = tmp_path / "stopped"
    # 4 runs of 40 steps: stopped inside run 1, inside run 2, at the last step of run 2, then to the end
    for k, stop_at in enumerate([7, 45, 80, None]):
        extra = (["--resume"] if k else []) + (["--stop-at", str(stop_at)] if stop_at else [])
        assert finetune(pretrained, data, out, *flags, *extra) == 0
        err = capsys.readouterr().err
        if stop_at:
            run, step = divmod(stop_at - 1, 40)
            assert f"stopped (--stop-at) at step {step + 1} of run {run + 1} of 4" in err
            assert "continue with the same command and --resume" in err
    assert_same_outputs(tmp_path / "whole", out)
    assert not [p for p in (out / "checkpoints").iterdir() if p.name != "search.json"]


def test_a_job_stopped_by_ctrl_c_goes_on_where_it_stopped(pretrained, data, tmp_path):
    flags = ["--epochs", "12", "--batch-size", "16", "--lr", "1e-3", "--save-every", "1000"]
    command = [sys.executable, "-m", "minibert", "finetune", "--task", "sst2", "--model", str(pretrained),
               "--data-dir", str(data), "--out", str(tmp_path / "stopped"), *flags]
    job = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    log = tmp_path / "stopped" / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while not (log.is_file() and log.read_text().count('"step"') >= 5) and job.poll() is None:
        assert time.monotonic() < deadline, "the job took no step in 120 s"
        time.sleep(0.05)
    job.send_signal(signal.SIGINT)
    _, err = job.communicate(timeout=120)
    assert job.returncode == 0, err
    assert "stopped (SIGINT) at step" in err and "--resume" in err, err
    assert finetune(pretrained, data, tmp_path / "stopped", *flags, "--resume") == 0
    assert finetune(pretrained, data, tmp_path / "whole", *flags) == 0
    assert_same_outputs(tmp_path / "whole", tmp_path / "stopped")


def test_a_folder_of_another_job_or_none_is_refused_in_one_line(pretrained, data, tmp_path, capsys):
    out = tmp_path / "out"
    flags = ["--epochs", "1", "--batch-size", "16", "--lr", "1e-3"]
    assert finetune(pretrained, data, out, *flags, "--resume") == 2
    assert f"--resume: no fine-tuning job in {out}" in capsys.readouterr().err
    assert finetune(pretrained, data, out, *flags, "--stop-at", "5") == 0
    capsys.readouterr()

    def refused(*extra) -> str:
        assert finetune(pretrained, data, out, *extra) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        return err

    assert "already holds a fine-tuning job" in refused(*flags)
    assert "the runs differ (--lr" in refused("--epochs", "1", "--batch-size", "16", "--lr", "2e-3", "--resume")
    assert "max_seq_length: then 64, now 32" in refused(*flags, "--max-seq-length", "32", "--resume")
    changed = data.parent / "changed" / "SST-2"
    changed.mkdir(parents=True)
    for name in ("train.tsv", "dev.tsv"):
        (changed / name).write_text((data / name).read_text().replace("film", "story"))
    assert "the task's files differ" in refused(*flags, "--resume", "--data-dir", str(changed))
    assert finetune(pretrained, data, out, *flags, "--resume") == 0
    assert "is finished (results.json); nothing to resume" in refused(*flags, "--resume")
    assert "holds a finished fine-tuning job (results.json): choose another --out" in refused(*flags)


def test_a_full_disk_while_the_outputs_are_written_says_how_to_go_on(pretrained, data, tmp_path, capsys, monkeypatch):
    # it printed the system's sentence and a temporary file's name; --resume then ends the job
    import errno
    from minibert.finetune import command
    out, flags = tmp_path / "out", ["--epochs", "1", "--batch-size", "16", "--lr", "1e-3"]
    write = command._write_outputs

    def full(ns, *rest):
        raise OSError(errno.ENOSPC, "No space left on device", str(ns.out / "model" / ".tmp-x.safetensors"))
    monkeypatch.setattr(command, "_write_outputs", full)
    assert finetune(pretrained, data, out, *flags) == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"minibert finetune: error: could not write {out / 'model' / '.tmp-x.safetensors'}: the disk is "
                   f"full (No space left on device); free some space, then run the same command with --resume: the "
                   f"job goes on from its last checkpoint")
    monkeypatch.setattr(command, "_write_outputs", write)
    assert finetune(pretrained, data, out, *flags, "--resume") == 0
    assert (out / "results.json").is_file() and (out / "model" / "model.safetensors").is_file()
