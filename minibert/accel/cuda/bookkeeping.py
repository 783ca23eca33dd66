"""A training step's bookkeeping on the GPU: its batch's sums in one launch, the health watch and the
metrics' window in one more.

``batch_sums`` makes what ``train/metrics.py``'s ``batch_stats`` makes of a batch's output, the
losses times their counts and the correct predictions of both heads, where the array expressions
are about ten launches (an argmax over each head's logits, a comparison, a count, a cast, a
product): one block per row of logits finds the row's argmax as NumPy's does (the first largest
value, or the first NaN) and compares it with the label; the last block to finish adds the rows'
hits in a fixed order and writes the sums.

After each step the trainer keeps two things on the device, so that no step waits to read
them: the first step that went wrong (``train/health.py``'s ``Health.watch``) and the sums of
the steps since the last log (``train/metrics.py``'s ``MetricsLog.add_step``).  Written as array
expressions they are about twenty launches of one number each (a comparison, a ``where``, a
cast, an add), which at the lab sizes is a tenth of a step.  ``step_book`` does both in one
launch of one thread, with the same arithmetic in double precision, so the same bits:

    loss  = mlm_loss / max(n_mlm, 1) + (nsp_loss / n_nsp if n_nsp else 0)   (``summarize``)
    bad   = loss not finite, or the gradient norm not finite and the loss scale <= 1 (0: no scaling)
    first = (step, loss, norm, scale) if bad and no step was bad before, else as it was
    sums += (mlm_loss, nsp_loss, mlm_correct, nsp_correct, norm if finite else 0, 0 if finite else 1)
"""
from __future__ import annotations

import numpy as np

from ...ops.common import get_array_module
from . import kernels

BATCH_SUMS = r"""
extern "C" __global__ void batch_sums(const T* mlm, const long long* mlm_y, const long long n_mlm, const int V,
                                      const T* nsp, const long long* nsp_y, const int C, const T* mlm_loss,
                                      const T* nsp_loss, int* hit, unsigned int* ticket, double* losses,
                                      long long* hits) {
    __shared__ T best[256];
    __shared__ int at[256];
    __shared__ long long part[256];
    __shared__ bool last;
    const long long row = blockIdx.x;
    const bool is_mlm = row < n_mlm;
    const long long r = is_mlm ? row : row - n_mlm;
    const int n = is_mlm ? V : C;
    const T* z = is_mlm ? mlm + r * V : nsp + r * C;
    T b = neg_inf(T(0));
    int i = n;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {     // j rises: a tie keeps the first
        const T v = z[j];
        if (isnan(b)) continue;                              // the first NaN of this thread's share
        if (isnan(v) || v > b || i == n) { b = v; i = j; }
    }
    best[threadIdx.x] = b;
    at[threadIdx.x] = i;
    __syncthreads();
    if (threadIdx.x == 0) {          // the threads' candidates in order: the first NaN, else the first largest
        for (int t = 1; t < blockDim.x; ++t) {
            const T v = best[t];
            const int k = at[t];
            if (k == n) continue;
            if (i == n || (isnan(v) ? (!isnan(b) || k < i) : (v > b || (v == b && k < i)))) {
                b = v; i = k;
            }
        }
        hit[row] = i == (int)(is_mlm ? mlm_y[r] : nsp_y[r]);
        __threadfence();                  // the row's hit reaches global memory before the ticket
        last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    // every row is written: the last block counts the hits of each head, read from L2
    for (int head = 0; head < 2; ++head) {
        const long long lo = head ? n_mlm : 0, hi = head ? (long long)gridDim.x : n_mlm;
        long long s = 0;
        for (long long k = lo + threadIdx.x; k < hi; k += blockDim.x) s += __ldcg(hit + k);
        part[threadIdx.x] = s;
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int t = 1; t < blockDim.x; ++t) s += part[t];
            hits[head] = s;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        losses[0] = (double)*mlm_loss * (double)n_mlm;
        losses[1] = (long long)gridDim.x > n_mlm ? (double)*nsp_loss * (double)((long long)gridDim.x - n_mlm) : 0.0;
        *ticket = 0u;
    }
}
"""

# the sums kept on the device, in this order (the others, counts the host knows, stay on the host)
SUMS = ("mlm_loss", "nsp_loss", "mlm_correct", "nsp_correct", "grad_norm", "skipped")

STEP_BOOK = r"""
extern "C" __global__ void step_book(const double* mlm_loss, const double* nsp_loss, const long long* mlm_hits,
                                     const long long* nsp_hits, const int has_nsp, const double n_mlm,
                                     const double n_nsp, const T* norm, const bool* finite,
                                     const double* scale_on_device, const double scale, const int scaled_on_device,
                                     const double step, double* sums, double* first) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const double ml = *mlm_loss, nl = has_nsp ? *nsp_loss : 0.0;
    const double loss = ml / (n_mlm > 1.0 ? n_mlm : 1.0) + (n_nsp != 0.0 ? nl / n_nsp : 0.0);
    const double g = (double)*norm, s = scaled_on_device ? *scale_on_device : scale;
    const bool ok = *finite;
    const bool bad = !isfinite(loss) || (!ok && s <= 1.0);
    if (bad && first[0] == 0.0) {
        first[0] = step; first[1] = loss; first[2] = g; first[3] = s;
    }
    sums[0] += ml;
    sums[1] += nl;
    sums[2] += (double)*mlm_hits;
    sums[3] += has_nsp ? (double)*nsp_hits : 0.0;
    sums[4] += ok ? g : 0.0;
    sums[5] += ok ? 0.0 : 1.0;
}
"""


def applies(sums: dict, grad_norm, finite, loss_scale) -> bool:
    """Whether ``step_book`` takes these: the step's sums as the trainer makes them on a GPU (losses
    in float64 and hit counts in int64, 0-d on the device; the NSP ones 0 without pairs), a norm in
    float32 or float64 and its verdict there, a loss scale that is a number or a float64 there."""
    def there(x, dtype):
        return kernels.on_device(x) and x.shape == () and x.dtype == dtype
    nsp = sums["n_nsp"] != 0
    return (there(sums["mlm_loss"], np.float64) and there(sums["mlm_correct"], np.int64)
            and (there(sums["nsp_loss"], np.float64) and there(sums["nsp_correct"], np.int64) if nsp
                 else sums["nsp_loss"] == 0 and sums["nsp_correct"] == 0)
            and kernels.on_device(grad_norm) and grad_norm.shape == () and grad_norm.dtype in kernels.CTYPES
            and there(finite, np.bool_)
            and (loss_scale is None or isinstance(loss_scale, (int, float)) or there(loss_scale, np.float64)))


def step_book(step: int, sums: dict, grad_norm, finite, loss_scale, acc, first) -> None:
    """One launch: ``first`` (4 float64 on the device, zeros until a step goes wrong) and ``acc`` (the
    ``SUMS``, float64 on the device) updated as the module's docstring says.  ``applies`` must hold."""
    nsp = sums["n_nsp"] != 0
    dummy_f, dummy_i = kernels.dummy(np.float64), kernels.dummy(np.int64)
    scaled_there = loss_scale is not None and kernels.on_device(loss_scale)
    kernels.kernel("step_book", STEP_BOOK, grad_norm.dtype)(
        (1,), (32,),
        (sums["mlm_loss"], sums["nsp_loss"] if nsp else dummy_f, sums["mlm_correct"],
         sums["nsp_correct"] if nsp else dummy_i, np.int32(nsp), np.float64(sums["n_mlm"]),
         np.float64(sums["n_nsp"]), grad_norm, finite, loss_scale if scaled_there else dummy_f,
         np.float64(0.0 if loss_scale is None or scaled_there else loss_scale), np.int32(scaled_there),
         np.float64(step), acc, first))


def takes(out) -> bool:
    """Whether ``batch_sums`` takes this output of a training forward: logits of a kernel's dtype on
    the device, C-ordered (N, V) at the labelled positions and (B, 2), int64 labels there, the
    losses 0-d arrays there (no NSP logits: a --no-nsp batch)."""
    logits, nsp = out.mlm_logits, out.nsp_targets

    def there(x, dtype=None):
        return kernels.on_device(x) and (dtype is None or x.dtype == dtype)
    ok = (there(logits) and logits.dtype in kernels.CTYPES and logits.ndim == 2 and logits.flags.c_contiguous
          and there(out.mlm_targets, np.int64) and out.mlm_targets.shape == logits.shape[:1]
          and there(out.mlm_loss, logits.dtype) and out.mlm_loss.shape == ())
    if ok and nsp is not None:
        z = out.nsp_logits
        ok = (there(z, logits.dtype) and z.ndim == 2 and z.flags.c_contiguous and there(nsp, np.int64)
              and nsp.shape == z.shape[:1] and there(out.nsp_loss, logits.dtype) and out.nsp_loss.shape == ())
    return ok and len(logits) + (0 if nsp is None else len(nsp)) > 0 and 0 < logits.shape[1] < 2 ** 31


def batch_sums(out):
    """One launch: (mlm_loss * n_mlm, nsp_loss * n_nsp, MLM hits, NSP hits), 0-d arrays on the device
    (float64, float64, int64, int64; the NSP ones 0 without NSP labels).  ``takes`` must hold."""
    logits, labels, nsp = out.mlm_logits, out.mlm_targets, out.nsp_targets
    xp = get_array_module(logits)
    n_mlm, n_nsp = len(labels), 0 if nsp is None else len(nsp)
    # (empty_like: arrays of the logits' kind, which the CPU stand-in's device arrays need)
    hit = xp.empty_like(labels, np.int32, shape=n_mlm + n_nsp)
    losses, hits = xp.empty_like(logits, np.float64, shape=2), xp.empty_like(labels, shape=2)
    dummy_t, dummy_i = kernels.dummy(logits.dtype), kernels.dummy(np.int64)
    kernels.kernel("batch_sums", BATCH_SUMS, logits.dtype)(
        (n_mlm + n_nsp,), (kernels.threads_per_row(max(logits.shape[1], 2)),),
        (logits, labels, np.int64(n_mlm), np.int32(logits.shape[1]), out.nsp_logits if n_nsp else dummy_t,
         nsp if n_nsp else dummy_i, np.int32(out.nsp_logits.shape[1] if n_nsp else 2), out.mlm_loss,
         out.nsp_loss if n_nsp else dummy_t, hit, kernels.tickets(), losses, hits))
    # 0-d views (an index alone would give a NumPy scalar on the CPU stand-in, not an array)
    return losses[0, ...], losses[1, ...], hits[0, ...], hits[1, ...]
