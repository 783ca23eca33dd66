"""AdamW on flat float32 NumPy buffers, in cache-sized blocks over the pool."""
from __future__ import annotations

import numpy as np

from ..pool import for_rows


def adamw_update(p, g, m, v, b1, b2, step_size, root_c2, eps, decay, n_decay, go=None):
    """``ops.adamw_update`` on flat float32 buffers: each block read once, every pass in cache.

    The reference makes about fourteen passes over buffers as large as the
    model (45 MB each for ``mini``), each one through main memory.  Here each
    block of the four buffers is read once and every step of the rule runs on
    it while it is in cache: the weight decay on the part of the block in the
    decayed group, then the moments and the parameter.  The same float32
    operations in the same order as the reference: the same bits (tested).
    """
    if go is not None and not go:      # a step the loss scaler skips
        return
    def block(r0, r1):
        if decay != 1.0 and r0 < n_decay:
            p[r0:min(r1, n_decay)] *= decay
        _update(p[r0:r1], g[r0:r1], m[r0:r1], v[r0:r1], np.empty(r1 - r0, dtype=p.dtype),
                b1, b2, step_size, root_c2, eps)
    for_rows(block, p.size, 1)


def _update(p, g, m, v, tmp, b1, b2, step_size, root_c2, eps):
    """The rule in place on one block, ``tmp`` its only scratch array."""
    # m <- b1 m + (1 - b1) g ;  v <- b2 v + (1 - b2) g^2
    m *= b1
    np.multiply(g, 1.0 - b1, out=tmp)
    m += tmp
    v *= b2
    np.multiply(g, g, out=tmp)
    tmp *= 1.0 - b2
    v += tmp
    # p <- p - step_size * m / (sqrt(v) / sqrt(c2) + eps)
    np.sqrt(v, out=tmp)
    tmp /= root_c2
    tmp += eps
    np.divide(m, tmp, out=tmp)
    tmp *= step_size
    p -= tmp
