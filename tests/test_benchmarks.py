"""The benchmark scripts still run (tiny shapes: a smoke test, not a measurement)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_step_smoke_prints_every_form_and_the_ratios():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_step.py"), "--smoke"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    for form in ("| minibert |", "| torch-gathered |", "| torch-stock |"):
        assert form in res.stdout
    assert "ratios minibert / PyTorch" in res.stdout and "| tiny |" in res.stdout


def test_bench_step_profile_smoke_accounts_for_the_step():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_step.py"), "--profile", "tiny",
                          "--batch", "2", "--seq-len", "16", "--reps", "1", "--warmup", "1",
                          "--vocab-size", "500"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "layernorm_forward" in res.stdout and "AdamW.step" in res.stdout and "glue in model.py" in res.stdout


def test_bench_step_smoke_in_mixed_precision():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_step.py"), "--smoke",
                          "--mixed-precision", "--forms", "minibert", "torch-gathered"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "mixed float16 (float32 master weights)" in res.stdout
    assert "| minibert |" in res.stdout and "| torch-gathered |" in res.stdout
    bad = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_step.py"), "--smoke",
                          "--mixed-precision", "--dtype", "float64"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "needs --dtype float32" in bad.stderr
