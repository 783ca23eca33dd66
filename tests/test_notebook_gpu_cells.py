"""The notebooks' GPU cells, which a machine without a GPU never runs, run on the CPU stand-in for
CUDA (``tests/cuda_on_cpu.py``) at small sizes: notebook 7's batch sweep (its ceiling and its timed
step on ``device="cuda"``) and notebook 10b's float32 against mixed precision step.  The functions
are taken from the committed notebooks, so a slip in a branch that only a GPU takes shows here.
"""
from __future__ import annotations

import ast
import json
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

from test_sync_free_step import REASON, device_numpy, on_gpu_stand_in  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def functions(notebook: str, names, namespace: dict) -> dict:
    """``namespace`` with the functions ``names`` defined as the notebook's code cells define them
    (their definitions alone: the rest of each cell is not run)."""
    cells = json.loads((NOTEBOOKS / notebook).read_text(encoding="utf-8"))["cells"]
    found = {}
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and any(f"def {name}(" in source for name in names):
            tree = ast.parse(source)
            found.update({f.name: f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name in names})
    assert set(found) == set(names), f"{notebook} defines no {sorted(set(names) - set(found))}"
    module = ast.Module(body=list(found.values()), type_ignores=[])
    exec(compile(module, notebook, "exec"), namespace)
    return namespace


@pytest.fixture
def synchronized(monkeypatch, on_gpu_stand_in):
    """The stand-in's ``cupy.cuda.Device().synchronize()``, counted."""
    calls = []
    monkeypatch.setattr(sys.modules["cupy"].cuda, "Device",
                        lambda *a: types.SimpleNamespace(synchronize=lambda: calls.append(1)), raising=False)
    return calls


def test_notebook_7_sweeps_a_gpu(synchronized):
    import minibert as mb
    from minibert.model.flops import step_flops
    from minibert.optim import AdamW
    g = functions("07_gpu_with_cupy.ipynb", ["sync", "time_step", "peak_flops"],
                  dict(mb=mb, AdamW=AdamW, np=np, time=time, step_flops=step_flops,
                       get_xp=lambda device: device_numpy()))
    seconds, flops = g["time_step"]("tiny", "cuda", B=2, T=16, repeats=1, vocab_size=2000)
    cfg = mb.BertConfig.from_preset("tiny", vocab_size=2000)
    assert seconds > 0 and flops > g["step_flops"](cfg, 2, 16, 0)       # (labelled positions add to it)
    assert g["peak_flops"]("cuda", 64, repeats=1) > 0
    assert len(synchronized) == 2 * 2 + 2 * 2        # before and after each timed call


# (the loss scaler's first scale, 2^16, overflows float16 in the stand-in's products, which NumPy
# reports; the scaler halves it and skips the step, as on a GPU)
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_notebook_10_times_both_precisions_on_a_gpu(synchronized):
    from minibert import BertConfig, BertForPreTraining
    from minibert.optim import AdamW, LossScaler, scaled_step, unscale_and_clip
    g = functions("10b_mixed_precision_on_a_gpu.ipynb", ["gpu_step_ms"],
                  dict(BertConfig=BertConfig, BertForPreTraining=BertForPreTraining, AdamW=AdamW,
                       LossScaler=LossScaler, scaled_step=scaled_step, unscale_and_clip=unscale_and_clip,
                       np=np, time=time))
    for mixed in (False, True):
        assert 0 < g["gpu_step_ms"]("tiny", 16, mixed, batch_size=2, repeats=1, vocab_size=2000) < 600_000
    assert len(synchronized) == 2 * 3 * 2            # two precisions, three steps, two each
