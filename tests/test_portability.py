"""What minibert promises about bits must hold on every x86-64 CPU, not just this one.

OpenBLAS picks a kernel for the CPU it runs on (SkylakeX with AVX-512,
Haswell with AVX2, ...), and kernels round the same product differently.  A
test that passes only because of the kernel this machine picks would fail
for a user with another CPU.  So the fast-path tests run a second time here
under another kernel, forced with ``OPENBLAS_CORETYPE``, that this CPU can
also run.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# kernel -> the CPU flags it needs (OpenBLAS's names; all of them x86-64)
KERNELS = {"Haswell": {"avx2", "fma"}, "SkylakeX": {"avx512f", "avx512bw", "avx512vl"},
           "Sandybridge": {"avx"}, "Nehalem": {"sse4_2"}}

# the fast paths against the reference, bits with any thread count, and a resume that changes it
PROMISES = ["tests/test_fast.py",
            "tests/test_hostile_runs.py::test_a_resume_with_another_thread_count_continues_the_same_bits"]

PROBE = ("import json, numpy, threadpoolctl; print(json.dumps([i.get('architecture') "
         "for i in threadpoolctl.threadpool_info() if i['internal_api'] == 'openblas']))")


def _cpu_flags():
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def _kernel(env):
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    kernels = json.loads(out.stdout)
    return kernels[0] if kernels else None


def another_kernel():
    """(kernel, env): an OpenBLAS kernel this CPU runs that is not the one NumPy picks here."""
    base = dict(os.environ)
    current = _kernel(base)
    if current is None:
        pytest.skip("NumPy does not use OpenBLAS here")
    flags = _cpu_flags()
    for name, needs in KERNELS.items():
        if name != current and needs <= flags:
            env = dict(base, OPENBLAS_CORETYPE=name)
            env.pop("OPENBLAS_L2_SIZE", None)
            return current, name, env
    pytest.skip(f"no other OpenBLAS kernel runs on this CPU (NumPy uses {current})")


@pytest.mark.slow
def test_the_fast_paths_keep_their_promises_under_another_blas_kernel():
    current, name, env = another_kernel()
    assert _kernel(env) == name, f"OPENBLAS_CORETYPE={name} was not taken"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *PROMISES],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    tail = "\n".join((run.stdout + run.stderr).strip().splitlines()[-25:])
    assert run.returncode == 0, f"the fast paths' promises fail with OpenBLAS's {name} kernel " \
                                f"(this CPU's own is {current}):\n{tail}"
    assert " passed" in tail and "failed" not in tail
