"""The benchmark scripts still run (tiny shapes: a smoke test, not a measurement)."""
import json
import shutil
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_bench_step_smoke_runs_a_process_per_form_and_prints_the_ratios():
    """Two forms, each in a worker process (every form is timed by the --in-process test below: a
    worker per form would start torch four times)."""
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_step.py"), "--smoke",
                          "--forms", "minibert", "torch-sdpa"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "a process per form" in res.stdout.splitlines()[1]
    for form in ("| minibert |", "| torch-sdpa |"):
        assert form in res.stdout
    assert "| torch-gathered |" not in res.stdout and "| torch-stock |" not in res.stdout
    assert "ratios minibert / PyTorch" in res.stdout and "| tiny | minibert |" in res.stdout
    assert "| preset | form | / torch-sdpa | memory / torch-gathered |" in res.stdout
    assert "MFU (% of peak)" in res.stdout


def test_bench_step_refuses_the_gpu_forms_on_the_cpu():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_step.py"), "--smoke", "--forms",
                          "minibert", "minibert-graph"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "the forms minibert-graph run on a GPU only: add --device cuda" in res.stderr


def test_bench_step_in_one_process_times_every_form_as_the_workers_do(tmp_path):
    """--in-process: the same forms, measured by the same function, in the parent (the GEMM peak
    measured once per library)."""
    out = tmp_path / "step.json"
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_step.py"), "--smoke", "--in-process",
                          "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "every form in this one process" in res.stdout.splitlines()[1]
    for form in ("| minibert |", "| torch-gathered |", "| torch-stock |", "| torch-sdpa |"):
        assert form in res.stdout
    assert "| preset | form | / torch-gathered | / torch-stock | / torch-sdpa | memory / torch-gathered |" in res.stdout
    rows = json.loads(out.read_text())
    assert [r["form"] for r in rows] == ["minibert", "torch-gathered", "torch-stock", "torch-sdpa"]
    assert all(r["step_s"] > 0 and len(r["times"]) == 2 and r["busy_before"] == [None] for r in rows)
    torch_peaks = {r["gemm_peak"] for r in rows if r["form"] != "minibert"}
    assert len(torch_peaks) == 1                     # one torch product timed for the three torch forms


def test_bench_step_profile_smoke_accounts_for_the_step():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_step.py"), "--profile", "tiny",
                          "--batch", "2", "--seq-len", "16", "--reps", "1", "--warmup", "1",
                          "--vocab-size", "500"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "layernorm_forward" in res.stdout and "AdamW.step" in res.stdout and "glue in model/" in res.stdout
    assert ", float32, " in res.stdout.splitlines()[0]
    mixed = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_step.py"), "--profile", "tiny",
                            "--batch", "2", "--seq-len", "16", "--reps", "1", "--warmup", "1",
                            "--vocab-size", "500", "--mixed-precision"], capture_output=True, text=True, timeout=300)
    assert mixed.returncode == 0, mixed.stderr[-2000:]
    assert "mixed float16 (float32 master weights)" in mixed.stdout.splitlines()[0]
    assert "linear fwd W(" in mixed.stdout and "attention_backward" in mixed.stdout


def test_bench_sweep_smoke_times_each_shape(tmp_path):
    out = tmp_path / "sweep.json"
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_sweep.py"), "--smoke", "--json", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "| tiny | 1 | 16 |" in res.stdout and "| tiny | 4 | 16 |" in res.stdout
    rows = json.loads(out.read_text())["rows"]
    assert [(r["batch"], r["seq_len"]) for r in rows] == [(1, 16), (4, 16)]
    assert all(r["step_ms"] > 0 and 0 < r["mfu"] < 1 for r in rows)
    bad = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_sweep.py"), "--seq-lens", "1024"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "sequence lengths up to 512" in bad.stderr


def test_bench_step_smoke_in_mixed_precision():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_step.py"), "--smoke",
                          "--mixed-precision", "--in-process", "--forms", "minibert", "torch-gathered"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "mixed float16 (float32 master weights)" in res.stdout
    assert "| minibert |" in res.stdout and "| torch-gathered |" in res.stdout
    bad = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_step.py"), "--smoke",
                          "--mixed-precision", "--dtype", "float64"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "needs --dtype float32" in bad.stderr


def test_bench_dist_smoke_runs_one_and_two_processes(tmp_path):
    pytest.importorskip("mpi4py")
    beside = Path(sys.executable).parent / "mpiexec"
    if not beside.exists() and shutil.which("mpiexec") is None:
        pytest.skip("no mpiexec (MPICH) to launch two processes with")
    out = tmp_path / "dist.json"
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_dist.py"), "--smoke", "--json", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "| 1 x " in res.stdout and "| 2 x " in res.stdout     # 1 process, then 2
    assert "## Model (not measured)" in res.stdout and "| 100 Gb/s Ethernet | 64 |" in res.stdout
    measured = json.loads(out.read_text())["measured"]
    one, two = (next(r for r in measured if r["nproc"] == n) for n in (1, 2))
    assert one["step_s"] > 0 and two["step_s"] > 0 and two["speedup"] > 0
    assert len(two["steps_s"]) == 2 and 0 < two["allreduce_share"] < 1 and two["bare_allreduce_s"] > 0
    assert one["params"] == two["params"] and one["allreduce_share"] == 0


def test_bench_attention_times_the_ladder_on_a_gpu_and_says_why_not_elsewhere():
    script = ROOT / "benchmarks" / "bench_attention.py"
    res = subprocess.run([sys.executable, str(script), "--batch", "2", "--heads", "2", "--seq-len", "40",
                          "--reps", "2"], capture_output=True, text=True, timeout=600)
    assert "Traceback" not in res.stderr
    spec = importlib.util.spec_from_file_location("bench_attention", script)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    if bench.gpu_reason() is None:
        assert res.returncode == 0, res.stderr
        for form in ("v1 naive", "v2a products + block-per-row softmax", "v2 products + fused softmax",
                     "v3 online softmax", "v4 tiled online softmax"):
            assert form in res.stdout
    else:
        assert res.returncode == 1 and "the ladder runs on the GPU only" in res.stderr


def test_bench_loop_times_pretrain_against_the_bare_step():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_loop.py"), "--config", "tiny",
                          "--batch-size", "4", "--seq-len", "32", "--steps", "6", "--log-every", "2"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    rows = {line.split("|")[1].strip(): line.split("|")[2:] for line in res.stdout.splitlines()
            if line.startswith("| pretrain") or line.startswith("| bare step")}
    assert set(rows) == {"pretrain", "bare step"}
    assert rows["bare step"][2].strip() == "1.00x"
    assert float(rows["pretrain"][0]) > 0 and rows["pretrain"][2].strip().endswith("x")
    line = next(l for l in res.stdout.splitlines() if l.startswith("making a batch on the host"))
    ms, share = re.search(r": (\d+\.\d\d) ms, (\d+)% of the bare step$", line).groups()
    assert float(ms) > 0
    beside = {line.split("|")[1].strip(): line.split("|")[2:] for line in res.stdout.splitlines()
              if line.startswith(("| alone", "| thread", "| process"))}
    assert set(beside) == {"alone", "thread", "process"} and beside["alone"][1].strip() == "1.00x"
    assert all(float(ms) > 0 for ms, _, _ in beside.values())
