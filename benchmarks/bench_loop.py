"""How fast ``pretrain`` trains, against the bare step at the same shapes, in one process.

    python benchmarks/bench_loop.py --device cuda --config mini --batch-size 128 --seq-len 128
    python benchmarks/bench_loop.py --device cuda --config base --batch-size 64 --seq-len 128 --mixed-precision
    python benchmarks/bench_loop.py --config tiny --batch-size 16 --seq-len 64 --steps 30   # the CPU

The loop adds to the step: drawing and masking the next batch (in a thread), checking it
and copying it to the device, the metrics, the schedule.  The first row times
``pretrain`` on the built-in corpus: the time between two train records (which the host
writes after reading the step's numbers, so the device has finished the steps in between)
over the steps between them, from the first record on (the steps before it warm up; the
evaluation and the save come after the last).  The second
row times the bare step on the same model and shapes, as ``bench_step.py`` does: forward
with labels, backward, clipping, AdamW (with the loss scaler in mixed precision), each
step ending with ``float(loss)``, which waits for the device.  The loop reads nothing
back between its log steps, so on a GPU it may beat the bare step; on the CPU every
read is free and the two should be close.  Tokens per second count B x T, padding
included, in both rows.  The line after the table says how long making a batch takes on the
host: a GPU step bound by its launches has no host time to spare for it.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--config", default="mini")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--steps", type=int, default=80, help="steps of the run (the bare step is timed as many)")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--mixed-precision", action="store_true")
    p.add_argument("--corpus", default="builtin")
    args = p.parse_args(argv)
    if args.steps < 2 * args.log_every or args.log_every < 1:
        p.error(f"--steps {args.steps} leaves no timed window: give at least 2 x --log-every ({2 * args.log_every})")
    return args


def time_loop(args, out):
    """(ms per step of pretrain's steps, its model) from the times of its train records."""
    from minibert.train import TrainArgs, pretrain
    stamps = []

    def on_record(entry):
        if entry["kind"] == "train":
            stamps.append((entry["step"], time.perf_counter()))
    run = TrainArgs(corpus=args.corpus, config=args.config, device=args.device, batch_size=args.batch_size,
                    seq_len=args.seq_len, steps=args.steps, log_every=args.log_every, eval_every=args.steps,
                    save_every=args.steps, warmup=args.log_every, mixed_precision=args.mixed_precision,
                    progress=False, plot=False, out=str(out))
    result = pretrain(run, log=lambda *a, **k: None, on_record=on_record)
    # timed from the first record on: the steps before it hold the warm-up (compilation, allocation);
    # the last record is written before the evaluation and the save
    windows = [(t1 - t0) / (s1 - s0) for (s0, t0), (s1, t1) in zip(stamps, stamps[1:])]
    return 1e3 * statistics.median(windows), result.model


def time_batches(args, run_dir, n=20):
    """ms to make one batch on the host, masked and padded (what ``Prefetch``'s thread does while a step
    runs), with the run's own vocabulary and shapes: on a launch-bound GPU step it is host time the
    step does not have to spare."""
    from minibert.train import TrainArgs
    from minibert.train.data import prepare_data
    setup = TrainArgs(corpus=args.corpus, config=args.config, batch_size=args.batch_size, seq_len=args.seq_len,
                      steps=args.steps, vocab=str(run_dir / "vocab.txt"), out=str(run_dir.parent / "batches"))
    stream = prepare_data(setup, run_dir.parent / "batches", log=lambda *a, **k: None)[2]
    stream.next_batch()
    t0 = time.perf_counter()
    for _ in range(n):
        stream.next_batch()
    return 1e3 * (time.perf_counter() - t0) / n


def time_bare(args, model):
    """ms per bare step on ``model`` at the same shapes: the trainer's step less its metrics, each ending
    with ``float(loss)``."""
    from bench_step import make_batch
    from minibert.optim import AdamW, LossScaler, unscale_and_clip
    cfg = dict(vocab_size=model.config.vocab_size)
    batch, _ = make_batch(cfg, args.batch_size, args.seq_len)
    opt, scaler = AdamW(model.params, lr=1e-5), LossScaler() if args.mixed_precision else None
    model.train()

    def step():         # the trainer's step, less its metrics
        out = model.forward(**batch, train=True)
        loss_scale = 1.0 if scaler is None else scaler.scale
        model.backward(loss_scale=loss_scale)
        norm = unscale_and_clip(model.params, 1.0, loss_scale)
        opt.step(take=None if scaler is None else scaler.update(model.xp.isfinite(norm)))
        return float(out.loss)
    for _ in range(3):
        step()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t0)
    assert math.isfinite(loss), f"the bare step's loss is {loss}"
    return 1e3 * statistics.median(times)


def main(argv=None):
    args = parse(argv)
    with tempfile.TemporaryDirectory() as tmp:
        loop_ms, model = time_loop(args, Path(tmp) / "run")
        batch_ms = time_batches(args, Path(tmp) / "run")
    bare_ms = time_bare(args, model)
    tokens = args.batch_size * args.seq_len
    precision = "mixed float16" if args.mixed_precision else "float32"
    print(f"# {args.config}, batch {args.batch_size} x {args.seq_len}, {precision}, device {args.device}; "
          f"{args.steps} steps, a record every {args.log_every}")
    print("| form | ms per step | tokens/s | against the bare step |")
    print("|---|---:|---:|---:|")
    for name, ms in (("pretrain", loop_ms), ("bare step", bare_ms)):
        print(f"| {name} | {ms:.1f} | {tokens / ms * 1e3:,.0f} | {ms / bare_ms:.2f}x |")
    print(f"\nmaking a batch on the host (mask and pad, the prefetching thread's work): {batch_ms:.2f} ms, "
          f"{batch_ms / bare_ms:.0%} of the bare step")


if __name__ == "__main__":
    main()
