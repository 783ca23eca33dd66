"""One AdamW step, run five times with and without weight decay, against ``minibert.optim.AdamW`` to 1e-12."""
from __future__ import annotations

import numpy as np

from minibert.gradcheck import max_rel_error
from minibert.optim import AdamW
from minibert.model.params import ParamSpec, ParamStore

from ..calls import call, try_call
from ..cases import adamw as cases
from ..harness import as_array, diagnose, named, touch
from ..report import Report
from .common import unpack

T = cases.TABLE
HP = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.07)   # not 1 - beta1: no two slips alike by chance
TOL = 1e-12


def reference(p0, grads, decay, hp=HP):
    """minibert.optim.AdamW on a one-tensor ParamStore: (param, m, v) after each step."""
    store = ParamStore([ParamSpec("w", p0.shape, "zeros", decay)], np, np.float64)
    store.params["w"][...] = p0
    opt = AdamW(store, lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"], weight_decay=hp["weight_decay"])
    out = []
    for g in grads:
        store.grads["w"][...] = g
        opt.step()
        out.append((store.params["w"].copy(), opt.m.reshape(p0.shape).copy(), opt.v.reshape(p0.shape).copy()))
    return out


def steps(step, p0, grads, decay, hp=HP):
    """(t, param, m, v) after each of ``step``'s steps from p0 and zero moments."""
    p, m, v = p0.copy(), np.zeros(p0.shape), np.zeros(p0.shape)
    for t, g in enumerate(grads, start=1):
        p, m, v = step(p.copy(), g.copy(), m.copy(), v.copy(), t, decay=decay, **hp)
        yield t, p, m, v


def _student(r: Report, p0, grads, decay, hp=HP):
    """The student's adamw_step, read as float64 arrays of p0's shape."""
    def step(*args, **kwargs):
        res = unpack(r, "adamw_step", call(r, "adamw_step", *args, **kwargs), 3, "param, m, v")
        return tuple(as_array(r, f"{name} after step {args[4]}", a, p0.shape,
                              "t is 1 at the first step: 1 - beta1**t must not be 0")
                     for name, a in zip(("param", "m", "v"), res))
    return steps(step, p0, grads, decay, hp)


def _last(m, p0, grads, decay, i, hp=HP):
    """What a case's adamw_step gives after the last step: param (i=0), m (1) or v (2)."""
    *_, last = steps(m.adamw_step, p0, grads, decay, hp)
    return last[1 + i]


def check(r: Report) -> None:
    rng = np.random.default_rng(10)
    p0 = rng.standard_normal((3, 4))
    grads = [rng.standard_normal((3, 4)) * 0.5 for _ in range(5)]
    for decay in (True, False):
        _check_five_steps(r, p0, grads, decay)
    # ---- the hyper-parameters are arguments: other values than the defaults
    hp = dict(lr=3e-2, beta1=0.8, beta2=0.99, eps=1e-3, weight_decay=0.05)
    ref = reference(p0, grads, True, hp=hp)
    *_, (_, p, m, v) = _student(r, p0, grads, True, hp)
    err = max(max_rel_error(p, ref[-1][0]), max_rel_error(m, ref[-1][1]), max_rel_error(v, ref[-1][2]))
    line = "betas (0.8, 0.99), eps 1e-3, 5 steps"
    # param, m and v together: a slip with eps (1e-6 by default) shows here
    known = T.known(lambda mod: np.concatenate([_last(mod, p0, grads, True, i, hp).ravel() for i in range(3)]))
    if err < TOL:
        touch(known)
    r.expect(err < TOL, f"{line:<44s} max_rel_error {err:.1e}" + (" (< 1e-12)" if err < TOL else " (must be < 1e-12)"),
             None if err < TOL else named(np.concatenate([p.ravel(), m.ravel(), v.ravel()]), known) or cases.HYPER)


def _check_five_steps(r: Report, p0, grads, decay) -> None:
    ref = reference(p0, grads, decay)
    errs = {"param": 0.0, "m": 0.0, "v": 0.0, "update": 0.0}
    for t, p, m, v in _student(r, p0, grads, decay):
        rp, rm, rv = ref[t - 1]
        errs["param"] = max(errs["param"], max_rel_error(p, rp))
        errs["m"] = max(errs["m"], max_rel_error(m, rm))
        errs["v"] = max(errs["v"], max_rel_error(v, rv))
        errs["update"] = max(errs["update"], max_rel_error(p - p0, rp - p0))
    flag = f"decay={decay}"
    for i, what, got, how in ((1, "m", m, "m = beta1 * m + (1 - beta1) * grad"),
                              (2, "v", v, "v = beta2 * v + (1 - beta2) * grad**2")):
        line = f"{what}, 5 steps, {flag}, vs minibert"
        if errs[what] < TOL:
            r.ok(f"{line:<44s} max_rel_error {errs[what]:.1e} (< 1e-12)")
            touch(T.known(lambda mod, i=i: _last(mod, p0, grads, decay, i)))
        else:
            hint = named(got, T.known(lambda mod, i=i: _last(mod, p0, grads, decay, i)))
            r.fail(f"{line:<44s} max_rel_error {errs[what]:.1e} (must be < 1e-12)", hint or how)
    moments_ok = errs["m"] < TOL and errs["v"] < TOL
    line = f"param, 5 steps, {flag}, vs minibert"
    # the update param - p0 too: a slip in eps moves the parameter by less than a case's 1e-6 can see
    update = lambda mod: _last(mod, p0, grads, decay, 0) - p0    # noqa: E731
    if errs["param"] < TOL and errs["update"] < 1e-9:
        r.ok(f"{line:<44s} max_rel_error {errs['param']:.1e} (< 1e-12)")
        touch(T.known(lambda mod: _last(mod, p0, grads, decay, 0)))
        touch(T.known(update))
        return
    known = iter(T.known(lambda mod: _last(mod, p0, grads, decay, 0)))
    hint = diagnose(p, known) or (None if not moments_ok else locate_update(r, decay)) or diagnose(p, known) or \
        named(p - p0, T.known(update)) or (
        None if not moments_ok else
        "decay first (param *= 1 - lr * weight_decay), then param -= lr * m_hat / (sqrt(v_hat) + eps) with "
        "m_hat = m / (1 - beta1**t) and v_hat = v / (1 - beta2**t)")
    r.fail(f"{line:<44s} max_rel_error {errs['param']:.1e} (must be < 1e-12); the total update is off by "
           f"{errs['update']:.1e}", hint)


def locate_update(r: Report, decay: bool) -> str | None:
    """Which term of the update is wrong, from two steps that switch the other terms off.

    With a zero gradient (and zero moments) Adam's term is 0, so one step
    shows the decay alone: param * (1 - lr * wd).  With decay=False and
    eps = 0, the first step from zero moments is lr * m_hat / sqrt(v_hat) =
    lr * sign(grad) exactly, whatever the gradient; a missing bias correction
    scales it by a known factor.
    """
    b1, b2 = HP["beta1"], HP["beta2"]
    p0 = np.full(4, 2.0)
    if decay:
        res = _try_step(r, p0, np.zeros(4), lr=0.1, weight_decay=0.5, eps=1e-6, decay=True)
        if res is not None and np.allclose(res, res[0]) and not np.isclose(res[0], p0[0] * (1 - 0.05)):
            f = res[0] / p0[0]
            return (f"with a zero gradient, one step must only shrink the weights by 1 - lr * weight_decay = 0.95; "
                    f"yours multiplies them by {f:.4g}" + (" (1 - weight_decay: lr is missing)" if np.isclose(f, 0.5)
                                                          else ""))
    g = np.array([0.3, -2.0, 5.0, -0.01])
    res = _try_step(r, p0, g, lr=1.0, weight_decay=0.0, eps=0.0, decay=False)
    if res is None:
        return None
    ratio = (p0 - res) / np.sign(g)
    if not np.allclose(ratio, ratio[0], rtol=1e-9) or np.isclose(ratio[0], 1.0, rtol=1e-9):
        return None
    name = _corrections_used(ratio[0], b1, b2)
    return (f"the first step from zero moments (eps = 0) must move every weight by exactly lr, since "
            f"m_hat / sqrt(v_hat) = sign(grad); yours moves it by {ratio[0]:.4g} x lr" + (f": {name}" if name else ""))


def _corrections_used(ratio: float, b1: float, b2: float) -> str | None:
    """Which bias corrections give a first step of ``ratio`` x lr: none, or beta**k with the wrong k.

    At t = 1, m = (1 - b1) g and v = (1 - b2) g^2; dividing them by c1 and c2
    moves the weight by ((1 - b1) / c1) / sqrt((1 - b2) / c2) x lr.
    """
    options = {"no": 1.0, **{f"k={k}": None for k in (1, 2, 3)}}
    for m_name in options:
        for v_name in options:
            c1 = 1.0 if m_name == "no" else 1 - b1 ** int(m_name[2:])
            c2 = 1.0 if v_name == "no" else 1 - b2 ** int(v_name[2:])
            if np.isclose(ratio, ((1 - b1) / c1) / np.sqrt((1 - b2) / c2), rtol=1e-6):
                return _describe(m_name, v_name)
    return None


def _describe(m_name: str, v_name: str) -> str:
    parts = []
    for moment, beta, used in (("m", "beta1", m_name), ("v", "beta2", v_name)):
        if used == "no":
            parts.append(f"{moment} is not bias-corrected ({moment}_hat = {moment} / (1 - {beta}**t))")
        elif used != "k=1":
            parts.append(f"{moment}'s bias correction uses {beta}**{used[2:]} at the first step: the power is the "
                         "step number t, which starts at 1")
    return "; ".join(parts)

def _try_step(r: Report, p0, g, **hp):
    """The student's param after one step from zero moments, or None if it fails (never reported)."""
    decay = hp.pop("decay")
    res = try_call(r.module, "adamw_step", p0.copy(), g.copy(), np.zeros_like(p0), np.zeros_like(p0), 1,
                   decay=decay, beta1=HP["beta1"], beta2=HP["beta2"], **hp)
    try:
        out = np.asarray(res[0], dtype=np.float64)
    except Exception:
        return None
    return out if out.shape == p0.shape and np.isfinite(out).all() else None
