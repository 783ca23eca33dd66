"""``benchmarks/gpu_all.sh``, the script a GPU machine runs in its few minutes, and
``benchmarks/run_notebook.py``, which executes a notebook there without Jupyter.

The script runs here with a stand-in for Python that records each command (no GPU is
needed to check which parts run, in which order, within which budget, and what the
script reports and packs)."""
import base64
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_all.sh"

# the stand-in: each command on a line of $LOG; no Jupyter; bench_step.py prints a ratios table and fails
# where FAIL_PRESET names one of its presets
FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$LOG"
case "$*" in
  "-c import nbconvert") exit 1;;
  *bench_step.py*) echo "$PWD ${PYTHONPATH%%:*}" >> "$LOG.folders"; echo "## ratios"; echo "| minibert / torch-gathered | 0.9x |"
                   case " $* " in *" ${FAIL_PRESET:-none} "*) exit 1;; esac;;
esac
exit 0
"""


def run_script(tmp_path, env=None, **variables):
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    log, out = tmp_path / "commands.log", tmp_path / "out"
    full = {**os.environ, "PYTHON": str(python), "LOG": str(log), "OUT": str(out), **variables, **(env or {})}
    res = subprocess.run(["bash", str(SCRIPT)], env=full, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    commands = log.read_text().splitlines() if log.exists() else []
    parts = (out / "parts.txt").read_text().splitlines() if (out / "parts.txt").exists() else []
    return res, commands, parts, out


def test_the_parts_run_in_the_order_asked_and_each_says_how_it_went(tmp_path):
    res, commands, parts, out = run_script(tmp_path, ONLY="notebooks ladder tests before", FAIL_PRESET="none")
    assert res.returncode == 0, res.stderr
    # notebooks first, as asked: no Jupyter, so run_notebook.py, into $OUT
    assert commands[0] == "-c import nbconvert"
    assert commands[1].startswith("benchmarks/run_notebook.py notebooks/07_gpu_with_cupy.ipynb --out " + str(out))
    assert "notebooks/10b_mixed_precision_on_a_gpu.ipynb" in commands[3]
    assert commands[4].startswith("benchmarks/bench_attention.py")
    # with pytest-timeout there (the stand-in imports anything), a test that hangs is stopped
    assert commands[5:7] == ["-c import pytest_timeout", "-m pytest -q -p no:cacheprovider --timeout=120 tests/test_gpu.py"]
    assert len(commands) == 7        # no baseline: part before times nothing (and warms no GPU)
    assert [p.split(",")[0] for p in parts] == ["notebooks: ran", "ladder: ran", "tests: ran", "before: not run"]
    assert "no earlier minibert to time" in res.stdout


def test_a_failed_command_is_named_and_the_rest_still_runs(tmp_path):
    res, commands, parts, _ = run_script(tmp_path, ONLY="steps products", INPROC="1", FAIL_PRESET="base")
    tables = [c for c in commands if "bench_step.py" in c]
    assert len(tables) == 4 and all("--in-process" in c and "--device cuda" in c for c in tables)
    assert [c.split("--seq-len ")[1].split()[0] for c in tables] == ["128", "512", "128", "512"]
    # every table names base, so each of the four failed; the part says so, with the first command
    assert parts[0].startswith("steps: failed: exit status 1: python benchmarks/bench_step.py --device cuda")
    assert "(and 3 more)" in parts[0]
    assert parts[1].startswith("products: ran")


def test_part_before_times_the_same_table_with_the_earlier_minibert_from_its_own_folder(tmp_path):
    base = tmp_path / "baseline"
    (base / "benchmarks").mkdir(parents=True)
    (base / "benchmarks" / "bench_step.py").write_text("# an earlier minibert's\n")
    res, commands, parts, out = run_script(tmp_path, ONLY="steps before", INPROC="1", ROUNDS="1",
                                           BASELINE=str(base))
    assert res.returncode == 0, res.stderr
    assert parts[0].startswith("steps: ran") and parts[1].startswith("before: ran")
    folders = (tmp_path / "commands.log.folders").read_text().splitlines()
    # from its own folder, importing its own minibert (first on the path), where this tree's comes first
    assert folders == [f"{ROOT} {ROOT}"] * 4 + [f"{base} {base}"] * 4
    tables = [c for c in commands if "bench_step.py" in c]
    assert [c.replace(" --json " + str(out / "step_"), " --json X_") for c in tables[:4]] == \
        [c.replace(" --json " + str(out / "before_"), " --json X_") for c in tables[4:]]
    assert commands[0].startswith("-c import cupy")       # the GPU warmed before the first timing, once
    assert sum(c.startswith("-c import cupy") for c in commands) == 1


def test_a_budget_leaves_out_the_parts_that_do_not_fit_and_the_results_come_in_one_archive(tmp_path):
    # 70 s: 50 s after the 20 kept for the end; ladder (about 30 s) fits, tests (about 120) does not
    res, commands, parts, out = run_script(tmp_path, ONLY="ladder tests products", BUDGET="70",
                                           PACK="results.tar.gz")
    assert res.returncode == 0, res.stderr
    assert parts[0].startswith("ladder: ran")
    assert parts[1].startswith("tests: not run, ") and "it takes about 120 s" in parts[1]
    assert parts[2].startswith("products: ran")            # a later part that fits still runs
    assert not any(c.startswith("-m pytest") for c in commands)
    with tarfile.open(tmp_path / "results.tar.gz") as tar:  # PACK is relative to the caller's folder
        names = set(tar.getnames())
    assert {"out/parts.txt", "out/gpu.txt", "out/attention.md", "out/products.md"} <= names
    assert "out/.failed" not in names


def test_an_unknown_part_is_refused_before_anything_runs(tmp_path):
    res, commands, _, _ = run_script(tmp_path, ONLY="tests stepz")
    assert res.returncode == 2 and commands == []
    assert "no part 'stepz'" in res.stderr and "steps" in res.stderr


def notebook(tmp_path, cells):
    nb = {"cells": [{"cell_type": "code", "source": src, "metadata": {}, "outputs": [], "execution_count": None}
                    for src in cells],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "nb" / "t.ipynb"
    path.parent.mkdir()
    path.write_text(json.dumps(nb))
    (path.parent / "helper.py").write_text("VALUE = 41\n")
    return path


def test_run_notebook_keeps_what_a_kernel_keeps(tmp_path):
    path = notebook(tmp_path, [
        "%matplotlib inline\nimport helper\nprint('hello')\nhelper.VALUE + 1",      # the notebook's folder
        "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nx = 3",
        "import sys\nprint('careful', file=sys.stderr)\nx * 2",
        "1 / 0",
        "print('never')",
    ])
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run_notebook.py"), str(path), "--out",
                          str(tmp_path / "done.ipynb")], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 1 and "stopped at an error" in res.stdout
    assert "code cell 4 raised" in res.stderr and "ZeroDivisionError" in res.stderr
    cells = json.loads((tmp_path / "done.ipynb").read_text())["cells"]
    first, figure, stderr, error, after = (c["outputs"] for c in cells)
    assert first[0] == {"output_type": "stream", "name": "stdout", "text": ["hello\n"]}
    assert "not run: %matplotlib inline" in "".join(first[1]["text"])
    assert first[2]["output_type"] == "execute_result" and first[2]["data"]["text/plain"] == ["42"]
    assert [o["output_type"] for o in figure] == ["display_data"]
    assert base64.b64decode(figure[0]["data"]["image/png"])[:4] == b"\x89PNG"
    assert [(o["output_type"], o.get("name")) for o in stderr] == [("stream", "stderr"), ("execute_result", None)]
    assert stderr[1]["data"]["text/plain"] == ["6"]
    assert error[0]["output_type"] == "error" and error[0]["ename"] == "ZeroDivisionError"
    assert after == [] and cells[4]["execution_count"] is None
    assert path.read_text().count('"outputs": []') == 5     # the notebook itself untouched


@pytest.mark.parametrize("argv,message", [(["missing.ipynb", "--out", "x.ipynb"], "no notebook at missing.ipynb"),
                                          (["t.ipynb"], "--out")])
def test_run_notebook_says_what_is_wrong_with_its_arguments(tmp_path, argv, message):
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run_notebook.py"), *argv],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr
