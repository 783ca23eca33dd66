"""Data-parallel pre-training on the CPU: one process against N, and a model of the allreduce on GPUs.

Part 1 (measured).  The optimiser step of ``minibert pretrain`` (``train.train_step``: forward,
backward, the gradient allreduce, the step's sums, clipping, AdamW) for each preset, in one
process and in N processes launched by ``mpiexec -n N python -m mpi4py benchmarks/bench_dist.py
--worker ...``, on the same global batch.  The run is set up as ``pretrain`` sets it up (the same
seed on every rank, the fast kernels, ``dist.use_device``, the weights broadcast from rank 0),
except that the batches are random token ids (15% of the positions labelled, the preset's
30522-word vocabulary) made before the clock starts, where ``pretrain`` prefetches real ones.

The cores are shared out, not added: 1 process gets all of them as threads, N processes get
cores / N threads each, so both use the same cores.  Every rank waits at a barrier before each
step; a step's time is the slowest rank's.  "allreduce share" is ``comm.seconds`` (the time
``allreduce_grads`` took on each rank) over the step time, averaged over the ranks: it includes
waiting for the other ranks to arrive.  After the steps the same buffer is summed a few times
more, each right after a barrier: that "bare" allreduce is the transfer alone.

Part 2 (a model, nothing measured).  A ring allreduce of float32 gradients sends
2 (N-1)/N x S bytes from every GPU and takes 2 (N-1) steps, so its time is
2 (N-1)/N x S / bandwidth + 2 (N-1) x latency.  It is worked out for BERT-base at
8 and 64 GPUs over PCIe, NVLink and 100 Gb/s Ethernet, against the H100 step time of
benchmarks/results/h100_step.json; the bandwidths and latencies assumed are printed too.

Usage:
    python benchmarks/bench_dist.py                       # mini and small, T=128, global batch 16
    python benchmarks/bench_dist.py --model-only          # part 2 alone, in seconds
    python benchmarks/bench_dist.py --smoke               # seconds: tiny shapes, a check that it runs
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]       # this tree's minibert, and bench_step beside this file
from bench_step import make_batch, wait_for_idle  # noqa: E402

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "MINIBERT_NUM_THREADS")
# (name, bandwidth in bytes/s per GPU and direction, latency per ring step in s): assumptions
LINKS = (
    ("PCIe 4.0 x16", 25e9, 5e-6),
    ("NVLink 4 (H100)", 450e9, 3e-6),        # 900 GB/s per GPU counts both directions
    ("100 Gb/s Ethernet", 12.5e9, 20e-6),
)
H100_JSON = HERE / "results" / "h100_step.json"


# ---------------------------------------------------------------------------- worker
class FixedBatches:
    """The run's stream: batches made in advance, the same on every rank (seeded by their index)."""

    def __init__(self, cfg, batch_size, seq_len, n):
        self.batches = [make_batch(cfg, batch_size, seq_len, seed=i)[0] for i in range(n)]
        self.i, self.wait_s = 0, 0.0

    def next_batch(self) -> dict:
        self.i += 1
        return self.batches[(self.i - 1) % len(self.batches)]


def build_run(args, comm):
    """Model, AdamW and the ``Run`` that ``train_step`` moves on, as ``pretrain`` makes them."""
    from minibert import BertConfig, BertForPreTraining
    from minibert.optim import AdamW
    from minibert.train import MetricsLog, TrainArgs, dist
    from minibert.train.loop import Run

    dist.use_device(comm, "cpu")
    a = TrainArgs(config=args.preset, steps=args.warmup + args.steps, batch_size=args.batch,
                  seq_len=args.seq_len, lr=1e-4, progress=False, plot=False)
    cfg = BertConfig.from_preset(args.preset, vocab_size=args.vocab_size)
    model = BertForPreTraining(cfg, seed=a.seed, dtype=a.dtype, device="cpu", kernels=a.kernels)
    opt = AdamW(model.params, lr=a.lr, weight_decay=a.weight_decay, bias_correction=a.bias_correction)
    comm.broadcast_arrays(model.params.data, opt.m, opt.v)
    stream = FixedBatches(cfg.to_dict(), args.batch, args.seq_len, a.steps)
    return Run(args=a, out=Path("."), model=model, opt=opt, scaler=None, stream=stream, eval_batches=[],
               tokenizer=None, identity={}, counts=None, baseline=0.0, step=0, last_ckpt=None, window=None,
               comm=comm, metrics=MetricsLog(None, [], comm=comm))


def barrier(comm):
    return comm.comm.Barrier() if comm.size > 1 else None


def time_steps(run, n_warmup, n_steps):
    """[(step seconds, allreduce seconds)] of the timed steps on this rank."""
    import numpy as np
    from minibert.train import train_step

    timed = []
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(n_warmup + n_steps):
            barrier(run.comm)
            c0, t0 = run.comm.seconds, time.perf_counter()
            train_step(run, run.args.lr)
            if i >= n_warmup:
                timed.append((time.perf_counter() - t0, run.comm.seconds - c0))
    return timed


def time_bare_allreduce(comm, size, reps=5):
    """Seconds of summing a float32 buffer of ``size`` over the ranks, each right after a barrier."""
    import numpy as np
    buf, times = np.ones(size, dtype=np.float32), []
    for _ in range(reps + 1):
        barrier(comm)
        t0 = time.perf_counter()
        comm.allreduce_grads(buf)
        times.append(time.perf_counter() - t0)
    return times[1:]


def worker(args):
    """One rank of a run: the timed steps, then rank 0 prints every rank's times as one JSON line."""
    from minibert import accel
    from minibert.train import dist
    from minibert.train.metrics import summarize
    comm = dist.world()
    run = build_run(args, comm)
    timed = time_steps(run, args.warmup, args.steps)
    bare = time_bare_allreduce(comm, run.model.params.grad.size) if comm.size > 1 else []
    mine = dict(steps=[t for t, _ in timed], allreduce=[c for _, c in timed], bare=bare)
    ranks = comm.comm.gather(mine, root=0) if comm.size > 1 else [mine]
    if comm.is_root:
        print(json.dumps(dict(preset=args.preset, nproc=comm.size, threads=accel.num_threads(),
                              params=run.model.num_parameters(), grad_bytes=run.model.params.grad.nbytes,
                              ranks=ranks, loss=summarize(run.metrics.window)["loss"])))


# ---------------------------------------------------------------------------- driver
def find_mpiexec():
    """The mpiexec beside this Python (a virtual environment's MPICH), else the one on PATH."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def spawn(preset, nproc, args):
    """One run of ``--worker`` in ``nproc`` processes; its JSON line."""
    env = dict(os.environ)
    for var in THREAD_VARS:
        env[var] = str(max(1, args.cores // nproc))   # before NumPy is imported in the workers
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    worker_args = [str(Path(__file__).resolve()), "--worker", "--preset", preset, "--steps", str(args.steps),
                   "--warmup", str(args.warmup), "--batch", str(args.batch), "--seq-len", str(args.seq_len),
                   "--vocab-size", str(args.vocab_size)]
    if nproc == 1:
        cmd = [sys.executable, *worker_args]
    else:
        mpiexec = args.mpiexec or find_mpiexec()
        if not mpiexec:
            raise SystemExit("no mpiexec found: install mpi4py and MPICH, or pass --mpiexec PATH")
        cmd = [mpiexec, "-n", str(nproc), sys.executable, "-m", "mpi4py", *worker_args]
    busy = wait_for_idle(args.wait_idle) if args.wait_idle else None
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{preset} with {nproc} processes failed:\n{res.stderr[-3000:]}")
    return dict(json.loads(res.stdout.strip().splitlines()[-1]), busy_before=busy)


def summarise(runs):
    """Several runs of one (preset, nproc): step = the slowest rank's time; medians over all steps."""
    r0 = runs[0]
    per_run, all_steps, shares, bare = [], [], [], []
    for r in runs:
        steps = [max(ts) for ts in zip(*(rk["steps"] for rk in r["ranks"]))]
        per_run.append(statistics.median(steps))
        all_steps += steps
        shares += [sum(rk["allreduce"]) / sum(rk["steps"]) for rk in r["ranks"]]
        bare += [t for rk in r["ranks"] for t in rk["bare"]]
    step, n = statistics.median(all_steps), r0["nproc"]
    bus = 2 * (n - 1) / n * r0["grad_bytes"] / statistics.median(bare) / 1e9 if bare else None
    return dict(preset=r0["preset"], nproc=r0["nproc"], threads=r0["threads"], params=r0["params"],
                grad_bytes=r0["grad_bytes"], step_s=step, best_s=min(all_steps), run_medians_s=per_run,
                steps_s=all_steps, busy_before=[r["busy_before"] for r in runs],
                allreduce_share=statistics.mean(shares), bare_allreduce_s=statistics.median(bare) if bare else 0.0,
                bare_share=(statistics.median(bare) / step) if bare else 0.0, bare_bus_gb_s=bus,
                losses=[r["loss"] for r in runs])


def measure(args):
    """Every preset in 1 and N processes, the runs interleaved (1 N N 1 1 N ...) against drifting load."""
    rows = []
    for preset in args.presets:
        runs = {1: [], args.nproc: []}
        for k in range(args.rounds):
            for nproc in ((1, args.nproc) if k % 2 == 0 else (args.nproc, 1)):
                runs[nproc].append(spawn(preset, nproc, args))
        one, many = summarise(runs[1]), summarise(runs[args.nproc])
        many["speedup"] = one["step_s"] / many["step_s"]      # of the pooled medians
        # each round's two runs are neighbours in time: their ratio is the paired comparison
        many["speedup_per_round"] = [a / b for a, b in zip(one["run_medians_s"], many["run_medians_s"])]
        rows += [one, many]
    return rows


def print_measured(rows, args):
    print(f"\n## Measured on this machine: seq-len {args.seq_len}, global batch {args.batch}, float32, "
          f"{args.rounds} runs x {args.steps} timed steps (after {args.warmup} warm-up) per row")
    print("| preset | processes x threads | step ms, median (best) | run medians, ms | speed-up vs 1 process "
          "(per round: median, range) | allreduce share | bare allreduce ms (share; bus GB/s) |")
    print("|---|---|---:|---|---|---:|---:|")
    for r in rows:
        spread = ", ".join(f"{1e3 * t:.0f}" for t in r["run_medians_s"])
        if r["nproc"] == 1:
            speed, share, bare = "1 (reference)", "-", "-"
        else:
            per = r["speedup_per_round"]
            speed = f"**{r['speedup']:.2f}x** ({statistics.median(per):.2f}; {min(per):.2f}-{max(per):.2f})"
            share = f"{100 * r['allreduce_share']:.1f}%"
            bare = f"{1e3 * r['bare_allreduce_s']:.1f} ({100 * r['bare_share']:.1f}%; {r['bare_bus_gb_s']:.1f})"
        print(f"| {r['preset']} ({r['params'] / 1e6:.1f}M) | {r['nproc']} x {r['threads']} | "
              f"{1e3 * r['step_s']:.0f} ({1e3 * r['best_s']:.0f}) | {spread} | {speed} | {share} | {bare} |")
    busy = [b for r in rows for b in r["busy_before"] if b is not None]
    if busy:
        print(f"CPU use by other processes in the second before each run: median {100 * statistics.median(busy):.0f}%, "
              f"max {100 * max(busy):.0f}%")


# ---------------------------------------------------------------------------- model
def ring_allreduce(nbytes, n, bandwidth, latency):
    """(bytes each GPU sends, bandwidth term s, latency term s) of a ring allreduce over n GPUs."""
    sent = 2 * (n - 1) / n * nbytes
    return sent, sent / bandwidth, 2 * (n - 1) * latency


def h100_compute_ms(preset):
    """{seq_len: minibert's H100 step in ms} for ``preset`` (batch 32, float32), from h100_step.json."""
    table = json.loads(H100_JSON.read_text(encoding="utf-8"))["tables"]["after_fused_kernels"]
    return {row["seq_len"]: row["minibert_ms"] for row in table if row["preset"] == preset}


def comm_model(preset, gpus, compute_ms):
    """The allreduce of ``preset``'s float32 gradients on every link and GPU count, against ``compute_ms``."""
    from minibert import BertConfig, BertForPreTraining
    params = BertForPreTraining(BertConfig.from_preset(preset)).num_parameters()
    nbytes = 4 * params
    rows = []
    for name, bandwidth, latency in LINKS:
        for n in gpus:
            sent, t_bw, t_lat = ring_allreduce(nbytes, n, bandwidth, latency)
            t = t_bw + t_lat
            shares = {T: t / (t + ms / 1e3) for T, ms in compute_ms.items()}
            rows.append(dict(link=name, gpus=n, bandwidth_gb_s=bandwidth / 1e9, latency_us=latency * 1e6,
                             sent_mb=sent / 1e6, bandwidth_ms=1e3 * t_bw, latency_ms=1e3 * t_lat,
                             allreduce_ms=1e3 * t, share_by_seq_len=shares))
    return dict(preset=preset, params=params, grad_bytes=nbytes, compute_ms_by_seq_len=compute_ms,
                compute_source=f"{H100_JSON.relative_to(ROOT)}: minibert, one H100, float32, batch 32 per GPU",
                rows=rows)


def print_model(m):
    c = m["compute_ms_by_seq_len"]
    print(f"\n## Model (not measured): {m['preset']}, {m['params']:,} parameters, "
          f"{m['grad_bytes'] / 1e6:.1f} MB of float32 gradients per step")
    if c:
        print("Compute per step: " + ", ".join(f"{ms} ms at seq-len {T}" for T, ms in c.items())
              + f" ({m['compute_source']}); share = allreduce / (allreduce + compute), no overlap.")
    else:
        print(f"No H100 step time is recorded for {m['preset']}: no shares.")
    print("Assumed per GPU and direction: " + "; ".join(f"{name} {bw / 1e9:g} GB/s, {lat * 1e6:g} us per ring step"
                                                      for name, bw, lat in LINKS) + ".")
    head = ["link", "GPUs", "MB sent per GPU", "bandwidth ms", "latency ms", "allreduce ms"]
    head += [f"share at T={T}" for T in c]
    print("| " + " | ".join(head) + " |")
    print("|---|" + "---:|" * (len(head) - 1))
    for r in m["rows"]:
        cells = [r["link"], r["gpus"], f"{r['sent_mb']:.0f}", f"{r['bandwidth_ms']:.1f}", f"{r['latency_ms']:.2f}",
                 f"{r['allreduce_ms']:.1f}", *(f"{100 * s:.0f}%" for s in r["share_by_seq_len"].values())]
        print("| " + " | ".join(map(str, cells)) + " |")


# ---------------------------------------------------------------------------- main
def machine_line():
    import platform

    import numpy
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or "?"
    try:
        from mpi4py import MPI
        mpi = " ".join(MPI.Get_library_version().split()[:3])
    except ImportError:
        mpi = "no mpi4py"
    return (f"{cpu}, {len(os.sched_getaffinity(0))} CPUs for this process; Python {platform.python_version()}, "
            f"NumPy {numpy.__version__}, {mpi}; {time.strftime('%Y-%m-%d %H:%M')}")


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", nargs="+", default=["mini", "small"])
    ap.add_argument("--nproc", type=int, default=2, help="processes of the data-parallel runs")
    ap.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)),
                    help="cores shared out: 1 process x cores threads against N x cores/N")
    ap.add_argument("--batch", type=int, default=16, help="the global batch, the same for every run")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--steps", type=int, default=4, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=2, help="steps before the clock starts")
    ap.add_argument("--rounds", type=int, default=3, help="runs per (preset, processes), interleaved")
    ap.add_argument("--vocab-size", type=int, default=30522)
    ap.add_argument("--wait-idle", type=float, default=10.0,
                    help="before each run, wait up to this many seconds for other processes to go quiet")
    ap.add_argument("--model-preset", default="base", help="the model of part 2")
    ap.add_argument("--gpus", type=int, nargs="+", default=[8, 64])
    ap.add_argument("--model-only", action="store_true", help="part 2 alone")
    ap.add_argument("--mpiexec", help="the MPI launcher (default: beside this Python, else on PATH)")
    ap.add_argument("--json", help="also write every number here")
    ap.add_argument("--smoke", action="store_true", help="a few seconds: tiny shapes, to check the script runs")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--preset", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.smoke:
        args.presets, args.seq_len, args.batch, args.steps, args.warmup, args.rounds = ["tiny"], 16, 4, 2, 1, 1
        args.vocab_size, args.wait_idle, args.model_preset = 1000, 0.0, "tiny"
    if args.batch % args.nproc:
        ap.error(f"--batch {args.batch} must divide among --nproc {args.nproc} processes")
    return args


def main(args):
    machine = machine_line()
    print(f"# {machine}")
    print(f"# 1 process x {args.cores} threads against {args.nproc} processes x "
          f"{max(1, args.cores // args.nproc)} threads: the same {args.cores} cores")
    rows = [] if args.model_only else measure(args)
    if rows:
        print_measured(rows, args)
    model = comm_model(args.model_preset, args.gpus, h100_compute_ms(args.model_preset))
    print_model(model)
    if args.json:
        Path(args.json).write_text(json.dumps(dict(machine=machine, settings=vars(args), measured=rows,
                                                   model=model), indent=1))


if __name__ == "__main__":
    a = parse()
    if a.worker:
        worker(a)
    else:
        main(a)
