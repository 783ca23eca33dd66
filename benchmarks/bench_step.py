"""One full pre-training step, minibert against PyTorch, side by side on this machine.

A step is: forward with MLM and NSP labels (dropout on), backward, AdamW.
Four forms are timed, each in a fresh process of its own (or, with
``--in-process``, one after another in this one) with the same thread count,
dtype, batch and dropout:

  minibert        minibert.BertForPreTraining + minibert.optim.AdamW
  torch-gathered  transformers' BertForPreTraining, but the MLM head applied
                  only at the labelled positions (minibert's algorithm: the
                  fair comparison)
  torch-stock     transformers.BertForPreTraining as it ships (MLM decoder
                  over all B*T positions)
  torch-sdpa      torch-gathered with transformers' default attention, PyTorch's
                  scaled_dot_product_attention (fused kernels on a GPU), whatever
                  --attn says

Each process: builds the model, times a plain float32 matmul (the GEMM peak
of this machine in that library), runs ``--warmup`` steps, then ``--reps``
timed steps, and reports medians.  The parent prints one table per preset and
the ratios minibert/PyTorch last.

FLOPs: only matrix products are counted (2*m*n*k each); a training step costs
3x the forward products (backward computes one product for the input
gradient and one for the weight gradient per forward product).  The count is
that of the gathered algorithm (MLM decoder at the N labelled positions
only) for every form, so "GFLOP/s" is useful work per second and the
stock form's wasted decoder work does not inflate its number.  MFU (model
FLOPs utilisation) is that rate over the GEMM peak measured in the same
process: the share of what a large product reaches on this device.

Peak memory: the peak resident set size during the timed steps minus the
resident size after the imports and the batch were made (so it covers the
model, gradients, optimiser state and activations, not the libraries).

Usage:
    python benchmarks/bench_step.py                       # tiny, mini, small; T=128, B=32, 2 threads
    python benchmarks/bench_step.py --presets small --reps 20
    python benchmarks/bench_step.py --profile mini        # where minibert's step spends its time
    python benchmarks/bench_step.py --smoke               # seconds: tiny shapes, a check that it runs
    python benchmarks/bench_step.py --device cuda --presets small base --seq-len 512
                                                          # GPU: CuPy against PyTorch CUDA
    python benchmarks/bench_step.py --device cuda --mixed-precision
                                                          # float16 products, float32 master weights

On the GPU (``--device cuda``) minibert runs on CuPy and PyTorch on CUDA;
PyTorch's batch is already on the device, minibert's comes from the host as in
its trainer (checked there, then copied: a little more work for minibert); the GEMM peak is a 4096^3 float32
matmul (TF32 off in both libraries, as by default), and "peak MiB" is the
memory each library's caching allocator holds at its peak during the timed
steps (``cupy.get_default_memory_pool().total_bytes()`` after the pool was
emptied; ``torch.cuda.max_memory_reserved()`` after a reset).  Every step ends
with ``float(loss)``, which waits for the GPU, so wall-clock step times are
GPU times.

``--mixed-precision``: minibert with ``mixed_precision=True`` and a
``LossScaler``; PyTorch under ``torch.autocast(dtype=float16)`` with a
``GradScaler``.  Each step then also unscales the gradients and checks them
for inf/NaN (on the GPU, minibert decides there whether to take the step, as its trainer does).  On the GPU the GEMM
peak is then a float16 4096^3 product.  On the CPU minibert only emulates
float16 products (they run as float32 BLAS calls) and PyTorch's CPU float16
kernels are not its fast ones: CPU numbers say nothing about the GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORMS = ("minibert", "torch-gathered", "torch-stock", "torch-sdpa")
# on a GPU only, chosen with --forms: minibert's step with every product by cuBLAS through ctypes
# (gemm.DIRECT), the trainer's step replayed as one CUDA graph (train/graph_step.py: the
# step's norm, sums and decision too, a little more work than the bare step above), and the step
# with mixed precision's attention fused (accel/cuda/flash.py; in float32 the same as minibert's)
GPU_FORMS = ("minibert-direct", "minibert-graph", "minibert-flash")
GATHERED = ("torch-gathered", "torch-sdpa")          # the MLM head at the labelled positions only
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
               "MINIBERT_NUM_THREADS")


# --------------------------------------------------------------------------- helpers
def config_dict(preset, vocab_size, dropout):
    """The preset's hyper-parameters as a dict both libraries accept."""
    sys.path.insert(0, str(ROOT))
    from minibert.model.config import BertConfig
    c = BertConfig.from_preset(preset, vocab_size=vocab_size, hidden_dropout_prob=dropout,
                               attention_probs_dropout_prob=dropout)
    return c.to_dict()


def step_flops(cfg, B, T, n_masked, mlm_everywhere=False):
    """Matrix-product FLOPs of one training step (forward + backward = 3 x forward)."""
    H, I, V, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    BT = B * T
    per_layer = (2 * BT * H * 3 * H      # fused Q, K, V projection
                 + 2 * B * T * T * H     # scores q k^T, all heads
                 + 2 * B * T * T * H     # context P v
                 + 2 * BT * H * H        # attention output projection
                 + 2 * 2 * BT * H * I)   # feed-forward up and down
    n = BT if mlm_everywhere else n_masked
    heads = 2 * B * H * H + 2 * B * H * 2 + 2 * n * H * H + 2 * n * H * V
    return 3 * (L * per_layer + heads)


def make_batch(cfg, B, T, seed=0):
    """Full-length sequences (two segments), 15% of positions labelled (at least one), NSP labels."""
    import numpy as np
    rng = np.random.default_rng(seed)
    V = cfg["vocab_size"]
    ids = rng.integers(5, V, (B, T))
    types = np.zeros((B, T), dtype=np.int64)
    types[:, T // 2:] = 1
    mask = np.ones((B, T), dtype=np.int64)
    labels = np.full((B, T), -100, dtype=np.int64)
    k = max(1, round(0.15 * T))
    for b in range(B):
        pos = rng.choice(np.arange(1, T), size=min(k, T - 1), replace=False)
        labels[b, pos] = ids[b, pos]
    nsp = rng.integers(0, 2, B)
    return dict(input_ids=ids, token_type_ids=types, attention_mask=mask, mlm_labels=labels,
                nsp_labels=nsp), int((labels != -100).sum())


def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def reset_peak_rss():
    """Reset the kernel's peak-RSS counter (Linux); False where it cannot be reset."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


# ---------------------------------------------------------------------------- worker
_PEAKS = {}


def gemm_peak_once(key, *a, **k):
    """``gemm_peak`` once per (library, dtype) in a process: with --in-process every form of every
    preset shares it."""
    if key not in _PEAKS:
        _PEAKS[key] = gemm_peak(*a, **k)
    return _PEAKS[key]


def gemm_peak(matmul, make, n=2048, reps=7):
    """GFLOP/s of an n x n x n float32 matmul: the best this library does on this machine."""
    a, b = make(n), make(n)
    matmul(a, b)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        matmul(a, b)
        times.append(time.perf_counter() - t0)
    return 2 * n ** 3 / statistics.median(times) / 1e9


def run_minibert(cfg, batch, args):
    import numpy as np
    sys.path.insert(0, str(ROOT))
    import minibert as mb
    from minibert.optim import AdamW, LossScaler, unscale_and_clip

    rng = np.random.default_rng(0)
    if args.device == "cuda":
        import cupy
        from minibert.accel.cuda import flash       # the form decides (forms may share a process)
        flash.ENABLED = args.form == "minibert-flash" or flash.FROM_ENVIRONMENT
        sync = cupy.cuda.Device().synchronize
        peak_dtype = np.float16 if args.mixed_precision else np.float32
        peak = gemm_peak_once(("cupy", peak_dtype), lambda a, b: (a @ b, sync()), lambda n: cupy.asarray(
            rng.standard_normal((n, n)).astype(peak_dtype)), n=4096)
        # the batch stays on the host, as the trainer's does: checked there, then copied
    else:
        peak = gemm_peak_once(("numpy",), lambda a, b: a @ b,
                              lambda n: rng.standard_normal((n, n)).astype(np.float32))
    # minibert's kernels (and their malloc setting), as the command line and the trainer run them
    model = mb.BertForPreTraining(mb.BertConfig(**cfg), seed=0, dtype=args.dtype, device=args.device,
                                  mixed_precision=args.mixed_precision, kernels="fast")
    opt = AdamW(model.params, lr=1e-4, eps=1e-6, weight_decay=0.01)
    scaler = LossScaler()

    def step():
        out = model.forward(**batch, train=True)
        model.backward()
        opt.step()
        return float(out.loss)

    if args.form == "minibert-graph":
        from minibert.train.graph_step import GraphStep
        n_masked = int((batch["mlm_labels"] != -100).sum())
        graphed = GraphStep(model, opt, scaler if args.mixed_precision else None, batch["input_ids"].shape,
                            max_predictions=n_masked)
        count = [0]

        def graph_step():     # the host batch copied into the graph's arrays, then one launch
            count[0] += 1
            return float(graphed(batch, 1e-4, (0, count[0]))["loss"])
        return graph_step, peak

    def mixed_step():       # as the trainer's step: on a GPU the scaler decides there, nothing is read
        out = model.forward(**batch, train=True)
        model.backward(loss_scale=scaler.scale)
        norm = unscale_and_clip(model.params, None, scaler.scale)
        opt.step(take=scaler.update(model.xp.isfinite(norm)))
        return float(out.loss)

    return (mixed_step if args.mixed_precision else step), peak


def run_torch(cfg, batch, args, gathered, attn):
    import numpy as np
    import torch
    import torch.nn.functional as F
    import transformers

    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    dev = torch.device(args.device)
    if args.device == "cuda":
        sync = torch.cuda.synchronize
        peak_dtype = torch.float16 if args.mixed_precision else torch.float32
        peak = gemm_peak_once(("torch", peak_dtype), lambda a, b: (a @ b, sync()),
                              lambda n: torch.randn(n, n, dtype=peak_dtype, device=dev), n=4096)
    else:
        peak = gemm_peak_once(("torch",), lambda a, b: a @ b, lambda n: torch.randn(n, n, dtype=torch.float32))
    hc = transformers.BertConfig(**cfg)
    hc._attn_implementation = attn
    torch.manual_seed(0)
    model = transformers.BertForPreTraining(hc).to(dtype).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-6, weight_decay=0.01)
    t = {k: torch.from_numpy(np.asarray(v)).to(dev) for k, v in batch.items()}
    H = cfg["hidden_size"]

    def stock():
        out = model(input_ids=t["input_ids"], token_type_ids=t["token_type_ids"],
                    attention_mask=t["attention_mask"], labels=t["mlm_labels"],
                    next_sentence_label=t["nsp_labels"])
        return out.loss

    def gathered_loss():
        seq, pooled = model.bert(input_ids=t["input_ids"], token_type_ids=t["token_type_ids"],
                                 attention_mask=t["attention_mask"], return_dict=False)[:2]
        flat = t["mlm_labels"].reshape(-1)
        pos = (flat != -100).nonzero().squeeze(1)
        logits = model.cls.predictions(seq.reshape(-1, H).index_select(0, pos))
        nsp = model.cls.seq_relationship(pooled)
        return F.cross_entropy(logits, flat[pos]) + F.cross_entropy(nsp, t["nsp_labels"])

    loss_fn = gathered_loss if gathered else stock
    scaler = torch.amp.GradScaler(args.device)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        opt.step()
        return float(loss)

    def mixed_step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(args.device, dtype=torch.float16):
            loss = loss_fn()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return float(loss)

    chosen = mixed_step if args.mixed_precision else step
    if args.form == "minibert-direct":
        from minibert.accel.cuda.graph import direct_products

        def direct_step():
            with direct_products():
                return chosen()
        return direct_step, peak
    return chosen, peak


def worker(args):
    print(json.dumps(measure(args)))


def measure(args):
    """One form (``args.worker``) on one preset: warm-up, timed steps, memory; the result as a dict."""
    import gc
    gc.collect()                        # in one process for all forms: the last form's model is gone
    cfg = config_dict(args.preset, args.vocab_size, args.dropout)
    batch, n_masked = make_batch(cfg, args.batch, args.seq_len)
    base_kib = _status_kib("VmRSS")
    args.form = args.worker
    if args.form.startswith("minibert"):
        step, peak = run_minibert(cfg, batch, args)
    else:
        step, peak = run_torch(cfg, batch, args, gathered=args.form in GATHERED,
                               attn="sdpa" if args.form == "torch-sdpa" else args.attn)
    losses = [step() for _ in range(args.warmup)]
    can_reset = reset_peak_rss()
    gpu_pool = None
    if args.device == "cuda" and args.form.startswith("minibert"):
        import cupy
        gpu_pool = cupy.get_default_memory_pool()
        gpu_pool.free_all_blocks()       # what the timed steps need is re-reserved
    elif args.device == "cuda":
        import torch
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        losses.append(step())           # float(loss) waits for the device
        times.append(time.perf_counter() - t0)
    peak_kib = _status_kib("VmHWM")
    import resource
    if not can_reset:
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if args.device == "cuda":  # device memory held by the library's caching allocator
        if gpu_pool is not None:
            peak_kib, base_kib = gpu_pool.total_bytes() / 1024, 0
        else:
            peak_kib, base_kib = torch.cuda.max_memory_reserved() / 1024, 0
    med = statistics.median(times)
    flops = step_flops(cfg, args.batch, args.seq_len, n_masked)
    return dict(form=args.form, preset=args.preset, step_s=med, min_s=min(times),
                times=times, tokens_per_s=args.batch * args.seq_len / med,
                gflops=flops / med / 1e9, gemm_peak=peak, step_gflop=flops / 1e9,
                peak_mib=(peak_kib - base_kib) / 1024, rss_peak_mib=peak_kib / 1024,
                n_masked=n_masked, first_loss=losses[0], last_loss=losses[-1])


# ---------------------------------------------------------------------------- parent
def cpu_busy(seconds=1.0):
    """Fraction of all CPUs busy over ``seconds`` (from /proc/stat); None where unavailable."""
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]  # total, idle + iowait
    try:
        t0, i0 = snap()
        time.sleep(seconds)
        t1, i1 = snap()
    except OSError:
        return None
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def wait_for_idle(max_wait, threshold=0.15):
    """Wait (up to max_wait s) until other processes use under ``threshold`` of the CPUs."""
    t0 = time.time()
    busy = cpu_busy()
    while busy is not None and busy > threshold and time.time() - t0 < max_wait:
        busy = cpu_busy()
    return busy


def spawn(form, preset, args):
    if args.in_process:
        r = measure(argparse.Namespace(**{**vars(args), "worker": form, "preset": preset}))
        r["busy_before"] = None
        return r
    env = dict(os.environ)
    for var in THREAD_VARS:
        env[var] = str(args.threads)  # before numpy/torch are imported in the child
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, __file__, "--worker", form, "--preset", preset,
           "--seq-len", str(args.seq_len), "--batch", str(args.batch), "--threads", str(args.threads),
           "--reps", str(args.reps), "--warmup", str(args.warmup), "--dtype", args.dtype,
           *(["--mixed-precision"] if args.mixed_precision else []),
           "--dropout", str(args.dropout), "--vocab-size", str(args.vocab_size), "--attn", args.attn,
           "--device", args.device]
    busy = wait_for_idle(args.wait_idle) if args.wait_idle else None
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{form} {preset} failed:\n{res.stderr[-3000:]}")
    r = json.loads(res.stdout.strip().splitlines()[-1])
    r["busy_before"] = busy
    return r


def merge(runs):
    """Several rounds of one (preset, form): pool the timed steps, keep the best GEMM peak."""
    r = dict(runs[0])
    times = [t for x in runs for t in x["times"]]
    r["times"], r["step_s"], r["min_s"] = times, statistics.median(times), min(times)
    r["tokens_per_s"] = r["tokens_per_s"] * runs[0]["step_s"] / r["step_s"]
    r["gflops"] = r["step_gflop"] / r["step_s"]
    r["gemm_peak"] = max(x["gemm_peak"] for x in runs)
    r["peak_mib"] = statistics.median(x["peak_mib"] for x in runs)
    r["busy_before"] = [x["busy_before"] for x in runs]
    return r


def machine_line(device="cpu"):
    import platform
    cpu = platform.processor() or "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import numpy, scipy
    try:
        import torch, transformers
        tv = f"torch {torch.__version__}, transformers {transformers.__version__}"
    except ImportError:
        tv = "torch not installed"
    gpu = ""
    if device == "cuda":
        try:
            import cupy
            props = cupy.cuda.runtime.getDeviceProperties(0)
            gpu = (f"; GPU {props['name'].decode()}, CuPy {cupy.__version__}, "
                   f"CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}")
        except Exception as exc:  # reported, not fatal: the workers say more
            gpu = f"; GPU not usable from CuPy ({exc})"
    return (f"{cpu}, {os.cpu_count()} logical CPUs; Python {platform.python_version()}, "
            f"NumPy {numpy.__version__}, SciPy {scipy.__version__}, {tv}{gpu}; "
            f"{time.strftime('%Y-%m-%d %H:%M')}")


def main_parent(args):
    if args.in_process:
        for var in THREAD_VARS:
            os.environ[var] = str(args.threads)   # before numpy and torch are imported
        sys.path.insert(0, str(ROOT))
    print(f"# {machine_line(args.device)}")
    precision = "mixed float16 (float32 master weights)" if args.mixed_precision else args.dtype
    print(f"# device {args.device}, seq-len {args.seq_len}, batch {args.batch}, {args.threads} threads, {precision}, "
          f"dropout {args.dropout}, torch attention '{args.attn}', warm-up {args.warmup}, "
          f"{args.reps} timed steps (median)"
          + (", every form in this one process" if args.in_process else ", a process per form"))
    results = []
    for preset in args.presets:
        # rounds interleave the forms, so that a burst of outside load hits all of them
        runs = {form: [] for form in args.forms}
        for _ in range(args.rounds):
            for form in args.forms:
                runs[form].append(spawn(form, preset, args))
        rows = {form: merge(rs) for form, rs in runs.items()}
        results += rows.values()
        r0 = next(iter(rows.values()))
        print(f"\n## {preset}: {r0['step_gflop']:.1f} GFLOP per step (matmuls, gathered MLM), "
              f"{r0['n_masked']} labelled positions")
        print(f"| form | step ms (median) | best ms | tokens/s | GFLOP/s | GEMM peak GFLOP/s | MFU (% of peak) | peak MiB |")
        print(f"|---|---:|---:|---:|---:|---:|---:|---:|")
        for form, r in rows.items():
            print(f"| {form} | {1e3 * r['step_s']:.1f} | {1e3 * r['min_s']:.1f} | {r['tokens_per_s']:.0f} | {r['gflops']:.1f} | "
                  f"{r['gemm_peak']:.1f} | {100 * r['gflops'] / r['gemm_peak']:.0f}% | {r['peak_mib']:.0f} |")
    print("\n## ratios minibert / PyTorch (median step time, best step time in brackets; peak memory)")
    mine = [f for f in args.forms if f.startswith("minibert")]
    others = [f for f in args.forms if f not in mine]
    print("| preset | form | " + " | ".join(f"/ {f}" for f in others) + " | memory / torch-gathered |")
    print("|---|---|" + "---:|" * (len(others) + 1))
    by = {(r["preset"], r["form"]): r for r in results}
    for preset in args.presets:
        for form in mine:
            m = by.get((preset, form))
            if not m:
                continue
            fmt = lambda a, b, key: f"{a[key] / b[key]:.2f}x" if b else "-"
            both = lambda a, b: f"{fmt(a, b, 'step_s')} ({fmt(a, b, 'min_s')})" if b else "-"
            cells = [both(m, by.get((preset, f))) for f in others]
            print(f"| {preset} | {form} | " + " | ".join(cells)
                  + f" | {fmt(m, by.get((preset, 'torch-gathered')), 'peak_mib')} |")
    busy = [b for r in results for b in (r["busy_before"] or []) if b is not None]
    if busy:
        print(f"\n# CPU use by other processes in the second before each run: "
              f"median {100 * statistics.median(busy):.0f}%, max {100 * max(busy):.0f}%")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


# --------------------------------------------------------------------------- profile
def profile(args):
    """Per-function time of minibert's step: every op the model calls (its set of ops, ``model.ops``)
    and AdamW.step are wrapped with a timer (exclusive time: a call's own time minus
    that of the wrapped functions it calls); what is left of the step is the glue in
    the model (model/: reshapes, residual adds, gathers)."""
    for var in THREAD_VARS:  # only effective when set before numpy is imported
        os.environ.setdefault(var, str(args.threads))
    import numpy as np
    sys.path.insert(0, str(ROOT))
    import minibert as mb
    from minibert import ops, optim

    totals, stack = {}, []
    sync = lambda: None
    if args.device == "cuda":  # a GPU function's time is only known once the GPU has finished it
        import cupy
        sync = cupy.cuda.Device().synchronize

    def wrap(owner, name, label_fn=None):
        fn = getattr(owner, name)

        def timed(*a, **k):
            stack.append(0.0)
            sync()
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                sync()
                dt = time.perf_counter() - t0
                child = stack.pop()
                if stack:
                    stack[-1] += dt
                key = label_fn(*a) if label_fn else name
                totals[key] = totals.get(key, 0.0) + dt - child
        setattr(owner, name, timed)

    def linear_label(x, *rest):
        # the cache of linear_backward holds (x, W): name the layer by W's shape
        W = rest[0] if len(rest) >= 2 else rest[0][1]
        return f"linear {'fwd' if len(rest) >= 2 else 'bwd'} W{tuple(W.shape)}"

    cfg = config_dict(args.profile, args.vocab_size, args.dropout)
    batch, _ = make_batch(cfg, args.batch, args.seq_len)
    # minibert's kernels (and their malloc setting), as the command line and the trainer run them
    model = mb.BertForPreTraining(mb.BertConfig(**cfg), seed=0, dtype=args.dtype, device=args.device,
                                  kernels="fast", mixed_precision=args.mixed_precision)
    # mixed precision at backward's default loss scale of 1: the profile times the work (the loss
    # scaler's own bookkeeping is a few single-number operations)
    skip = {"attention_mask_bias", "split_heads", "merge_heads", "adamw_update"}   # (AdamW.step below)
    for name in ops.OPS:
        if name in skip:
            continue
        if name == "linear_forward":
            wrap(model.ops, name, lambda x, W, b: linear_label(x, W, b))
        elif name == "linear_backward":
            wrap(model.ops, name, lambda dy, cache: linear_label(dy, cache))
        else:
            wrap(model.ops, name)
    wrap(optim.AdamW, "step", lambda self, *a: "AdamW.step")
    batch = {k: model.xp.asarray(v) for k, v in batch.items()}
    opt = optim.AdamW(model.params, lr=1e-4)
    step_times = []
    for i in range(args.warmup + args.reps):
        if i == args.warmup:
            totals.clear()
        sync()
        t0 = time.perf_counter()
        model.forward(**batch, train=True)
        model.backward()
        opt.step()
        sync()
        if i >= args.warmup:
            step_times.append(time.perf_counter() - t0)
    total = sum(step_times) / args.reps
    rows = sorted(((v / args.reps, k) for k, v in totals.items()), reverse=True)
    rows.append((total - sum(v for v, _ in rows), "glue in model/ (gathers, residual adds, reshapes)"))
    precision = "mixed float16 (float32 master weights)" if args.mixed_precision else args.dtype
    print(f"# minibert {args.profile}, {args.device}, T={args.seq_len}, B={args.batch}, {precision}, "
          f"{args.threads} threads: {1e3 * total:.1f} ms per step (mean of {args.reps})")
    print("| function | ms / step | % |")
    print("|---|---:|---:|")
    for v, k in rows:
        print(f"| {k} | {1e3 * v:.1f} | {100 * v / total:.1f} |")


# ------------------------------------------------------------------------------ main
def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", nargs="+", default=["tiny", "mini", "small"])
    ap.add_argument("--forms", nargs="+", default=list(FORMS), choices=FORMS + GPU_FORMS)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="cuda: minibert on CuPy against PyTorch on CUDA")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--mixed-precision", action="store_true",
                    help="float16 products and loss scaling in both libraries (see the docstring)")
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--vocab-size", type=int, default=30522)
    ap.add_argument("--attn", default="eager", choices=["eager", "sdpa"],
                    help="transformers' attention implementation (default eager: the same algorithm as minibert)")
    ap.add_argument("--rounds", type=int, default=2, help="processes per form, interleaved (steps pooled)")
    ap.add_argument("--wait-idle", type=float, default=60.0,
                    help="before each run, wait up to this many seconds for the other processes to go quiet")
    ap.add_argument("--in-process", action="store_true",
                    help="every form in this one process, one after another (minutes fewer on a GPU, where "
                         "each process starts CuPy, torch and transformers; the CPU's peak memory then "
                         "counts what earlier forms left behind)")
    ap.add_argument("--json", help="also write the raw results here")
    ap.add_argument("--profile", metavar="PRESET", help="per-function profile of minibert's step instead")
    ap.add_argument("--smoke", action="store_true", help="a few seconds: tiny shapes, to check the script runs")
    ap.add_argument("--worker", choices=FORMS + GPU_FORMS, help=argparse.SUPPRESS)
    ap.add_argument("--preset", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.mixed_precision and args.dtype != "float32":
        ap.error("--mixed-precision keeps float32 master weights: it needs --dtype float32")
    gpu_only = [f for f in args.forms if f in GPU_FORMS]
    if gpu_only and args.device != "cuda":
        ap.error(f"the forms {', '.join(gpu_only)} run on a GPU only: add --device cuda")
    if args.smoke:
        args.presets, args.seq_len, args.batch, args.reps, args.warmup = ["tiny"], 16, 2, 2, 1
        args.rounds, args.wait_idle = 1, 0.0
        args.vocab_size = min(args.vocab_size, 1000)
    return args


if __name__ == "__main__":
    a = parse()
    if a.worker:
        worker(a)
    elif a.profile:
        profile(a)
    else:
        main_parent(a)
