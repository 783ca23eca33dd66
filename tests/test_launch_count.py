"""How many kernels a GPU training step launches, counted on the CPU stand-in.

At the lab sizes (tiny to small, seq-len 128) a GPU step is launch-bound: the GPU waits for the
host, which spends some microseconds in CuPy for each kernel it launches, so the count of
launches sets the step's time more than its arithmetic does.  Without a GPU the count is still
known: on the stand-in of ``test_sync_free_step`` every operation on device arrays that CuPy runs
as a kernel is recorded with the line of minibert that made it (an elementwise operation, a
reduction, a copy, a gather or scatter, a product, a fill; each of minibert's own kernels), and
views (reshapes, transposes) are not, unless they copy.  The count is CuPy's launches to within a
few: some CuPy operations launch more than one kernel (its stack or concatenate of up to eight
arrays copies each one), and cuBLAS may launch more than one per product.

The test holds each step to the count measured when it was written (a little above it), so that a
change that adds launches is seen, and prints where a step's launches come from:
    python -m pytest tests/test_launch_count.py -s
"""
import collections

import numpy as np
import pytest

import cuda_on_cpu
import minibert.train.loop as loop
from minibert.train import pretrain
from test_sync_free_step import LAUNCHES, _args, on_gpu_stand_in  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(cuda_on_cpu.unavailable() is not None, reason=cuda_on_cpu.unavailable() or "")

# launches of one training step, tiny, batch 2 x 32: 124 in float32 and 136 in mixed precision
# (335 and 420 with two kernels a gradient's add into its buffer, 296 and 381 with one each, 278 and
# 363 once a column sum was one launch, not two, 241 and 326 once the adds were made together, 180
# and 267 with the softmax cross-entropy in two kernels, 255 once mixed precision's float16 weight
# gradients were widened by those adds, 164 and 237 with the step's bookkeeping in one kernel (a
# count that includes the four launches that turn the losses into sums, which the stand-in missed
# before, its loss then being a host array), and 160 and 233 with clipping's factor made in the
# kernel that scales, then 213 in mixed precision with its decision after a step (the loss scaler's
# rule, AdamW's step count and bias correction) in one kernel and its unscaling in one, and 199 with
# a linear layer's dy rounded to float16 by the pass that sums it), with a few to spare; a change
# may lower them (then lower these too), not raise them; then 156 and 195 with the attention kernel
# saying which sequences have no open key (two launches a layer before), and 144 and 183 with the
# post-LN residual connection, dropout, the sum and LayerNorm, in the LayerNorm's kernels, and 137
# and 176 with a batch's sums (the losses times their counts, the hits of both heads) in one kernel
# (the stand-in does not count the two argmax it replaces: on a GPU the step saves nine launches),
# and 134 and 173 with the residual sums of the backward made by the LayerNorm kernels they feed; then
# 157 in mixed precision with float16 passed between attention and its two projections (q, k and v
# rounded by the pass that adds their bias), 131 and 150 with the feed-forward bias added by the GELU
# kernel, which in mixed precision also reads the float16 product and writes the next one's operand,
# 146 with the LayerNorm kernels reading a linear layer's float16 dx, 127 and 142 with the two
# output biases of a layer added by the residual connection's kernel, and 139 in mixed precision
# with the heads' float16 dx widened by the ops that read them; then 122 and 134 with the pooler's bias,
# tanh and its backward in one kernel each way (where they were two and three), and attention's mask
# bias in one (where it was three).  The count then saw the copies that ascontiguousarray and a
# reshape make of a device array (128 and 140, the same step); 124 and 136 with q, k and v made from
# the product by one kernel that adds their bias and copies them into heads (a bias add and a copy
# before), and their gradients put back by one (a stack and a copy here, a copy each on a GPU).
# 137 and 149, the same step seen more fully, and one launch more: the count now also sees the
# arrays an op makes with get_array_module(x) (the embeddings' and the heads' zeros and what is done
# with them), the gradient buffer's fill, and attention's backward copying its transposed gradient
# once (CuPy's product of a transposed operand copied it inside, twice, unseen); the launch more is
# the dropout base written into device memory at each step, which a CUDA graph reads
MOST = {"float32": 137, "mixed": 149}


def launches_per_step(corpus_file, tmp_path, monkeypatch, **kw):
    """[(step, Counter of launch sites)] of a 3-step run that logs at its end only.  (The stand-in counts
    minibert's own kernels as launches too, one each: ``test_sync_free_step._record_kernels``.)"""
    steps = []
    real = loop.train_step

    def step(run, lr):
        before = len(LAUNCHES)
        real(run, lr)
        steps.append((run.step, collections.Counter(LAUNCHES[before:])))
    monkeypatch.setattr(loop, "train_step", step)
    pretrain(_args(corpus_file, tmp_path / "run", steps=3, log_every=3, eval_every=3, save_every=3, **kw),
             log=lambda *a: None)
    return steps


def report(counts: collections.Counter, top=25) -> str:
    lines = [f"{n:4d}  {what}" for what, n in counts.most_common(top)]
    return f"{sum(counts.values())} launches, {len(counts)} sites; the most:\n" + "\n".join(lines)


@pytest.mark.parametrize("precision", ["float32", "mixed"])
def test_a_gpu_step_launches_no_more_kernels_than_it_did(corpus_file, tmp_path, monkeypatch, on_gpu_stand_in,
                                                         precision):
    steps = launches_per_step(corpus_file, tmp_path, monkeypatch, mixed_precision=precision == "mixed",
                              max_grad_norm=1.0)
    assert [s for s, _ in steps] == [1, 2, 3]
    counts = [sum(c.values()) for _, c in steps]
    assert counts[1] == counts[2], f"the steps after the first launch the same kernels: {counts}"
    print(f"\n{precision}: " + report(steps[1][1]))
    assert counts[1] <= MOST[precision], report(steps[1][1])


def test_the_readme_quotes_the_counts_held_here():
    from pathlib import Path
    text = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8").split())
    assert f"{MOST['mixed']} in mixed precision against {MOST['float32']} in float32 at tiny" in text


def test_the_count_sees_an_added_launch(corpus_file, tmp_path, monkeypatch, on_gpu_stand_in):
    """The counting itself: one more elementwise operation per GELU is one more launch each, seen
    where the GELU is called."""
    from minibert import accel
    base = launches_per_step(corpus_file, tmp_path / "a", monkeypatch)[1][1]
    real = accel.cuda.gelu_forward
    monkeypatch.setattr(accel.cuda, "gelu_forward", lambda x, *a, **k: real(x * 1.0, *a, **k))
    more = launches_per_step(corpus_file, tmp_path / "b", monkeypatch)[1][1]
    from minibert.model import BertConfig
    n_gelus = BertConfig.from_preset("tiny").num_hidden_layers + 1          # a layer's, and the MLM head's
    multiplies = [sum(n for what, n in c.items() if what.startswith("multiply ")) for c in (base, more)]
    assert n_gelus > 0 and multiplies[1] - multiplies[0] == n_gelus
    assert sum(more.values()) == sum(base.values()) + n_gelus
