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
import sys
import types

import numpy as np
import pytest

import minibert.model.bert as bert_module
import minibert.train.loop as loop
from minibert import accel
from minibert.accel.cuda import cublas as cuda_cublas
from minibert.ops import common as ops_common
from minibert.train import TrainArgs, pretrain
import cuda_on_cpu
import graph_stand_in
from test_gpu_kernels_on_cpu import cuda_kernels_on_numpy
from test_hostile_runs import records

REASON = cuda_on_cpu.unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

READS = []      # one entry per read of a device value: what read it
LAUNCHES = []   # one entry per operation on device arrays that CuPy runs as (at least) one kernel
# functions that only look at an array, or return a view of it: no kernel on a GPU
VIEWS = {"reshape", "transpose", "swapaxes", "moveaxis", "squeeze", "expand_dims", "broadcast_to",
         "shape", "ndim", "size", "result_type", "may_share_memory", "shares_memory", "atleast_1d",
         "atleast_2d", "iscomplexobj", "isrealobj", "ascontiguousarray", "asarray", "array_equal",
         "empty", "empty_like"}
_inside = [0]   # depth of array functions running: their own ufuncs are part of them
# functions CuPy runs through cuBLAS (which it refuses while a stream captures a graph)
BLAS = {"matmul", "dot", "vdot", "inner", "tensordot", "einsum", "outer"}


def _redo(fn, result=None):
    """Record a launch for a graph being captured (``graph_stand_in``): its replay calls ``fn`` (with
    ``result``: copies what ``fn`` returns into it), counted as no launch of its own."""
    if not graph_stand_in.capturing():
        return

    def replay():
        _inside[0] += 1
        try:
            out = fn()
            if result is not None:
                np.copyto(result.view(np.ndarray), out)
        finally:
            _inside[0] -= 1
    graph_stand_in.record(replay)


class Device(np.ndarray):
    """A NumPy array that counts as on the GPU: every result computed from it is one too (0-d
    results stay arrays, as CuPy's do), every way of reading it on the host is recorded, and so is
    every operation that would launch a kernel (``LAUNCHES``)."""

    def __array_wrap__(self, obj, context=None, return_scalar=False):
        return np.asarray(obj).view(Device)

    def __array_finalize__(self, obj):
        graph_stand_in.register(self)

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        if not _inside[0]:
            LAUNCHES.append(f"{ufunc.__name__}{'' if method == '__call__' else '.' + method} at {_site()}")
            if ufunc.__name__ in BLAS:
                graph_stand_in.refuse(f"cuBLAS called by CuPy ({ufunc.__name__} at {_site()})")
        inputs = tuple(x.view(np.ndarray) if isinstance(x, Device) else x for x in inputs)
        if out is not None:
            kwargs["out"] = tuple(o.view(np.ndarray) if isinstance(o, Device) else o for o in out)
        result = getattr(ufunc, method)(*inputs, **kwargs)
        if out is None:
            out = tuple(np.asarray(r).view(Device) for r in result) if isinstance(result, tuple) else (
                np.asarray(result).view(Device) if isinstance(result, (np.ndarray, np.generic)) else None)
            out = out if isinstance(out, tuple) or out is None else (out,)
        if not _inside[0] and method == "at":     # in place, returns nothing: the replay adds again
            _redo(lambda: ufunc.at(*inputs, **kwargs))
        elif not _inside[0] and out is not None:     # the replay writes the same outputs again
            plain = tuple(o.view(np.ndarray) for o in out)
            _redo(lambda: getattr(ufunc, method)(*inputs, **dict(kwargs, out=plain)))
        if out is None:
            return result
        return out[0] if len(out) == 1 else out

    def __array_function__(self, func, types_, args, kwargs):
        top = func.__name__ not in VIEWS and not _inside[0]
        if top:
            LAUNCHES.append(f"{func.__name__} at {_site()}")
            if func.__name__ in BLAS:
                graph_stand_in.refuse(f"cuBLAS called by CuPy ({func.__name__} at {_site()})")
        plain = tuple(np.ndarray if t is Device else t for t in types_)
        _inside[0] += 1
        try:
            result = super().__array_function__(func, plain, args, kwargs)
        finally:
            _inside[0] -= 1
        if not isinstance(result, (np.ndarray, np.generic)):
            if top and result is None:         # in place (copyto, put...): the replay does it again
                _redo(lambda: super(Device, self).__array_function__(func, plain, args, kwargs))
            return result
        result = np.asarray(result).view(Device)
        if top:
            _redo(lambda: super(Device, self).__array_function__(func, plain, args, kwargs), result)
        return result

    def astype(self, dtype, *args, copy=True, **kwargs):
        out = super().astype(dtype, *args, copy=copy, **kwargs)
        if copy or np.dtype(dtype) != self.dtype:
            LAUNCHES.append(f"astype at {_site()}")
            _redo(lambda: self.view(np.ndarray).astype(dtype), out)
        return out

    def fill(self, value):
        if not _inside[0]:
            LAUNCHES.append(f"fill at {_site()}")
            _redo(lambda: np.ndarray.fill(self, value))
        np.ndarray.fill(self, value)

    def copy(self, *args, **kwargs):
        LAUNCHES.append(f"copy at {_site()}")
        out = super().copy(*args, **kwargs)
        _redo(lambda: self.view(np.ndarray), out)
        return out

    def reshape(self, *args, **kwargs):
        out = super().reshape(*args, **kwargs)
        if out.size and not _inside[0] and not np.may_share_memory(out, self):   # not a view: a copy
            LAUNCHES.append(f"reshape (a copy) at {_site()}")
            _redo(lambda: self.view(np.ndarray).reshape(*args, **kwargs), out)
        return out

    def __setitem__(self, index, value):
        if not _inside[0]:
            LAUNCHES.append(f"setitem at {_site()}")
            if not isinstance(value, (np.ndarray, np.generic, int, float, bool)):
                graph_stand_in.refuse(f"a host-to-device copy (setitem at {_site()})")
            _redo(lambda: np.ndarray.__setitem__(self, index, value))
        _inside[0] += 1
        try:
            super().__setitem__(index, value)
        finally:
            _inside[0] -= 1

    def __getitem__(self, index):
        parts = index if isinstance(index, tuple) else (index,)
        if any(getattr(i, "dtype", None) == bool for i in parts):
            READS.append(f"a boolean mask's count at {_caller()}")      # the result's size is data
        gather = not _inside[0] and any(isinstance(i, (np.ndarray, list)) for i in parts)
        if gather:
            LAUNCHES.append(f"gather at {_site()}")                    # an index array: a kernel
        result = super().__getitem__(index)
        result = np.asarray(result).view(Device) if isinstance(result, np.generic) else result
        if gather:
            _redo(lambda: np.ndarray.__getitem__(self, index), result)
        return result

    def _read(self, how):
        READS.append(f"{how} at {_caller()}")
        graph_stand_in.refuse(f"a device value read on the host ({how} at {_caller()})")
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


def _site():
    """The innermost line of minibert on the stack: where a launch was made."""
    import traceback
    frames = [f for f in traceback.extract_stack() if "/minibert/" in f.filename]
    return f"{frames[-1].filename.split('/minibert/')[-1]}:{frames[-1].lineno}" if frames else "?"


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


# functions that fill a new array: a kernel on a GPU (``empty`` is none)
FILLS = ("zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "arange", "eye")


def device_numpy():
    """NumPy whose functions return ``Device`` arrays: what a model on the GPU calls ``xp``."""
    xp = types.ModuleType("device_numpy")
    for name in dir(np):
        attr = getattr(np, name)
        if callable(attr) and not isinstance(attr, (type, np.ufunc)):     # (a ufunc sees Device arrays itself)
            def wrapped(*args, _f=attr, _name=name, **kwargs):
                if _name in SIZED_BY_DATA and any(isinstance(a, Device) for a in args):
                    READS.append(f"{_name} at {_caller()}")
                    graph_stand_in.refuse(f"a size read back ({_name} at {_caller()})")
                if _name in ("asarray", "array") and args and not isinstance(args[0], Device):
                    graph_stand_in.refuse(f"a host-to-device copy ({_name} at {_caller()})")
                out = _on_device(_f(*args, **kwargs))
                if _name == "array" and args and isinstance(args[0], Device) and kwargs.get("copy", True) \
                        and not _inside[0]:          # a copy of a device array: a kernel
                    LAUNCHES.append(f"array (a copy) at {_site()}")
                    _redo(lambda: np.asarray(args[0], dtype=kwargs.get("dtype")), out)
                if _name in FILLS and not _inside[0]:
                    LAUNCHES.append(f"{_name} at {_site()}")
                    _redo(lambda: _f(*args, **kwargs), out)
                return out
            attr = wrapped
        setattr(xp, name, attr)
    return xp


@pytest.fixture
def on_gpu_stand_in(monkeypatch):
    """Models built from now on keep Device arrays and run the GPU's ops and dropout."""
    cuda_kernels_on_numpy(monkeypatch)
    # NumPy's ascontiguousarray dispatches on its like= alone, never on its array: a copy it makes
    # of a device array is seen here instead (on a GPU, one launch)
    real_contiguous = np.ascontiguousarray

    def contiguous(a, *args, **kwargs):
        out = real_contiguous(a, *args, **kwargs)
        if isinstance(a, Device) and not _inside[0] and not (
                a.flags.c_contiguous and kwargs.get("dtype", args[0] if args else None) in (None, a.dtype)):
            LAUNCHES.append(f"ascontiguousarray (a copy) at {_site()}")
            _redo(lambda: real_contiguous(a, *args, **kwargs), out)
        return out
    monkeypatch.setattr(np, "ascontiguousarray", contiguous)
    fake_cupy = __import__("sys").modules["cupy"]
    for name in ("empty", "empty_like", "zeros", "ascontiguousarray"):     # the kernels' own outputs too
        monkeypatch.setattr(fake_cupy, name, lambda *a, _f=getattr(np, name), **k: _on_device(_f(*a, **k)))

    def gemm(p, c):                      # a cuBLAS call (gemm.DIRECT): one launch
        if not _inside[0]:
            LAUNCHES.append(f"cublas gemm at {_site()}")
            _redo(lambda: cuda_on_cpu.gemm(p, c))
        return cuda_on_cpu.gemm(p, c)
    monkeypatch.setattr(cuda_cublas, "gemm", gemm)
    monkeypatch.setattr(cuda_cublas, "handle", lambda: None)
    _record_kernels(monkeypatch)
    xp = device_numpy()
    # the module of a device array is this NumPy, as CuPy is a CuPy array's: what an op makes with
    # ``get_array_module(x).zeros(...)`` is on the device too, and is seen
    real_module = ops_common.get_array_module
    for name, module in list(sys.modules.items()):
        if name.startswith("minibert") and getattr(module, "get_array_module", None) is real_module:
            monkeypatch.setattr(module, "get_array_module", lambda a: xp if isinstance(a, Device) else real_module(a))
    monkeypatch.setattr(bert_module, "get_xp", lambda device: xp)
    monkeypatch.setattr(bert_module, "is_cupy", lambda m: m is xp)           # counter-based dropout
    monkeypatch.setattr(bert_module, "select_ops", lambda kernels, device, dtype: accel.cuda)
    READS.clear()
    yield


def _record_kernels(monkeypatch):
    """minibert's own kernels (raw, elementwise, reductions): each call is one launch (``LAUNCHES``),
    which a graph being captured records to make again with the same arrays and scalars; the arrays
    they make are device arrays, as on a GPU, so that what is done with them is seen too."""
    def wrap(cls, replay):     # replay(real, kernel, args, kwargs, out) records how to launch it again
        real = cls.__call__

        def call(self, *args, **kwargs):
            if _inside[0]:                    # within another launch (a reduction's map): part of it
                return real(self, *args, **kwargs)
            LAUNCHES.append(f"kernel {self.name} at {_site()}")
            _inside[0] += 1
            try:
                out = real(self, *args, **kwargs)
            finally:
                _inside[0] -= 1
            out = tuple(_on_device(o) for o in out) if isinstance(out, tuple) else _on_device(out)
            replay(real, self, args, kwargs, out)
            return out
        monkeypatch.setattr(cls, "__call__", call)
    wrap(cuda_on_cpu.RawKernel, lambda real, k, a, kw, out: _redo(lambda: real(k, *a, **kw)))
    wrap(cuda_on_cpu.ElementwiseKernel, lambda real, k, a, kw, out: _redo(     # into the same outputs
        lambda: real(k, *a[:len(k.ins)], *(out if isinstance(out, tuple) else (out,)))))
    wrap(cuda_on_cpu.ReductionKernel, lambda real, k, a, kw, out: _redo(lambda: real(k, *a, **kw), out))


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
    real = loop.batch_stats

    def nan_from_step_2(out, batch, **kw):    # the step's summed MLM loss, as the watch receives it
        sums = real(out, batch, **kw)
        if len(calls) >= 1:
            sums["mlm_loss"] = sums["mlm_loss"] * np.nan
        calls.append(1)
        return sums
    calls = []
    monkeypatch.setattr(loop, "batch_stats", nan_from_step_2)
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
