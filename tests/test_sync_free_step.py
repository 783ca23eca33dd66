"""A GPU training step never waits for the GPU: nothing is read back to the host inside a step.

Reading a device value (``float(loss)``, ``int(count)``, ``if norm < 1``) makes the host wait until
the GPU has finished everything it was given, so the next step's launches cannot queue up behind
the current one.  ``pretrain`` reads only on the steps that log, evaluate or save.

Without a GPU this is checked on the CPU stand-in (``tests/cuda_on_cpu.py``): the model's arrays
are ``Device`` arrays, NumPy arrays that count every read as CuPy would make one (``float``,
``int``, ``bool``, ``.item()``, ``.get()``...), and its ops are the GPU's (``accel.cuda``) with
their kernels compiled for the CPU.  A whole run is trained, and the reads of each step counted.
"""
import json
import types

import numpy as np
import pytest

import minibert.model.bert as bert_module
import minibert.train.loop as loop
from minibert import accel
from minibert.train import TrainArgs, pretrain
import cuda_on_cpu
from test_gpu_kernels_on_cpu import cuda_kernels_on_numpy
from test_hostile_runs import records

REASON = cuda_on_cpu.unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

READS = []      # one entry per read of a device value: what read it


class Device(np.ndarray):
    """A NumPy array that counts as on the GPU: every result computed from it is one too (0-d
    results stay arrays, as CuPy's do), and every way of reading it on the host is recorded."""

    def __array_wrap__(self, obj, context=None, return_scalar=False):
        return np.asarray(obj).view(Device)

    def __array_function__(self, func, types_, args, kwargs):
        plain = tuple(np.ndarray if t is Device else t for t in types_)
        result = super().__array_function__(func, plain, args, kwargs)
        return np.asarray(result).view(Device) if isinstance(result, (np.ndarray, np.generic)) else result

    def __getitem__(self, index):
        if any(getattr(i, "dtype", None) == bool for i in (index if isinstance(index, tuple) else (index,))):
            READS.append(f"a boolean mask's count at {_caller()}")      # the result's size is data
        result = super().__getitem__(index)
        return np.asarray(result).view(Device) if isinstance(result, np.generic) else result

    def _read(self, how):
        READS.append(f"{how} at {_caller()}")
        return np.asarray(self)

    def __float__(self):
        return float(self._read("float()"))

    def __int__(self):
        return int(self._read("int()"))

    def __index__(self):
        return int(self._read("index"))

    def __bool__(self):
        return bool(self._read("bool()"))

    def item(self, *args):
        return self._read(".item()").item(*args)

    def tolist(self):
        return self._read(".tolist()").tolist()

    def get(self):                       # CuPy's copy to the host
        return self._read(".get()").copy()

    def nonzero(self):
        self._read("nonzero")
        return super().nonzero()


def _caller():
    """Where in minibert the read was made: file and line."""
    import traceback
    frames = [f for f in traceback.extract_stack()[:-3] if "/minibert/" in f.filename]
    return f"{frames[-1].filename.split('/minibert/')[-1]}:{frames[-1].lineno}" if frames else "?"


def _on_device(value):
    if isinstance(value, (np.ndarray, np.generic)) and not isinstance(value, Device):
        return np.asarray(value).view(Device)
    return value


# functions whose result's size depends on the data: CuPy reads a count back to allocate it
SIZED_BY_DATA = ("nonzero", "flatnonzero", "argwhere", "unique", "compress", "extract")


def device_numpy():
    """NumPy whose functions return ``Device`` arrays: what a model on the GPU calls ``xp``."""
    xp = types.ModuleType("device_numpy")
    for name in dir(np):
        attr = getattr(np, name)
        if callable(attr) and not isinstance(attr, type):
            def wrapped(*args, _f=attr, _name=name, **kwargs):
                if _name in SIZED_BY_DATA and any(isinstance(a, Device) for a in args):
                    READS.append(f"{_name} at {_caller()}")
                return _on_device(_f(*args, **kwargs))
            attr = wrapped
        setattr(xp, name, attr)
    return xp


@pytest.fixture
def on_gpu_stand_in(monkeypatch):
    """Models built from now on keep Device arrays and run the GPU's ops and dropout."""
    cuda_kernels_on_numpy(monkeypatch)
    fake_cupy = __import__("sys").modules["cupy"]
    for name in ("empty", "empty_like", "zeros", "ascontiguousarray"):     # the kernels' own outputs too
        monkeypatch.setattr(fake_cupy, name, lambda *a, _f=getattr(np, name), **k: _on_device(_f(*a, **k)))
    xp = device_numpy()
    monkeypatch.setattr(bert_module, "get_xp", lambda device: xp)
    monkeypatch.setattr(bert_module, "is_cupy", lambda m: m is xp)           # counter-based dropout
    monkeypatch.setattr(bert_module, "select_ops", lambda kernels, device, dtype: accel.cuda)
    READS.clear()
    yield


def _reads_per_step(monkeypatch):
    """[(step, reads in the step, reads after it, whether it logged, evaluated or saved)]."""
    found = []
    real_step, real_after = loop.train_step, loop._log_evaluate_save

    def step(run, lr):
        before = len(READS)
        real_step(run, lr)
        found.append([run.step, READS[before:], None, None])

    def after(run, lr, bar, save):
        before = len(READS)
        real_after(run, lr, bar, save)
        a = run.args
        looks = save or any(run.step % n == 0 for n in (a.log_every, a.eval_every, a.save_every))
        found[-1][2:] = READS[before:], looks or run.step == a.steps
    monkeypatch.setattr(loop, "train_step", step)
    monkeypatch.setattr(loop, "_log_evaluate_save", after)
    return found


def _args(corpus_file, out, **kw):
    base = dict(corpus=str(corpus_file), vocab_size=400, config="tiny", steps=6, batch_size=2, seq_len=32,
                lr=1e-3, warmup=2, eval_every=3, save_every=3, log_every=3, eval_instances=4,
                progress=False, plot=False, out=str(out))
    return TrainArgs(**dict(base, **kw))


@pytest.mark.parametrize("kw", [dict(), dict(mixed_precision=True, accum=2, max_grad_norm=0.0),
                                dict(no_nsp=True, pre_ln=True, whole_word_masking=True, dropout=0.0)],
                         ids=["float32", "mixed-accum", "no_nsp-pre_ln"])
def test_a_step_reads_nothing_back_from_the_device(corpus_file, tmp_path, monkeypatch, on_gpu_stand_in, kw):
    found = _reads_per_step(monkeypatch)
    pretrain(_args(corpus_file, tmp_path / "run", **kw), log=lambda *a: None)
    assert [f[0] for f in found] == list(range(1, 7))
    for step, in_step, after, looks in found:
        assert in_step == [], f"step {step} read the device: {in_step}"
        if not looks:
            assert after == [], f"after step {step}, which neither logs nor saves: {after}"
    # the log steps do read (the counting works): the losses, the norm, the scale, the health
    assert all(len(f[2]) >= 5 for f in found if f[3])
    rows = [json.loads(l) for l in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["kind"] == "train"]
    assert [r["step"] for r in train] == [3, 6]
    assert all(np.isfinite(r["loss"]) and np.isfinite(r["grad_norm"]) for r in train)


def test_the_stand_in_counts_a_read(on_gpu_stand_in):
    """The counting itself: what a step must not do is seen."""
    xp = bert_module.get_xp("cuda")
    loss = xp.ones((3, 4), dtype=np.float32).sum() / 12
    assert isinstance(loss, Device) and loss.shape == ()
    float(loss), int(loss.astype(np.int64)), bool(loss > 0), loss.item(), loss.get()
    assert [r.split(" at ")[0] for r in READS] == ["float()", "int()", "bool()", ".item()", ".get()"]


def test_a_diverged_run_on_the_gpu_names_the_step_it_diverged_at(corpus_file, tmp_path, monkeypatch,
                                                                 on_gpu_stand_in):
    """The loss is NaN from step 2 on; the step reads nothing, and the run learns it at the first
    step that looks, step 2 itself, which saves a checkpoint: it stops there naming step 2,
    before it writes the checkpoint of those weights."""
    from minibert.train import TrainingError
    real = loop.summarize

    def nan_from_step_2(sums):
        out = real(sums)
        if len(calls) >= 1:
            out["loss"] = out["loss"] * np.nan
        calls.append(1)
        return out
    calls = []
    monkeypatch.setattr(loop, "summarize", nan_from_step_2)
    found = _reads_per_step(monkeypatch)
    with pytest.raises(TrainingError, match=r"^step 2: the loss is nan .* Last good checkpoint: none"):
        pretrain(_args(corpus_file, tmp_path / "run", save_every=2), log=lambda *a: None)
    assert [f[0] for f in found] == [1, 2]
    assert not list((tmp_path / "run").glob("checkpoint-*"))


def test_a_run_on_the_gpu_resumes_exactly(corpus_file, tmp_path, monkeypatch, on_gpu_stand_in):
    """Mixed precision, its first steps skipped by a too-large loss scale: the step count, the scale
    and the log window, kept on the device, go into the checkpoint at step 4 (between two records)
    and come back from it; the resumed run writes the records and reaches the weights of the run
    that never stopped, bit for bit."""
    import functools
    from minibert.optim import LossScaler
    from minibert.train.checkpoint_files import list_checkpoints, load_checkpoint
    monkeypatch.setattr(loop, "LossScaler", functools.partial(LossScaler, init_scale=2.0 ** 26))
    kw = dict(mixed_precision=True, save_every=6)
    pretrain(_args(corpus_file, tmp_path / "once", **kw), log=lambda *a: None)
    first = pretrain(_args(corpus_file, tmp_path / "twice", stop_at=4, **kw), log=lambda *a: None)
    assert first.stopped_by == "stop_at"
    pretrain(_args(corpus_file, tmp_path / "twice", resume=True, **kw), log=lambda *a: None)

    once, twice = records(tmp_path / "once"), records(tmp_path / "twice")
    assert once == twice
    assert sum(r.get("skipped_steps", 0) for r in once) > 0          # the scaler did skip steps
    a, b = (load_checkpoint(list_checkpoints(tmp_path / d)[-1]) for d in ("once", "twice"))
    np.testing.assert_array_equal(a[0]["params"], b[0]["params"])
    assert a[1]["adam_t"] == b[1]["adam_t"] < 6                      # skipped steps not counted
