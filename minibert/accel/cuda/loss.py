"""Softmax cross-entropy in two kernels: the forward and its mean in one launch, the backward in one.

The reference (``ops/loss.py``) writes the loss as array expressions: on a GPU that is a dozen
launches for the forward and half a dozen for the backward, each a pass over the (N, C) logits,
which for the MLM head are N labelled positions by a vocabulary of C = 30,522.  Here:

``xent_fwd``  one block per row: the row's maximum m and log sum exp(z - m) (two reads of the
              row), its negative log-likelihood log_sum - (z[label] - m) (0 on an ignored row),
              and, by the last block to finish (a ticket, as the column sums take), the mean
              over the labelled rows, each thread adding a fixed share of them: the loss and
              its denominator max(labelled rows, 1) stay on the device, and the same logits
              give the same bits
``xent_bwd``  one block per row: dz = (exp(z - m - log_sum) - onehot(label)) * dloss / denom,
              0 on an ignored row; a ``dloss`` on the device (mixed precision's loss scale, a
              float64) is rounded to the logits' dtype here, not by a launch of its own

The cache is the reference's ``CrossEntropyCache``, so the model reads ``denom`` as before.
"""
from __future__ import annotations

import numpy as np

from ...constants import IGNORE_INDEX
from ...ops.common import get_array_module
from ...ops import loss as ref
from ...ops.loss import CrossEntropyCache, check_cross_entropy, mean_nll
from . import kernels
from .kernels import applies

XENT_FWD = r"""
extern "C" __global__ void xent_fwd(const T* logits, const long long* labels, const long long ignore,
                                    T* row_max, T* log_sum, long long* safe, bool* valid, T* nll,
                                    unsigned int* ticket, T* loss, T* denom, const int C) {
    __shared__ T sh[32];
    __shared__ bool last;
    const long long row = blockIdx.x;
    const T* z = logits + row * C;
    T m = neg_inf(T(0));
    for (int j = threadIdx.x; j < C; j += blockDim.x) m = fmax(m, z[j]);
    m = block_max(m, sh);
    T s = 0;
    for (int j = threadIdx.x; j < C; j += blockDim.x) s += exp(z[j] - m);
    s = block_sum(s, sh);
    if (threadIdx.x == 0) {
        const long long y = labels[row];
        const bool ok = y != ignore, inside = y >= 0 && y < C;
        const T ls = log(s);
        row_max[row] = m;
        log_sum[row] = ls;
        safe[row] = ok && inside ? y : 0;
        valid[row] = ok;
        // a label that is no class is never read past its row: its loss is NaN, which the run reports
        nll[row] = ok ? (inside ? ls - (z[y] - m) : sqrt(T(-1))) : T(0);
        __threadfence();                  // the row's numbers reach global memory before the ticket
        last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    // every row is written: the last block adds them (read from L2, past this SM's own cache), each
    // thread a fixed share of the rows, then the block's sum in a fixed order
    T total = 0, n = 0;
    for (long long r = threadIdx.x; r < gridDim.x; r += blockDim.x) {
        total += __ldcg(nll + r);
        n += labels[r] != ignore ? T(1) : T(0);
    }
    total = block_sum(total, sh);
    n = block_sum(n, sh);
    if (threadIdx.x == 0) {
        const T d = n > T(0) ? n : T(1);
        *denom = d;
        *loss = total / d;
        *ticket = 0u;
    }
}
"""

XENT_BWD = r"""
extern "C" __global__ void xent_bwd(const T* logits, const T* row_max, const T* log_sum, const long long* safe,
                                    const bool* valid, const T* denom, const double* dloss_on_device,
                                    const int on_device, const T dloss, T* dlogits, const int C) {
    const long long row = blockIdx.x;
    const T w = valid[row] ? (on_device ? (T)*dloss_on_device : dloss) / *denom : T(0);
    const T m = row_max[row], ls = log_sum[row];
    const long long y = safe[row];
    const T* z = logits + row * C;
    T* d = dlogits + row * C;
    for (int j = threadIdx.x; j < C; j += blockDim.x) {
        T p = exp((z[j] - m) - ls);
        if (j == y) p -= T(1);
        d[j] = p * w;
    }
}
"""


def softmax_cross_entropy_forward(logits, labels, ignore_index=IGNORE_INDEX):
    """``ops.softmax_cross_entropy_forward`` in one launch, the loss and the count of labelled rows
    kept on the device (the reference reads the count back, which would make a step wait for the GPU)."""
    check_cross_entropy(logits, labels)
    xp = get_array_module(logits)
    N, C = logits.shape
    if not applies(logits) or not kernels.on_device(labels) or labels.dtype != np.int64 or not N or not C:
        valid = labels != ignore_index
        return mean_nll(logits, labels, valid, xp.maximum(valid.sum(), 1).astype(logits.dtype))
    labels = xp.ascontiguousarray(labels)
    # (empty_like: arrays of the logits' kind, which the CPU stand-in's device arrays need to stay so)
    row_max, log_sum, nll = (xp.empty_like(logits, shape=(N, 1)) for _ in range(3))
    safe, valid = xp.empty_like(labels, shape=N), xp.empty_like(labels, np.bool_, shape=N)
    loss, denom = xp.empty_like(logits, shape=()), xp.empty_like(logits, shape=())
    kernels.kernel("xent_fwd", XENT_FWD, logits.dtype)(
        (N,), (kernels.threads_per_row(C),),
        (logits, labels, np.int64(ignore_index), row_max, log_sum, safe, valid, nll, kernels.tickets(), loss,
         denom, np.int32(C)))
    return loss, CrossEntropyCache(logits, row_max, log_sum, safe, valid, denom)


def softmax_cross_entropy_backward(dloss, cache):
    """``ops.softmax_cross_entropy_backward`` in one launch; ``dloss`` a number or a 0-d device array."""
    logits, row_max, log_sum, safe, valid, denom = cache
    if not (applies(logits, row_max, log_sum) and kernels.on_device(denom) and safe.dtype == np.int64):
        return ref.softmax_cross_entropy_backward(dloss, cache)
    xp = get_array_module(logits)
    N, C = logits.shape
    dlogits = xp.empty_like(logits)
    t = logits.dtype.type
    on_device = kernels.on_device(dloss)
    kernels.kernel("xent_bwd", XENT_BWD, logits.dtype)(
        (N,), (kernels.threads_per_row(C),),
        (logits, row_max, log_sum, safe, valid, denom.astype(logits.dtype, copy=False),
         dloss.astype(np.float64, copy=False) if on_device else kernels.dummy(np.float64),
         np.int32(on_device), t(0 if on_device else dloss), dlogits, np.int32(C)))
    return dlogits
