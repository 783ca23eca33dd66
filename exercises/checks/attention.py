"""Scaled dot-product attention with a padding mask, forward and backward."""
from __future__ import annotations

import numpy as np

from minibert import ops as L

from ..calls import try_call
from ..cases import attention as cases
from ..harness import as_array, compare, grad_check
from ..report import Report
from .attention_probe import BackwardProbe
from .common import bwd, forward_output, fwd, unpack

T = cases.TABLE
B, A, TT, D = 2, 2, 5, 4     # batch, heads, tokens, head size


def check(r: Report) -> None:
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((B, A, TT, D)) for _ in range(3))
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    bias = L.attention_mask_bias(mask, np.float64)
    want, _ = L.attention_forward(q, k, v, bias)
    float32 = Float32Weights(r, q, k, mask, L.softmax_forward(q @ k.swapaxes(-1, -2) / np.sqrt(D) + bias)[0])

    out, cache = fwd(r, "attention_forward", q, k, v, mask)
    out = as_array(r, "out", out, want.shape, "out has q's shape (B, A, T, D)")
    compare(r, "forward vs minibert", out, want, known=T.known(lambda m: m.attention_forward(q, k, v, mask)[0],
                                                                D=D, AD=A * D), explain=float32)
    _check_large_scores(r, q, k, v, mask, bias)
    v2 = v.copy()
    v2[1, :, 3:, :] = 1e3        # whatever sits at padded positions must not leak in
    out2, _ = fwd(r, "attention_forward", q, k, v2, mask)
    r.expect(np.allclose(np.asarray(out2, dtype=np.float64), out, rtol=1e-9, atol=1e-9),
             "changing v at padded positions leaves out unchanged",
             "padded keys must get exactly zero attention weight")
    _check_fully_padded(r, rng, q, k, v, float32)
    _check_backward(r, rng, q, k, v, mask, cache, float32)


class Float32Weights:
    """The diagnosis of weights computed in float32, read once through v = I (out = P I = P)."""

    def __init__(self, r: Report, q, k, mask, P_ref):
        self.r, self.q, self.k, self.mask, self.P_ref = r, q, k, mask, P_ref
        self.found = None
        self.done = False

    def __call__(self, _got=None):
        """PROBS_FLOAT32's hint if every weight the student's forward gives is a float32 number, else None."""
        if not self.done:
            self.done = True
            P = self._weights()
            as32 = lambda a: a.astype(np.float32).astype(np.float64)
            if P is not None and np.isfinite(P).all() and np.array_equal(as32(P), P) \
                    and not np.array_equal(as32(self.P_ref), self.P_ref):
                self.found = cases.PROBS_FLOAT32.hint
        return self.found

    def _weights(self):
        v = np.broadcast_to(np.eye(TT), (B, A, TT, TT)).copy()
        res = try_call(self.r.module, "attention_forward", self.q.copy(), self.k.copy(), v, self.mask)
        try:
            out = np.asarray(res[0], dtype=np.float64)
        except Exception:
            return None
        return out if out.shape == (B, A, TT, TT) else None


def _check_large_scores(r: Report, q, k, v, mask, bias) -> None:
    qb = q * 1000                # scores beyond 709, where exp overflows without the row maximum
    ob, _ = fwd(r, "attention_forward", qb, k, v, mask)
    stable = cases.UNSTABLE.hint
    ob = as_array(r, "out for scores of size ~1000", ob, qb.shape, stable)
    compare(r, "forward for scores of size ~1000", ob, L.attention_forward(qb, k, v, bias)[0], hint=stable)


def _check_fully_padded(r: Report, rng, q, k, v, float32) -> None:
    """A batch with a sequence that is padding only (it happens: an empty document, a short last batch
    padded out).  Its output may be anything finite: the mean of v with np.finfo.min (every score
    ties), softmax(S) v with google-research/bert's -10000."""
    dead_mask = np.array([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0]])
    od, cd = fwd(r, "attention_forward", q, k, v, dead_mask)
    od = as_array(r, "out with a fully padded sequence", od, q.shape, finite=False)
    finite = bool(np.isfinite(od).all())
    hint = None
    if not finite:
        hint = ((float32() and cases.SCORES_FLOAT32.hint)    # np.finfo(np.float64).min is -inf in float32
                or T.matching(lambda m: m.attention_forward(q, k, v, dead_mask)[0], od)
                or "the output holds NaN or inf when one sequence of the batch is all padding: keep the mask value "
                   "finite and never divide by a sum of weights that can be 0")
    r.require(finite, "a fully padded sequence gives a finite output (no NaN)", hint)
    ref_dead = L.attention_forward(q, k, v, L.attention_mask_bias(dead_mask, np.float64))[0]
    compare(r, "the other sequence of that batch vs minibert", od[0], ref_dead[0],
            hint="a fully padded sequence must not change the output of the other sequences of the batch")
    up = rng.standard_normal(q.shape)
    raised = T.raised(lambda m: m.attention_backward(up, m.attention_forward(q, k, v, dead_mask)[1]))
    dd = unpack(r, "attention_backward", bwd(r, "attention_backward", up, cd, hint=raised), 3, "dq, dk, dv")
    for n, g in zip(("dq", "dk", "dv"), dd):
        as_array(r, f"{n} with a fully padded sequence", g, q.shape,
                 "the backward pass gives NaN or inf for a fully padded sequence: never divide by a sum "
                 "of weights that can be 0, keep the mask value finite")
    r.ok("dq, dk, dv are finite with a fully padded sequence")


def _check_backward(r: Report, rng, q, k, v, mask, cache, float32) -> None:
    dout = rng.standard_normal(q.shape)

    def grads(m):
        return m.attention_backward(dout, m.attention_forward(q, k, v, mask)[1])
    result = bwd(r, "attention_backward", dout, cache, hint=T.raised(grads))
    dq, dk, dv = (as_array(r, n, g, q.shape)
                  for n, g in zip(("dq", "dk", "dv"), unpack(r, "attention_backward", result, 3, "dq, dk, dv")))
    f = forward_output(r, "attention_forward", q, k, v, mask)
    for i, (name, param, got) in enumerate((("dq", q, dq), ("dk", k, dk), ("dv", v, dv))):
        # a value no case reproduces: float32 weights, or the term of the backward pass a probe locates
        probe = BackwardProbe(r, name) if name != "dv" else (lambda _got: None)
        grad_check(r, name, f, param, dout, got, known=T.known(lambda m, i=i: grads(m)[i], of="attention_backward"),
                   explain=lambda got, probe=probe: float32(got) or probe(got))
