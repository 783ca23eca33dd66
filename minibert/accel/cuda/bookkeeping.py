"""A training step's bookkeeping on the GPU in one launch: the health watch and the metrics' sums.

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

from . import kernels

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
