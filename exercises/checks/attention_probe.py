"""Locating a wrong attention backward pass: read the scores' gradient dS through inputs that make it visible.

The backward pass ends with dq = dS k / sqrt(D) and dk = dS^T q / sqrt(D).
With T = D, k = sqrt(D) I and v = I, the forward pass is out = softmax(q) and
the student's dq IS the dS their backward computed (dP = dout v^T = dout);
with q = sqrt(D) I instead, their dk is dS^T.  Comparing that dS with the
terms of the softmax backward, dS = P * (dP - sum_keys(dP * P)), says which
term is missing, or that dS is right and the last step is not.
"""
from __future__ import annotations

import numpy as np

from ..calls import try_call

N = 4                      # tokens = head size, so that k (or q) can be a scaled identity


def _close(a, b) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-6, atol=1e-9))


class BackwardProbe:
    """``explain`` for the dq and dk gradient checks: one line naming the wrong term, or None."""

    def __init__(self, report, grad: str):
        self.r, self.grad = report, grad          # "dq" or "dk"

    def __call__(self, _got=None):
        rng = np.random.default_rng(11)
        scaled_eye = np.sqrt(N) * np.eye(N)[None, None]
        x = rng.standard_normal((1, 1, N, N))
        q, k = (x, scaled_eye.copy()) if self.grad == "dq" else (scaled_eye.copy(), x.swapaxes(-1, -2).copy())
        v, mask = np.eye(N)[None, None].copy(), np.ones((1, N), dtype=np.int64)
        dout = rng.standard_normal((1, 1, N, N))
        fwd = try_call(self.r.module, "attention_forward", q, k, v, mask)
        if not isinstance(fwd, (tuple, list)) or len(fwd) != 2:
            return None
        grads = try_call(self.r.module, "attention_backward", dout.copy(), fwd[1])
        try:
            g = np.asarray(grads[0 if self.grad == "dq" else 1], dtype=np.float64)
        except Exception:
            return None
        seen = g if self.grad == "dq" else g.swapaxes(-1, -2)          # the student's dS
        return _name_the_term(seen, x, dout, self.grad)


def _name_the_term(seen, scores, dP, grad: str):
    e = np.exp(scores - scores.max(-1, keepdims=True))
    P = e / e.sum(-1, keepdims=True)
    right = P * (dP - (dP * P).sum(-1, keepdims=True))
    other = "k" if grad == "dq" else "q"
    if _close(seen, right):
        return None
    if _close(seen, P * dP) or _close(seen, P * (1 - P) * dP):
        return ("dS, the gradient of the scores, is missing the softmax backward's row term: every weight of a "
                "row depends on every score of that row, so dS = P * (dP - sum over the keys of dP * P); "
                "P * dP (or its diagonal P * (1 - P) * dP) leaves that sum out")
    if _close(seen, dP):
        return "the softmax backward is missing: dS = P * (dP - sum over the keys of dP * P), not dP itself"
    ratio = float(np.sum(seen * right) / np.sum(right * right))
    if _close(seen, ratio * right):
        for factor, text in ((np.sqrt(N), "is missing the 1 / sqrt(D)"), (1 / np.sqrt(N), "divides by sqrt(D) twice"),
                             (-1.0, "has the wrong sign")):
            if abs(ratio - factor) < 1e-6 * abs(factor):
                return f"dS is right, but {grad} = dS {other} / sqrt(D) {text}"
        return f"dS is right up to a factor {ratio:.3g}: check the scale of {grad} = dS {other} / sqrt(D)"
    return None
