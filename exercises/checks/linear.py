"""The linear layer: y = x W^T + b, for x of any number of leading axes."""
from __future__ import annotations

import numpy as np

from minibert import ops as L

from ..cases import linear as cases
from ..harness import as_array, compare, grad_check
from ..report import Report
from .common import bwd, forward_output, fwd, unpack

T = cases.TABLE


def check(r: Report) -> None:
    rng = np.random.default_rng(0)
    W = rng.standard_normal((3, 5))
    b = rng.standard_normal(3)
    for shape in [(4, 5), (2, 3, 5)]:
        x = rng.standard_normal(shape)
        want, _ = L.linear_forward(x, W, b)
        y, cache = fwd(r, "linear_forward", x, W, b)
        y = as_array(r, f"y for x of shape {shape}", y, want.shape,
                     "y has shape (..., out): x @ W.T, since W is stored as (out, in)")
        compare(r, f"forward, x {shape}, vs minibert", y, want,
                known=T.known(lambda m: m.linear_forward(x, W, b)[0]))
        dy = rng.standard_normal(want.shape)

        def grads(m):
            return m.linear_backward(dy, m.linear_forward(x, W, b)[1])
        result = bwd(r, "linear_backward", dy, cache, hint=T.raised(grads))
        dx, dW, db = unpack(r, "linear_backward", result, 3, "dx, dW, db")
        dx = as_array(r, "dx", dx, x.shape, "dx has x's shape: dy @ W")
        dW = as_array(r, "dW", dW, W.shape, _shaped(lambda m: grads(m)[1], dW)
                      or "dW has W's shape (out, in): flatten to 2-D, then dy^T @ x")
        db = as_array(r, "db", db, b.shape, "db has b's shape (out,): sum dy over every axis but the last")
        f = forward_output(r, "linear_forward", x, W, b)
        for i, (name, param, got) in enumerate((("dx", x, dx), ("dW", W, dW), ("db", b, db))):
            grad_check(r, f"{name}, x {shape}", f, param, dy, got,
                       known=T.known(lambda m, i=i: grads(m)[i]))


def _shaped(compute, got):
    """The hint of the first case whose result has ``got``'s (wrong) shape."""
    shape = np.shape(got)
    return next((o.case.hint for o in T.each(compute) if o.raised is None and np.shape(o.value) == shape), None)
