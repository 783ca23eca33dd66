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
included, in both rows.

The lines after the table are about the host.  Making a batch (masking and padding) takes a few
ms, and a GPU step bound by its launches has no host time to spare for it.  So a second table
imitates such a step on the host: a thread busy in the interpreter for as long as the bare step
lasts (as the thread launching kernels is), alone, then beside each way ``pretrain`` can make
its batches (``--data-worker``): a thread of the same process, which shares its interpreter,
or a process of its own.
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
    p.add_argument("--cuda-graph", action="store_true", help="pretrain's steps replayed as one CUDA graph each")
    p.add_argument("--corpus", default="builtin")
    p.add_argument("--data-worker", default="auto", choices=("auto", "thread", "process"),
                   help="how pretrain makes its batches (its flag of the same name)")
    p.add_argument("--busy-ms", type=float, help="the imitated step's length (default: the bare step's)")
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
                    data_worker=args.data_worker, progress=False, plot=False, out=str(out),
                    cuda_graph=args.cuda_graph)
    result = pretrain(run, log=lambda *a, **k: None, on_record=on_record)
    # timed from the first record on: the steps before it hold the warm-up (compilation, allocation);
    # the last record is written before the evaluation and the save
    windows = [(t1 - t0) / (s1 - s0) for (s0, t0), (s1, t1) in zip(stamps, stamps[1:])]
    return 1e3 * statistics.median(windows), result.model


def run_stream(args, run_dir):
    """The run's batch stream, made again with its own vocabulary and shapes (``pretrain`` keeps its own)."""
    from minibert.train import TrainArgs
    from minibert.train.data import prepare_data
    setup = TrainArgs(corpus=args.corpus, config=args.config, batch_size=args.batch_size, seq_len=args.seq_len,
                      steps=args.steps, vocab=str(run_dir / "vocab.txt"), out=str(run_dir.parent / "batches"))
    return prepare_data(setup, run_dir.parent / "batches", log=lambda *a, **k: None)[2]


def time_batches(stream, n=20):
    """ms to make one batch on the host, masked and padded, by the stream alone."""
    stream.next_batch()
    t0 = time.perf_counter()
    for _ in range(n):
        stream.next_batch()
    return 1e3 * (time.perf_counter() - t0) / n


def busy(ms: float):
    """A function that keeps the interpreter busy for about ``ms``, never waiting (as a thread launching
    kernels is): pure Python arithmetic, its length measured first."""
    def spin(n):
        x = 0
        for i in range(n):
            x += i * i
        return x
    t0 = time.perf_counter()
    spin(200_000)
    n = max(1, round(200_000 * ms / (1e3 * (time.perf_counter() - t0))))
    return lambda: spin(n)


def time_beside(stream, ms: float) -> dict:
    """ms per imitated step (``busy(ms)`` after taking a batch): alone, and beside each way of making
    batches ahead (each from the start of the stream, its first batch waited for outside the timing);
    30 steps each, fewer for long steps (5 at least)."""
    steps = max(5, min(30, int(3000 / ms)))
    from minibert.train import BatchStream, Prefetch
    from minibert.train.data_worker import ProcessPrefetch
    work, times = busy(ms), {}
    for name, make in (("alone", None), ("thread", Prefetch), ("process", ProcessPrefetch)):
        source = make(BatchStream(stream.dataset, stream.batch_size, stream.seed)) if make else None
        try:
            if source:
                source.next_batch()
            each = []
            for _ in range(steps):
                t0 = time.perf_counter()
                if source:
                    source.next_batch()
                work()
                each.append(time.perf_counter() - t0)
            times[name] = 1e3 * statistics.median(each)
        finally:
            if source:
                source.close()
    return times


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
        stream = run_stream(args, Path(tmp) / "run")
    bare_ms = time_bare(args, model)
    batch_ms = time_batches(stream)
    busy_ms = args.busy_ms or bare_ms
    beside = time_beside(stream, busy_ms)
    tokens = args.batch_size * args.seq_len
    precision = "mixed float16" if args.mixed_precision else "float32"
    print(f"# {args.config}, batch {args.batch_size} x {args.seq_len}, {precision}, device {args.device}; "
          f"{args.steps} steps, a record every {args.log_every}; --data-worker {args.data_worker}")
    print("| form | ms per step | tokens/s | against the bare step |")
    print("|---|---:|---:|---:|")
    for name, ms in (("pretrain", loop_ms), ("bare step", bare_ms)):
        print(f"| {name} | {ms:.1f} | {tokens / ms * 1e3:,.0f} | {ms / bare_ms:.2f}x |")
    print(f"\nmaking a batch on the host (mask and pad): {batch_ms:.2f} ms, {batch_ms / bare_ms:.0%} of the bare step")
    print(f"\na host thread busy for {busy_ms:.1f} ms a step ({'--busy-ms' if args.busy_ms else 'the bare step'}), "
          f"the next batch made beside it:")
    print("| batches made by | ms per step | against alone |")
    print("|---|---:|---:|")
    for name, ms in beside.items():
        print(f"| {name} | {ms:.1f} | {ms / beside['alone']:.2f}x |")


if __name__ == "__main__":
    main()
