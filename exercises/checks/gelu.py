"""The exact GELU, x Phi(x), and its derivative Phi(x) + x phi(x)."""
from __future__ import annotations

import numpy as np

from minibert import ops as L

from ..cases import gelu as cases
from ..harness import as_array, compare, grad_check
from ..report import Report
from .common import bwd, forward_output, fwd

T = cases.TABLE


def check(r: Report) -> None:
    rng = np.random.default_rng(3)
    x = np.concatenate([np.linspace(-5, 5, 21), rng.standard_normal(15) * 2]).reshape(4, 9)
    want, _ = L.gelu_forward(x, "none")
    y, cache = fwd(r, "gelu_forward", x)
    y = as_array(r, "y", y, x.shape)
    compare(r, "forward vs minibert (exact GELU)", y, want, known=T.known(lambda m: m.gelu_forward(x)[0]))
    dy = rng.standard_normal(x.shape)
    dx = as_array(r, "dx", bwd(r, "gelu_backward", dy, cache), x.shape)
    grad_check(r, "dx", forward_output(r, "gelu_forward", x), x, dy, dx,
               known=T.known(lambda m: m.gelu_backward(dy, m.gelu_forward(x)[1])))
