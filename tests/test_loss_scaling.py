"""Mixed precision's decision kernel (``accel/cuda/loss_scaling.py``) against the array expressions it replaces.

``scale_and_count`` does in one launch what ``LossScaler.update`` and ``AdamW.step`` do on a GPU as
array expressions: the loss scaler's rule, AdamW's step count and its bias correction.  Here both
run on the CPU stand-in, step after step, on the same gradients and verdicts: overflows at the
start (no step taken yet), growth after ``growth_interval`` good steps, a state resumed from a
checkpoint (host numbers), and AdamW without bias correction.  The scale, the count of good
steps and AdamW's step count must be the same bits; so must the parameters and moments where the
bias correction is (on a GPU always: ``tests/test_gpu.py``).  On the CPU the two sides' ``pow``
may differ in the last bit (NumPy's may be SIMD code, the compiled kernel's is the C library's),
so there the bias correction is held to one unit in the last place and the weights near it
(for 0.9^7 they differ on the development machine).
"""
from types import SimpleNamespace

import numpy as np
import pytest

import cuda_on_cpu
from test_gpu_kernels_on_cpu import cuda_kernels_on_numpy
from test_bookkeeping import dev
from minibert import accel
from minibert.accel.cuda import loss_scaling
from minibert.backend import host_number, to_numpy
from minibert.optim import AdamW, LossScaler, scaled_step

pytestmark = pytest.mark.skipif(cuda_on_cpu.unavailable() is not None, reason=cuda_on_cpu.unavailable() or "")

RUNS = {
    # (verdicts step by step, growth_interval, bias_correction, the state at the start)
    "overflows first, then growth": ([False, False, True, True, True, False, True, True, True], 2, True, None),
    "resumed from a checkpoint": ([True, True, False, True], 3, True, dict(scale=1024.0, good_steps=2, t=5)),
    "without bias correction": ([True, False, True, True], 2, False, None),
}


def optimiser(dtype, bias_correction, start, dev, xp, interval=2, seed=5):
    """An AdamW over a flat buffer of 300 parameters (200 decayed) on the device, and its scaler
    (not PyTorch's factors, 2 and 0.5: a kernel that assumed them would go unseen)."""
    rng = np.random.default_rng(seed)
    store = SimpleNamespace(data=dev(rng.standard_normal(300), dtype), grad=dev(np.zeros(300), dtype),
                            xp=xp, ops=accel.cuda, decay_size=200)
    opt = AdamW(store, lr=1e-3, weight_decay=0.01, bias_correction=bias_correction)
    scaler = LossScaler(init_scale=2.0 ** 16, growth_factor=4.0, backoff_factor=0.25, growth_interval=interval)
    if start:
        scaler.scale, scaler.good_steps, opt._t = start["scale"], start["good_steps"], start["t"]
    return opt, scaler


def recorded_updates(opt) -> list:
    """What ``opt.update`` receives from now on, call after call: (step_size, root_c2, go)."""
    calls, real = [], opt.update

    def update(lr, step_size, root_c2, go=None, decay=None):
        calls.append((step_size, root_c2, go))
        real(lr, step_size, root_c2, go, decay)
    opt.update = update
    return calls


def check_run(run, dtype, dev=dev, xp=np, exact=False):
    """Both ways, step after step on ``RUNS[run]``: the scaler's state and AdamW's step count the same
    bits after each, the weights and moments too (``exact``) or within a few units of the dtype's last place."""
    verdicts, interval, bias_correction, start = RUNS[run]
    (ref, ref_scaler), (opt, scaler) = (optimiser(dtype, bias_correction, start, dev, xp, interval)
                                        for _ in range(2))
    grads = np.random.default_rng(9).standard_normal((len(verdicts), 300))
    ref_numbers, numbers = recorded_updates(ref), recorded_updates(opt)
    for step, (ok, g) in enumerate(zip(verdicts, grads), start=1):
        for o in (ref, opt):
            o.store.grad[...] = dev(g if ok else np.where(np.arange(300) == 7, np.inf, g), dtype)
        finite = dev(ok, np.bool_)
        ref.step(1e-3 * step, take=ref_scaler.update(finite))
        assert loss_scaling.applies(scaler, opt, finite)
        scaled_step(opt, scaler, finite, 1e-3 * step)
        for name, a, b in [("scale", scaler.scale, ref_scaler.scale),
                           ("good steps", scaler.good_steps, ref_scaler.good_steps), ("t", opt._t, ref._t)]:
            assert type(host_number(a)) is type(host_number(b)) and host_number(a) == host_number(b), \
                f"step {step}: {name} {host_number(a)} against {host_number(b)}"
            assert to_numpy(a).dtype == to_numpy(b).dtype, f"step {step}: {name}'s dtype"
        for name in ("data", "m", "v"):
            mine = to_numpy(opt.store.data if name == "data" else getattr(opt, name))
            theirs = to_numpy(ref.store.data if name == "data" else getattr(ref, name))
            if exact:
                np.testing.assert_array_equal(mine, theirs, err_msg=f"step {step}: {name}")
            else:
                eps = 8 * np.finfo(dtype).eps      # a last bit of step_size, carried into the weights
                np.testing.assert_allclose(mine, theirs, rtol=eps, atol=eps, err_msg=f"step {step}: {name}")
        # the bias correction (a skipped step's too, which goes unused), and whether to take the step
        # (the reference's in float64, rounded to the parameters' dtype by the update's kernel)
        mine, theirs = ([float(host_number(x)) for x in n[-1]] for n in (numbers, ref_numbers))
        np.testing.assert_allclose(mine, np.array(theirs, dtype),
                                   rtol=0 if exact else max(1e-13, 2 * np.finfo(dtype).eps),
                                   err_msg=f"step {step}: step_size, root_c2, go")
        if not ok:        # (the gradients a skipped step saw did overflow)
            assert not np.isfinite(to_numpy(opt.store.grad)).all()
    assert ref.t == opt.t == sum(verdicts) + (start["t"] if start else 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("run", list(RUNS))
def test_scale_and_count_keeps_what_the_array_expressions_keep(monkeypatch, run, dtype):
    cuda_kernels_on_numpy(monkeypatch)
    check_run(run, dtype)


def test_the_bias_correction_is_the_array_expressions_to_the_last_bits(monkeypatch):
    """The kernel's step_size and root_c2 against the reference's, as ``AdamW.update`` receives them.
    b1^t and b2^t may differ in their last bit (the C library's ``pow`` against NumPy's); 1 - b2^t
    cancels most of b2^t's digits (b2 = 0.999), so root_c2 may differ in its last few."""
    cuda_kernels_on_numpy(monkeypatch)
    got = {}
    for who in ("ref", "kernel"):
        opt, scaler = optimiser(np.float64, True, dict(scale=8.0, good_steps=0, t=41), dev, np)
        got[who] = recorded_updates(opt)
        for step in range(3):
            finite = dev(True, np.bool_)
            if who == "ref":
                opt.step(2e-4, take=scaler.update(finite))
            else:
                loss_scaling.scale_and_count(scaler, opt, finite, 2e-4)
    assert len(got["kernel"]) == len(got["ref"]) == 3
    for t, ((s, r, _), (s_ref, r_ref, _)) in enumerate(zip(got["kernel"], got["ref"]), start=42):
        np.testing.assert_allclose(to_numpy(s), to_numpy(s_ref), rtol=1e-15)
        np.testing.assert_allclose(to_numpy(r), to_numpy(r_ref), rtol=1e-13)
        assert host_number(s) == pytest.approx(2e-4 / (1 - 0.9 ** t), rel=1e-15)
        assert host_number(r) == pytest.approx((1 - 0.999 ** t) ** 0.5, rel=1e-13)


def test_what_the_kernel_does_not_take_goes_to_the_array_expressions(monkeypatch):
    """A verdict on the host, or counts of another type, are not the kernel's: ``scaled_step`` runs
    the reference's steps and still takes or skips as the verdict says."""
    cuda_kernels_on_numpy(monkeypatch)
    opt, scaler = optimiser(np.float32, True, None, dev, np)
    assert not loss_scaling.applies(scaler, opt, True)
    assert not loss_scaling.applies(scaler, opt, dev(1, np.int64))
    scaler.good_steps = dev(1, np.int32)
    assert not loss_scaling.applies(scaler, opt, dev(True, np.bool_))
    scaler.good_steps = 0
    before = to_numpy(opt.store.data).copy()
    scaled_step(opt, scaler, False, 1e-3)           # a host verdict: skipped, the scale cut
    assert scaler.scale == 2.0 ** 14 and opt.t == 0          # (a backoff factor of 0.25)
    np.testing.assert_array_equal(to_numpy(opt.store.data), before)
    scaled_step(opt, None, dev(True, np.bool_), 1e-3)     # no scaler: always taken
    assert opt.t == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_without_a_scaler_a_rate_on_the_device_steps_as_the_host_rate_does(monkeypatch, dtype):
    """A float32 step captured into a graph: no scaler, the learning rate read from a device array the
    host rewrites before each step.  The kernel counts every step, in place, and the update is
    ``opt.step(lr)``'s (the weight decay's factor the same bits; the bias correction's pow may
    differ in the last bit on the CPU, see the module's docstring)."""
    cuda_kernels_on_numpy(monkeypatch)
    (ref, _), (opt, _) = (optimiser(dtype, True, None, dev, np) for _ in range(2))
    got, want = recorded_updates(opt), []
    lr_there, grads = dev(0.0, np.float64), np.random.default_rng(3).standard_normal((4, 300))
    assert not loss_scaling.applies(None, opt, dev(True, np.bool_))          # a host rate: opt.step's
    for step, g in enumerate(grads, start=1):
        for o in (ref, opt):
            o.store.grad[...] = dev(g, dtype)
        lr = 1e-3 * step
        ref.step(lr)
        want.append(dtype(1.0 - lr * ref.weight_decay))
        lr_there[...] = lr
        assert loss_scaling.applies(None, opt, dev(True, np.bool_), lr_there)
        scaled_step(opt, None, dev(False, np.bool_), lr_there)              # (no scaler: the verdict unused)
        if step == 1:
            count = opt._t
        assert opt._t is count and host_number(opt._t) == ref.t == step     # counted in place
        eps = 8 * np.finfo(dtype).eps
        for a, b in [(opt.store.data, ref.store.data), (opt.m, ref.m), (opt.v, ref.v)]:
            np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=eps, atol=eps, err_msg=f"step {step}")
    assert [host_number(c[2]) for c in got] == [1] * 4
    decays = []
    real = accel.cuda.adamw_update
    monkeypatch.setattr(accel.cuda, "adamw_update", lambda *a: decays.append(a[9]) or real(*a))
    lr_there[...] = 5e-3
    scaled_step(opt, None, dev(True, np.bool_), lr_there)
    assert to_numpy(decays[0]).tobytes() == np.array(1.0 - 5e-3 * opt.weight_decay, dtype).tobytes()
