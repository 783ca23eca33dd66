"""The step's bookkeeping kernel (``accel/cuda/bookkeeping.py``) against the array expressions it replaces.

``batch_sums`` does in one launch what ``batch_stats``'s array expressions do with a batch's
logits: checked on rows that test the argmax (ties, NaN, -inf).  ``step_book`` does in one launch
what ``Health.watch`` and ``MetricsLog.add_step`` do on a GPU
as array expressions.  Here both run on the CPU stand-in, step after step, on the same numbers:
healthy steps, a NaN loss, later bad steps that must not hide the first, overflowing gradients
with a loss scale above 1 (skipped, not bad), at exactly 1 (bad), with the scale a number or on
the device, and runs without NSP pairs.  The first bad step and the window's sums must be the
same bits."""
from types import SimpleNamespace

import numpy as np
import pytest

import cuda_on_cpu
from test_gpu_kernels_on_cpu import cuda_kernels_on_numpy
from test_sync_free_step import _on_device
from minibert.accel.cuda import bookkeeping, kernels
from minibert.backend import to_numpy
from minibert.train.health import Health
from minibert.train.metrics import MetricsLog, batch_stats, summarize
from minibert.train.dist import Single

pytestmark = pytest.mark.skipif(cuda_on_cpu.unavailable() is not None, reason=cuda_on_cpu.unavailable() or "")
NAN, INF = float("nan"), float("inf")


def dev(x, dtype):
    return _on_device(np.array(x, dtype=dtype))


def step_numbers(mlm_loss, nsp_loss, mlm_hits, nsp_hits, n_mlm, n_nsp, norm, dtype, dev=dev):
    """The sums, gradient norm and verdict of a step as the trainer has them on a GPU."""
    sums = dict(mlm_loss=dev(mlm_loss, np.float64), mlm_correct=dev(mlm_hits, np.int64), n_mlm=n_mlm,
                n_nsp=n_nsp, tokens=7 * n_mlm,
                nsp_loss=dev(nsp_loss, np.float64) if n_nsp else 0.0,
                nsp_correct=dev(nsp_hits, np.int64) if n_nsp else 0)
    grad_norm = dev(norm, dtype)
    return sums, grad_norm, dev(bool(np.isfinite(norm)), np.bool_)


RUNS = {
    # (mlm_loss sum, nsp_loss sum, mlm hits, nsp hits, n_mlm, n_nsp, norm, loss scale)
    "a NaN loss, then worse": [(41.5, 5.5, 3, 4, 20, 8, 1.25, None), (NAN, 5.0, 2, 4, 20, 8, 2.5, None),
                               (INF, 4.0, 1, 3, 20, 8, INF, None), (40.0, 5.0, 3, 5, 20, 8, 1.0, None)],
    "overflow at a scale above 1, then at 1": [(41.5, 5.5, 3, 4, 20, 8, 1.25, 65536.0),
                                               (41.0, 5.5, 3, 4, 19, 8, INF, ("device", 32768.0)),
                                               (40.0, 5.0, 4, 4, 20, 8, 3.0, ("device", 16384.0)),
                                               (39.0, 5.0, 4, 4, 20, 8, NAN, ("device", 1.0)),
                                               (38.0, 5.0, 5, 4, 20, 8, 1.0, 2.0)],
    "no NSP pairs": [(41.5, 0, 3, 0, 20, 0, 1.5, None), (40.5, 0, 6, 0, 18, 0, 1.25, None),
                     (NAN, 0, 0, 0, 0, 0, 1.0, None)],
    "a gradient that overflows unscaled": [(41.5, 5.5, 3, 4, 20, 8, 1.25, None),
                                           (41.0, 5.5, 3, 4, 20, 8, INF, None)],
}


# a window resumed from a checkpoint: the sums of two steps before it, read to the host
RESUMED = dict(sums=dict(mlm_loss=80.5, nsp_loss=11.0, mlm_correct=5, nsp_correct=9, n_mlm=40, n_nsp=16,
                         tokens=280, grad_norm=2.5, skipped=0, steps=2), seconds=0.0, data_wait_s=0.0)


class _Stream:
    wait_s = 0.0


def check_run(run, dtype, dev=dev, xp=np, window=None):
    """Both ways, step after step on ``RUNS[run]``: the first bad step and the window the same bits
    after each.  ``dev``: a number put on the device; ``xp``: the device's array module;
    ``window``: a checkpoint's window both logs start from."""
    ref_health, ref_log = Health(Single(), lambda: None), MetricsLog(None, [])
    health, log = Health(Single(), lambda: None), MetricsLog(None, [])
    ref_log.start(_Stream(), window)
    log.start(_Stream(), window)
    if xp is np:        # the stand-in's zeros are made by ``dev``, not by NumPy
        log.device_sums = dev(np.zeros(len(bookkeeping.SUMS)), np.float64)
    assert log.device_window(xp) is log.device_window(xp)       # made once a window
    for step, (*numbers, scale) in enumerate(RUNS[run], start=1):
        sums, grad_norm, finite = step_numbers(*numbers, dtype, dev=dev)
        if isinstance(scale, tuple):
            scale = dev(scale[1], np.float64)
        ref_health.watch(step, summarize(sums)["loss"], grad_norm, finite, scale)
        ref_log.add_step(sums, grad_norm, finite)
        assert bookkeeping.applies(sums, grad_norm, finite, scale)
        bookkeeping.step_book(step, sums, grad_norm, finite, scale, log.device_window(xp), health.device_first(xp))
        log.add_counts(sums)
        np.testing.assert_array_equal(to_numpy(health.first), to_numpy(ref_health.first), err_msg=f"step {step}")
        mine, theirs = log._window_on_host(), ref_log._window_on_host()
        np.testing.assert_equal(mine, theirs, err_msg=f"step {step}")      # (a NaN equal to a NaN)
        assert {k: type(v) for k, v in mine.items()} == {k: type(v) for k, v in theirs.items()}
    assert to_numpy(health.first)[0] > 0         # each run has a bad step, which both recorded


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("run", list(RUNS))
def test_step_book_keeps_what_the_array_expressions_keep(monkeypatch, run, dtype):
    cuda_kernels_on_numpy(monkeypatch)
    check_run(run, dtype)


@pytest.mark.parametrize("run", ["a NaN loss, then worse", "no NSP pairs"])
def test_a_resumed_window_keeps_its_sums_beside_the_kernels(monkeypatch, run):
    """After a resume the window holds every sum on the host while the kernel adds to its own on
    the device: the host's steps, the counts and the device's sums must all reach the record."""
    cuda_kernels_on_numpy(monkeypatch)
    check_run(run, np.float32, window=RESUMED)


def test_step_book_leaves_what_it_does_not_take_to_the_array_expressions(monkeypatch):
    """Sums of another kind (a loss read back to the host, counts in another type) are not the kernel's."""
    cuda_kernels_on_numpy(monkeypatch)
    sums, grad_norm, finite = step_numbers(41.5, 5.5, 3, 4, 20, 8, 1.25, np.float32)
    assert bookkeeping.applies(sums, grad_norm, finite, None)
    assert not bookkeeping.applies(dict(sums, mlm_loss=41.5), grad_norm, finite, None)
    assert not bookkeeping.applies(dict(sums, mlm_correct=dev(3, np.int32)), grad_norm, finite, None)
    assert not bookkeeping.applies(sums, grad_norm, finite, dev(2.0, np.float32))
    assert not bookkeeping.applies(dict(sums, nsp_loss=0.0), grad_norm, finite, None)   # pairs, but no loss


def _output(rng, n_mlm, vocab, n_nsp, dtype, dev=dev):
    """A training forward's output as the trainer sees it on a GPU, with rows that test the argmax:
    ties (the first largest wins), NaN (the first NaN wins), every logit -inf, labels hit and missed."""
    z = rng.standard_normal((n_mlm, vocab)).astype(dtype)
    y = rng.integers(0, vocab, n_mlm)
    y[::3] = z[::3].argmax(-1)                       # every third row a hit
    if n_mlm >= 8:
        z[1] = 0.5                                   # a tie over the whole row: row 1's argmax is 0
        y[1] = 0
        z[2, [5, vocab - 3]] = 9.0                   # two equal maxima, the label on the second: a miss
        y[2] = vocab - 3
        z[4, [100, 263]] = np.nan                    # two NaN: the first is the argmax (a block's thread
        y[4] = 100                                   # j reads j, j + 256, ...: here threads 100 and 7)
        z[7, [7, 263]] = np.nan                      # two NaN in one thread's share of the row
        y[7] = 7
        z[5, [3, 11]] = [np.inf, np.nan]             # a NaN beats inf; the label on inf: a miss
        y[5] = 3
        z[6] = -np.inf                               # nothing but -inf: the first
        y[6] = 0
    out = SimpleNamespace(mlm_logits=dev(z, dtype), mlm_targets=dev(y, np.int64),
                          mlm_loss=dev(rng.random() * 9, dtype), nsp_logits=None, nsp_targets=None, nsp_loss=None)
    if n_nsp:
        w = rng.standard_normal((n_nsp, 2)).astype(dtype)
        w[0] = 1.25                                  # a tie: class 0
        out.nsp_logits, out.nsp_targets = dev(w, dtype), dev(rng.integers(0, 2, n_nsp), np.int64)
        out.nsp_loss = dev(rng.random(), dtype)
    return out


BATCHES = {"pairs": (37, 301, 9), "no NSP pairs": (37, 301, 0), "no masked token": (0, 301, 5),
           "a vocabulary of BERT's size": (11, 30522, 4)}


def check_batch_sums(shape, dtype, dev=dev):
    """``batch_stats`` with the kernel against ``batch_stats`` with the array expressions: the same
    numbers, the same types.  Also used by ``tests/test_gpu.py``."""
    out = _output(np.random.default_rng(3), *shape, dtype, dev=dev)
    batch = {"attention_mask": np.ones((4, 16), dtype=np.int64)}
    assert bookkeeping.takes(out)
    mine, theirs = batch_stats(out, batch, fused=True), batch_stats(out, batch)
    assert {k: type(v) for k, v in mine.items()} == {k: type(v) for k, v in theirs.items()}
    for k in mine:
        got, want = (to_numpy(x) if not isinstance(x, (int, float)) else np.array(x) for x in (mine[k], theirs[k]))
        assert got.shape == want.shape == () and got.dtype == want.dtype, (k, got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want, err_msg=k)
    assert int(to_numpy(mine["mlm_correct"])) > 0 or shape[0] == 0     # the test has hits to count


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch", list(BATCHES))
def test_batch_sums_count_what_the_array_expressions_count(monkeypatch, batch, dtype):
    cuda_kernels_on_numpy(monkeypatch)
    check_batch_sums(BATCHES[batch], dtype)
    assert not kernels.tickets().any(), "the ticket left taken"


def test_batch_sums_leave_what_they_do_not_take_to_the_array_expressions(monkeypatch):
    cuda_kernels_on_numpy(monkeypatch)
    out = _output(np.random.default_rng(3), 37, 301, 9, np.float32)
    assert bookkeeping.takes(out)
    for change in [dict(mlm_targets=dev(np.zeros(37), np.int32)), dict(mlm_loss=1.5),
                   dict(nsp_logits=dev(np.zeros((9, 2)), np.float64)), dict(mlm_logits=np.zeros((37, 301), np.float16))]:
        assert not bookkeeping.takes(SimpleNamespace(**{**vars(out), **change})), change
