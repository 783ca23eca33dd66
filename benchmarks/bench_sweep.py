"""Where a training step stops being launch-bound: minibert's step over sizes, batches and lengths.

    python benchmarks/bench_sweep.py --device cuda                       # tiny mini small, B 8 32 128, T 128 512
    python benchmarks/bench_sweep.py --device cuda --mixed-precision --json runs/sweep_mixed.json
    python benchmarks/bench_sweep.py --smoke                             # seconds on the CPU: the script runs

The step is ``bench_step.py``'s, measured by its ``measure`` (forward with both losses, backward,
AdamW; in mixed precision the loss scaler's step as the trainer takes it), all in one process, one
shape after another: the median of ``--reps`` steps after ``--warmup``, each ending with
``float(loss)``.  For each shape
it prints the time, tokens per second, the GFLOP/s of the step's matrix products
(``bench_step.step_flops``: the MLM decoder at the labelled positions and attention's products
included) and their share of a large product's rate timed in the same process (MFU).

How to read it: while a step is launch-bound its time hardly moves with the batch (the host
issues the same kernels, each too short to fill the GPU), so tokens per second grow with the
batch; once the products fill the GPU the time grows with the batch and MFU levels off.  On a
CPU the same happens at much smaller shapes (NumPy's cost per operation plays the launch's part).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_step  # noqa: E402
from bench_step import config_dict  # noqa: E402


def measure(preset, B, T, args):
    """One shape, measured by ``bench_step.measure`` as its minibert form is (the GEMM peak timed once)."""
    r = bench_step.measure(argparse.Namespace(**vars(args), worker="minibert", preset=preset, batch=B, seq_len=T))
    return dict(preset=preset, batch=B, seq_len=T, step_ms=1e3 * r["step_s"], best_ms=1e3 * r["min_s"],
                tokens_per_s=r["tokens_per_s"], gflops=r["gflops"], gemm_peak=r["gemm_peak"],
                mfu=r["gflops"] / r["gemm_peak"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", nargs="+", default=["tiny", "mini", "small"])
    ap.add_argument("--batches", nargs="+", type=int, default=[8, 32, 128])
    ap.add_argument("--seq-lens", nargs="+", type=int, default=[128, 512])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--mixed-precision", action="store_true")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--vocab-size", type=int, default=30522)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU, a few seconds")
    args = ap.parse_args(argv)
    if args.smoke:
        args.presets, args.batches, args.seq_lens = ["tiny"], [1, 4], [16]
        args.reps, args.warmup, args.vocab_size, args.device = 2, 1, 1000, "cpu"
    if min(args.batches) < 1 or min(args.seq_lens) < 2 or args.reps < 1 or args.warmup < 0:
        ap.error("batches must be at least 1, sequence lengths at least 2, --reps at least 1, --warmup at least 0")
    for preset in args.presets:
        try:
            longest = config_dict(preset, args.vocab_size, args.dropout)["max_position_embeddings"]
        except ValueError as exc:                # an unknown preset: the message names the known ones
            ap.error(str(exc))
        if max(args.seq_lens) > longest:
            ap.error(f"{preset} has {longest} positions: sequence lengths up to {longest}, got {max(args.seq_lens)}")
    args.dtype = "float32"                       # what run_minibert reads besides the above
    precision = "mixed float16 (float32 master weights)" if args.mixed_precision else "float32"
    print(f"# minibert's training step on {args.device}, {precision}, dropout {args.dropout}, "
          f"median of {args.reps} steps after {args.warmup}")
    print("| preset | batch | seq-len | ms per step | tokens/s | GFLOP/s | MFU |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    rows = []
    for preset in args.presets:
        for T in args.seq_lens:
            for B in args.batches:
                r = measure(preset, B, T, args)
                rows.append(r)
                print(f"| {preset} | {B} | {T} | {r['step_ms']:.1f} | {r['tokens_per_s']:,.0f} | "
                      f"{r['gflops']:,.0f} | {100 * r['mfu']:.1f}% |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(dict(device=args.device, precision=precision, rows=rows),
                                              indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
