"""The attention ladder (minibert/accel/cuda/ladder.py) against PyTorch's fused attention, on one GPU.

For each sequence length: one forward pass of attention, (B, A, T, D) with a
padding mask, by each rung of the ladder (v1 naive, v2a products + a
softmax block per row, v2 products + a softmax warp per row, v3 online
softmax, v4 tiled online softmax) and by
torch.nn.functional.scaled_dot_product_attention (PyTorch chooses its
kernel), on the same numbers, in one process.  Each form
is checked against the reference (minibert.ops on the host) before it is
timed; times are medians of --reps calls, each timed with CUDA events.

FLOPs counted: the two products, 4 B A T^2 D per call.

With --products: attention's four matrix products at each preset's shapes instead (batch
--batch, the preset's heads of 64), float16 by CuPy's ``matmul`` and by ``accel/cuda/gemm.py``'s
direct cuBLAS call, and float32 by CuPy: where a mixed-precision step's attention time goes.

With --training: attention as mixed precision trains it, float16 q, k, v with the padding mask and
dropout 0.1, forward and forward + backward: minibert's unfused kernels (v2 with float16 products),
its fused kernels (``accel/cuda/flash.py``) and PyTorch's SDPA on float16 tensors.

Usage:
    python benchmarks/bench_attention.py                        # B 32, 12 heads of 64, T 128 and 512
    python benchmarks/bench_attention.py --products             # tiny, mini, small, base at T 128 and 512
    python benchmarks/bench_attention.py --training             # B 32, 12 heads of 64, T 128 and 512
    python benchmarks/bench_attention.py --seq-len 128 --reps 50 --json runs/attention.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def gpu_reason():
    """Why this machine cannot run the benchmark, or None."""
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() == 0:
            return "no CUDA GPU is visible"
    except Exception as exc:      # not installed, or no driver
        return f"CuPy with a CUDA GPU is needed ({type(exc).__name__}: {exc})"
    return None


def timed(fn, reps):
    """Median milliseconds of fn() over reps calls, after two warm-up calls."""
    import cupy
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop))
    return float(np.median(times))


def padding_mask(B, T):
    """Every other sequence a quarter padding."""
    mask = np.ones((B, T), dtype=np.int64)
    mask[1::2, T - T // 4:] = 0
    return mask


def one_length(B, A, T, D, reps, dtype="float32"):
    import cupy
    from minibert import ops
    from minibert.accel.cuda.ladder import LADDER
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((B, A, T, D)).astype(dtype) for _ in range(3))
    mask = padding_mask(B, T)
    bias = ops.attention_mask_bias(mask, dtype)
    want = ops.attention_forward(q, k, v, bias)[0]
    gq, gk, gv, gbias = (cupy.asarray(a) for a in (q, k, v, bias))
    rows = {}
    for name, fn in LADDER.items():
        err = float(np.abs(cupy.asnumpy(fn(gq, gk, gv, gbias)) - want).max() / np.abs(want).max())
        rows[name] = (timed(lambda fn=fn: fn(gq, gk, gv, gbias), reps), err)
    try:
        import torch
        tq, tk, tv, tbias = (torch.as_tensor(a, device="cuda") for a in (q, k, v, bias))
        sdpa = torch.nn.functional.scaled_dot_product_attention
        err = float(np.abs(sdpa(tq, tk, tv, attn_mask=tbias).cpu().numpy() - want).max() / np.abs(want).max())

        def torch_call():
            sdpa(tq, tk, tv, attn_mask=tbias)
        rows["torch SDPA"] = (timed(torch_call, reps), err)
    except ImportError:
        pass
    return rows


def products(B, A, T, D, reps):
    """ms of the four products of attention's forward and backward, (B, A, T, D) operands, in three ways."""
    import cupy
    from minibert.accel.cuda.gemm import half_matmul
    rng = np.random.default_rng(0)
    q, k, dout = (cupy.asarray(rng.standard_normal((B, A, T, D)), dtype=cupy.float16) for _ in range(3))
    p = cupy.asarray(rng.random((B, A, T, T)), dtype=cupy.float16)
    pairs = {"q k^T": (q, k.swapaxes(-1, -2)), "P v": (p, k), "P^T dO": (p.swapaxes(-1, -2), dout),
             "dO v^T": (dout, k.swapaxes(-1, -2))}
    rows = {}
    for name, (a, b) in pairs.items():
        a32, b32 = a.astype(cupy.float32), b.astype(cupy.float32)
        got, want = half_matmul(a, b).astype(cupy.float32), a32 @ b32
        err = float(cupy.abs(got - want).max() / cupy.abs(want).max())
        rows[name] = dict(cupy_float16=timed(lambda: a @ b, reps),
                          cublas_float16=timed(lambda: half_matmul(a, b), reps),
                          cupy_float32=timed(lambda: a32 @ b32, reps), max_rel_error=err)
    return rows


def training(B, A, T, D, reps, p_drop=0.1):
    """{form: (forward ms, forward + backward ms, max rel error of the output without dropout)}."""
    import cupy
    from minibert import ops
    from minibert.accel.counter_rng import CounterUniform
    from minibert.accel.cuda import flash, ops as cuda_ops
    rng = np.random.default_rng(0)
    q, k, v, dout = (rng.standard_normal((B, A, T, D)).astype(np.float16) for _ in range(4))
    mask = padding_mask(B, T)
    want = ops.attention_forward(*(a.astype(np.float64) for a in (q, k, v)), ops.attention_mask_bias(mask, np.float64))[0]
    gq, gk, gv, gdout = (cupy.asarray(a) for a in (q, k, v, dout))
    gbias = cupy.asarray(ops.attention_mask_bias(mask, np.float32))
    drop = CounterUniform(0, xp=cupy)

    def err(out):
        return float(np.abs(cupy.asnumpy(out).astype(np.float64) - want).max() / np.abs(want).max())
    rows, before = {}, flash.ENABLED
    try:
        for name, on in (("minibert unfused (v2)", False), ("minibert fused (flash.py)", True)):
            flash.ENABLED = on
            e = err(cuda_ops.attention_forward(gq, gk, gv, gbias)[0])

            def fwd():
                return cuda_ops.attention_forward(gq, gk, gv, gbias, p_drop, drop, True)
            rows[name] = (timed(fwd, reps), timed(lambda: cuda_ops.attention_backward(gdout, fwd()[1]), reps), e)
    finally:
        flash.ENABLED = before
    try:
        import torch
    except ImportError:
        return rows
    sdpa = torch.nn.functional.scaled_dot_product_attention
    tq, tk, tv = (torch.as_tensor(a, device="cuda").requires_grad_() for a in (q, k, v))
    tdout, tbias = torch.as_tensor(dout, device="cuda"), torch.as_tensor(cupy.asnumpy(gbias), device="cuda").half()
    e = err(cupy.asarray(sdpa(tq, tk, tv, attn_mask=tbias).detach()))

    def torch_both():
        sdpa(tq, tk, tv, attn_mask=tbias, dropout_p=p_drop).backward(tdout)
    rows["torch SDPA float16"] = (timed(lambda: sdpa(tq, tk, tv, attn_mask=tbias, dropout_p=p_drop), reps),
                                  timed(torch_both, reps), e)
    return rows


def main_training(args):
    results = {}
    for T in args.seq_len:
        rows = training(args.batch, args.heads, T, args.head_size, args.reps)
        base = rows.get("torch SDPA float16")
        print(f"\nB {args.batch}, {args.heads} heads of {args.head_size}, T {T}: float16, mask, dropout 0.1 (ms)")
        print("| form | forward | x SDPA | forward + backward | x SDPA | max rel err |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, (f, fb, e) in rows.items():
            ratio = (f"{f / base[0]:.2f}x", f"{fb / base[1]:.2f}x") if base else ("-", "-")
            print(f"| {name} | {f:.3f} | {ratio[0]} | {fb:.3f} | {ratio[1]} | {e:.1e} |")
        results[str(T)] = {name: {"forward_ms": f, "forward_backward_ms": fb, "max_rel_error": e}
                           for name, (f, fb, e) in rows.items()}
    return results


def main_products(args):
    from minibert.model.config import PRESETS
    results = {}
    print(f"attention's products, batch {args.batch}, heads of 64, ms (median of {args.reps})")
    print("| preset, T | product | CuPy float16 | cuBLAS float16 (gemm.py) | CuPy float32 "
          "| CuPy f16 / cuBLAS f16 | max rel err |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for preset, (_, hidden, heads) in PRESETS.items():
        if preset not in args.presets:
            continue
        for T in args.seq_len:
            rows = products(args.batch, heads, T, hidden // heads, args.reps)
            results[f"{preset} {T}"] = rows
            for name, r in rows.items():
                print(f"| {preset}, {T} | {name} | {r['cupy_float16']:.3f} | {r['cublas_float16']:.3f} | "
                      f"{r['cupy_float32']:.3f} | {r['cupy_float16'] / r['cublas_float16']:.1f}x "
                      f"| {r['max_rel_error']:.1e} |")
    return results


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--head-size", type=int, default=64)
    p.add_argument("--seq-len", type=int, nargs="+", default=[128, 512])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--json", metavar="PATH", help="also write the results to PATH")
    p.add_argument("--products", action="store_true", help="time attention's products at each preset's shapes")
    p.add_argument("--presets", nargs="+", default=["tiny", "mini", "small", "base"], help="with --products")
    p.add_argument("--training", action="store_true",
                   help="float16 forward and backward: unfused, fused (flash.py) and SDPA")
    args = p.parse_args(argv)
    reason = gpu_reason()
    if reason:
        print(f"bench_attention: {reason}; the ladder runs on the GPU only "
              "(tests/test_gpu_kernels_on_cpu.py checks it on the CPU)", file=sys.stderr)
        return 1
    results = {}
    if args.products:
        results = main_products(args)
    if args.training:
        results = main_training(args)
    for T in [] if args.products or args.training else args.seq_len:
        rows = one_length(args.batch, args.heads, T, args.head_size, args.reps)
        flops = 4 * args.batch * args.heads * T * T * args.head_size
        base = rows.get("torch SDPA", (None,))[0]
        print(f"\nB {args.batch}, {args.heads} heads of {args.head_size}, T {T}: forward pass")
        print(f"{'form':30} {'ms':>8} {'TFLOP/s':>8} {'x SDPA':>7} {'max rel err':>12}")
        for name, (ms, err) in rows.items():
            ratio = f"{ms / base:7.2f}" if base else "      -"
            print(f"{name:30} {ms:8.3f} {flops / ms / 1e9:8.2f} {ratio} {err:12.1e}")
        results[str(T)] = {name: {"ms": ms, "max_rel_error": err} for name, (ms, err) in rows.items()}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
