"""The FLOPs of one training step, counted as notebook 7 counts them, and model FLOPs utilisation.

The count is compared with minibert's (``minibert.model.flops``) for several
models and batches (BERT's tiny and base among them, and one where nothing is
labelled); MFU for two machines.  Both to a relative error of 1e-12: a count
is an integer, and a rate is one division away from it.
"""
from __future__ import annotations

from types import SimpleNamespace

from minibert.model.flops import step_flops

from ..calls import call
from ..cases import step_flops as cases
from ..harness import as_array, compare
from ..report import Report

T = cases.TABLE
TOL = 1e-12
COUNT = "training_step_flops"
# (what, L, H, I, V, B, T, n_labelled): the labelled share is 15% of the tokens, as in pre-training.  The first
# has sizes that tell every usual miscount from every other (no two terms alike: L != 2, H != T, I != 4 H), so
# the first FAIL line names the right one; tiny and base have the sizes people use
CONFIGS = (("L3 H24 I40 V101, 3 x 7 tokens, 5 labelled", 3, 24, 40, 101, 3, 7, 5),
           ("tiny, 16 x 128 tokens, 307 labelled", 2, 128, 512, 30522, 16, 128, 307),
           ("base, 32 x 512 tokens, 2458 labelled", 12, 768, 3072, 30522, 32, 512, 2458),
           ("L3 H8 I20 V50, 2 x 5 tokens, 3 labelled", 3, 8, 20, 50, 2, 5, 3),
           ("L1 H16 I64 V100, 4 x 16, none labelled", 1, 16, 64, 100, 4, 16, 0))
# (what, FLOPs per step, seconds per step, peak FLOP/s)
RATES = (("12.9 GFLOP in 0.224 s, peak 200 GFLOP/s", 12.9e9, 0.224, 200e9),
         ("3.35 TFLOP in 78.2 ms, peak 60 TFLOP/s", 3.35e12, 0.0782, 60e12))


def _check_count(r: Report) -> None:
    for what, *sizes in CONFIGS:
        got = call(r, COUNT, *sizes, hint=T.raised(lambda m: m.training_step_flops(*sizes)))
        got = as_array(r, f"FLOPs for {what}", got, (), "return one number: the FLOPs of the whole step")
        compare(r, f"FLOPs, {what}", got, _minibert_count(*sizes), tol=TOL,
                known=T.known(lambda m: m.training_step_flops(*sizes), of=COUNT),
                hint="count each product 2 m n k, forward + backward = 3 x forward: the encoder's weights, "
                     "both attention products, the pooler, the MLM head at the labelled positions")


def _check_mfu(r: Report) -> None:
    for what, *args in RATES:
        got = call(r, "mfu", *args, hint=T.raised(lambda m: m.mfu(*args)))
        got = as_array(r, f"MFU for {what}", got, (), "return one number, a fraction of the peak")
        flops, seconds, peak = args
        compare(r, f"MFU, {what}", got, flops / seconds / peak, tol=TOL,
                known=T.known(lambda m: m.mfu(*args), of="mfu"),
                hint="MFU = (flops_per_step / seconds_per_step) / peak_flops")


def _minibert_count(L, H, I, V, B, T, n_labelled) -> int:
    cfg = SimpleNamespace(num_hidden_layers=L, hidden_size=H, intermediate_size=I, vocab_size=V)
    return step_flops(cfg, B, T, n_labelled)


# what each part checks: a notebook checks one function at a time (checks/__init__.py)
PARTS = ((("training_step_flops",), _check_count), (("mfu",), _check_mfu))
