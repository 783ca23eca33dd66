"""Inverted dropout: each entry 0 or x / (1 - p) in training, about p of them 0, each on its own draw
from ``rng``; the identity at evaluation.  The same exercise's dropout on the attention weights is
``attention_dropout``'s."""
from __future__ import annotations

import numpy as np

from ..cases import dropout as cases
from ..harness import as_array, grad_check, named, touch
from ..report import Report
from .common import bwd, fwd, near, seeded_output

T = cases.TABLE


def scale_hint(ratio, p, what="entries"):
    """The hint of the case whose scale of the kept values is ``ratio`` (to x), or None."""
    for case, scale in ((cases.NOT_SCALED, 1.0), (cases.TIMES_KEEP, 1.0 - p), (cases.OVER_P, 1.0 / p)):
        if near(ratio, scale):
            return case.hint.format(what=what)
    return None


def drop_share_hint(share, p, what="entries"):
    """Why ``share`` of the values were dropped where p should be."""
    if share == 0:
        return f"nothing was dropped with train=True: drop each of the {what} with probability p"
    if abs(share - (1 - p)) < 0.05:
        return cases.KEEPS_P.hint.format(share=share, p=p, what=what)
    return f"drop each of the {what} with probability p (here {p}): keep where rng.random(shape) >= p"


def check(r: Report) -> None:
    rng = np.random.default_rng(11)
    p = 0.1
    x = rng.standard_normal((100, 100))
    x[x == 0.0] = 1.0                      # every entry non-zero: a zero in out means dropped
    out = _check_training(r, x, p)
    _check_random_source(r, x, p, out)
    _check_evaluation(r, x, p)
    _check_backward(r, rng)


def _check_training(r: Report, x, p):
    """Each entry is 0 or x / (1 - p), about p of them 0, each on its own draw; the output (seed 1)."""
    out, _ = fwd(r, "dropout_forward", x, p, np.random.default_rng(1), train=True)
    out = as_array(r, "out (train=True)", out, x.shape, "out has x's shape")
    dropped = out == 0.0
    ratio = out[~dropped] / x[~dropped]
    known = T.known(lambda m: m.dropout_forward(x, p, np.random.default_rng(1), train=True)[0][0])   # a row
    if near(ratio, 1.0 / (1.0 - p), 1e-12):
        touch(known)
    r.expect(near(ratio, 1.0 / (1.0 - p), 1e-12), "train=True: every entry is 0 or x / (1 - p)",
             scale_hint(ratio, p) or named(out[0], known) or
             "in training each entry is either 0 (dropped) or x / (1 - p) (kept)")
    same_rows = float((dropped == dropped[0]).all(axis=1).mean())
    same_cols = float((dropped == dropped[:, :1]).all(axis=0).mean())
    r.expect(same_rows < 0.5 and same_cols < 0.5, "each entry is dropped on its own draw", cases.PER_FEATURE.hint)
    share = float(dropped.mean())
    r.expect(abs(share - p) < 0.015, f"{share:.3f} of the entries dropped with p = {p}", drop_share_hint(share, p))
    out3, _ = fwd(r, "dropout_forward", x, 0.3, np.random.default_rng(2), train=True)
    out3 = as_array(r, "out (train=True, p=0.3)", out3, x.shape)
    share3 = float((out3 == 0.0).mean())
    kept3 = out3 != 0.0
    right3 = abs(share3 - 0.3) < 0.02 and near(out3[kept3] / x[kept3], 1 / 0.7, 1e-12)
    r.expect(right3, f"p = 0.3: {share3:.3f} dropped, the rest x / 0.7",
             cases.FIXED_P.hint if abs(share3 - p) < 0.02 else
             scale_hint(out3[kept3] / x[kept3], 0.3) or drop_share_hint(share3, 0.3))
    return out


def _check_random_source(r: Report, x, p, out) -> None:
    """The mask comes from rng: the same seed, the same mask; another seed, another mask."""
    again, _ = fwd(r, "dropout_forward", x, p, np.random.default_rng(1), train=True)
    other, _ = fwd(r, "dropout_forward", x, p, np.random.default_rng(7), train=True)
    again = as_array(r, "out (train=True, the same seed)", again, x.shape)
    other = as_array(r, "out (train=True, another seed)", other, x.shape)
    r.expect(np.array_equal(again, out) and not np.array_equal(other == 0.0, out == 0.0),
             "the same seed gives the same mask, another seed another", cases.FIXED_SEED.hint)


def _check_evaluation(r: Report, x, p) -> None:
    """At evaluation, and with p = 0: the identity."""
    oe, _ = fwd(r, "dropout_forward", x, p, np.random.default_rng(3), train=False)
    oe = as_array(r, "out (train=False)", oe, x.shape)
    known = T.known(lambda m: m.dropout_forward(x, p, np.random.default_rng(3), train=False)[0][0])
    if np.array_equal(oe, x):
        eval_hint = None
    elif near(oe / x, 1.0 - p):
        eval_hint = cases.EVAL_SCALED.hint
    elif (oe == 0.0).any():
        eval_hint = cases.EVAL_DROPS.hint
    else:
        eval_hint = _first_row(oe, x, known) or "train=False: out = x, unchanged (the identity)"
    if eval_hint is None:
        touch(known)
    r.expect(eval_hint is None, "train=False: out = x", eval_hint)
    o0, _ = fwd(r, "dropout_forward", x, 0.0, np.random.default_rng(4), train=True)
    o0 = as_array(r, "out (train=True, p=0)", o0, x.shape)
    known = T.known(lambda m: m.dropout_forward(x, 0.0, np.random.default_rng(4), train=True)[0][0])
    if np.array_equal(o0, x):
        touch(known)
    r.expect(np.array_equal(o0, x), "p = 0: out = x",
             None if np.array_equal(o0, x) else _first_row(o0, x, known) or
             "with p = 0 nothing is dropped and the scale is 1/(1 - 0) = 1: out = x")


def _first_row(got, x, known):
    """The case or mutant whose first row is the student's, when that row is wrong: the cases' results are
    compared on the first row only (all 10,000 numbers of each would make a large recording)."""
    return None if np.array_equal(got[0], x[0]) else named(got[0], known)


def _check_backward(r: Report, rng) -> None:
    """The forward's mask, with its scale; at evaluation the identity."""
    xs = rng.standard_normal((6, 7))
    ps, seed = 0.3, 5
    os_, cs = fwd(r, "dropout_forward", xs, ps, np.random.default_rng(seed), train=True)
    os_ = as_array(r, "out (train=True, 6 x 7)", os_, xs.shape)
    dout = rng.standard_normal(xs.shape)
    dx = as_array(r, "dx", bwd(r, "dropout_backward", dout, cs), xs.shape, "dx has x's shape")
    mask = (os_ != 0.0) / (1.0 - ps)              # the student's own mask, as its forward pass drew it

    # each case and mutant through its own forward pass (the check's seed) and its own backward pass: a
    # slip in what the forward pass keeps (the cache holding p, or x) shows here
    own = T.known(lambda m: m.dropout_backward(dout, m.dropout_forward(xs, ps, np.random.default_rng(seed),
                                                                        train=True)[1]))

    def new_mask(got):
        nonzero = got != 0.0
        if (nonzero != (mask > 0)).any() and near(got[nonzero] / dout[nonzero], 1.0 / (1.0 - ps)):
            return cases.FRESH_MASK.hint
        return named(got, own)
    if grad_check(r, "dx (train=True)", seeded_output(r, "dropout_forward", xs, ps, seed=seed, train=True),
                  xs, dout, dx, known=T.known(lambda m: m.dropout_backward(dout, mask)), explain=new_mask):
        touch(own)
    _, ce = fwd(r, "dropout_forward", xs, ps, np.random.default_rng(6), train=False)
    dx_e = as_array(r, "dx (train=False)", bwd(r, "dropout_backward", dout, ce), xs.shape)
    # each case and mutant through its own forward pass at evaluation (its cache: None, or what it keeps)
    known = T.known(lambda m: m.dropout_backward(dout, m.dropout_forward(xs, ps, np.random.default_rng(6),
                                                                          train=False)[1]))
    if np.array_equal(dx_e, dout):
        touch(known)
    r.expect(np.array_equal(dx_e, dout), "train=False: dx = dout",
             None if np.array_equal(dx_e, dout) else named(dx_e, known) or
             "at evaluation the forward pass is the identity, and so is the backward pass: dx = dout")
