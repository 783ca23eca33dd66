"""Make the results notebook 12 reads: the default recipe and five one-flag ablations, three seeds each.

    python tools/make_ablation_results.py       # about 45 minutes on a shared 2-core CPU
    python tools/make_ablation_results.py --recipe wikitext-2 --device cuda --data-dir DIR
                                                # WikiText-2 with mini: a GPU's work (--steps to shorten)
    python tools/make_ablation_results.py ... --resume   # go on where a stopped one left off
    python tools/make_ablation_results.py ... --jobs 6    # a process per ablation, at most 6 at once
                                                # (a GPU with room for several runs)
    python tools/make_ablation_results.py ... --only "no NSP" --out part.json   # one ablation,
    python tools/make_ablation_results.py ... --merge part1.json part2.json     # and joining such files

Every run is ``make demo``'s recipe (``minibert.demo.DEMO``: the built-in corpus, the tiny
model, 128 sequences of 32 tokens a step) cut to ``STEPS`` steps, with one flag changed. For
each run it keeps the held-out evaluations (``metrics.jsonl``'s eval records), and the final
model's MLM loss and accuracy on the *default* run's held-out batches of the same seed: the
same documents, the same tokens masked the same way. The file is written again after every run
(``"complete": false`` until the last), so a job stopped part-way keeps what it finished, and
``--resume`` runs only what the file lacks. (A run's own held-out batches follow
its flags: packed sentences for --no-nsp, whole words or 30% of the tokens masked for the
masking flags, so its own numbers measure another task.) Everything goes into
``notebooks/pretrained/ablations.json``, a few tens of kilobytes.
"""
from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minibert.demo import DEMO                                   # noqa: E402
from minibert.train import TrainArgs, pretrain                   # noqa: E402
from minibert.train.data import prepare_data                     # noqa: E402
from minibert.train.metrics import evaluate                      # noqa: E402

OUT = ROOT / "notebooks" / "pretrained" / "ablations.json"
STEPS = 500          # make demo's 800 steps, 18 times, take too long on a shared 2-core CPU
SEEDS = (0, 1, 2)
# the second recipe: the README's WikiText-2 run with mini, cut to 1,500 steps (about 80 s a run on one
# H100 at its measured 54 ms a step; on a 2-core CPU some hours a run)
WIKITEXT2 = dict(corpus="wikitext-2", config="mini", vocab_size=8000, seq_len=128, batch_size=128, lr=2e-3,
                 dupe_factor=10, heldout_fraction=0.1, eval_instances=1024, log_every=10)
RECIPES = {"builtin": (DEMO, STEPS, OUT),
           "wikitext-2": (WIKITEXT2, 1500, ROOT / "notebooks" / "pretrained" / "ablations_wikitext2.json")}
# the name notebook 12 shows, the command-line flags, and the same as TrainArgs settings
ABLATIONS = {
    "default": ("", {}),
    "no NSP": ("--no-nsp", dict(no_nsp=True)),
    "30% masked": ("--mlm-probability 0.3", dict(mlm_probability=0.3)),
    "whole words": ("--whole-word-masking", dict(whole_word_masking=True)),
    "pre-LN": ("--pre-ln", dict(pre_ln=True)),
    "no dropout": ("--dropout 0", dict(dropout=0.0)),
}
KEEP = ("step", "mlm_loss", "mlm_acc", "nsp_acc", "unigram_baseline")


def settings(seed: int, base=DEMO, steps=STEPS, **flags) -> dict:
    """A run's TrainArgs settings: the recipe ``base`` cut to ``steps``, with one ablation's ``flags``."""
    s = dict(base, steps=steps, warmup=steps // 10, eval_every=max(steps // 10, 1), save_every=steps, seed=seed,
             keep=1, progress=False, plot=False)
    s.update(flags)
    return s


def common_batches(seed: int, tmp: Path, base: dict, steps: int) -> list:
    """The default run's held-out batches for ``seed`` (every flag of one seed trains the same vocabulary)."""
    return prepare_data(TrainArgs(out=str(tmp / f"common-{seed}"), **settings(seed, base, steps)), tmp / f"common-{seed}",
                        log=lambda *a: None)[3]


def slug(name: str) -> str:
    """An ablation's name in a file name: "30% masked" -> "30-masked"."""
    return name.replace(" ", "-").replace("%", "")


def one_run(name: str, seed: int, flags: dict, tmp: Path, batches: list, base: dict, steps: int) -> dict:
    out = tmp / f"{slug(name)}-{seed}"
    result = pretrain(TrainArgs(out=str(out), **settings(seed, base, steps, **flags)), log=lambda *a: None)
    if result.step != steps:        # a signal (a time limit's SIGTERM) ends a run early, and cleanly: keep it out
        why = result.stopped_by or "why unknown"
        sys.exit(f"{name} seed {seed}: stopped at step {result.step} of {steps} ({why}); not recorded: "
                 "--resume runs it again")
    evals = [[_round(e.get(k)) for k in KEEP] for e in result.history if e["kind"] == "eval"]
    common = evaluate(result.model, batches)
    return dict(seed=seed, evals=evals, common=dict(mlm_loss=_round(common["mlm_loss"]),
                                                    mlm_acc=_round(common["mlm_acc"])))


def in_parallel(jobs: int, todo: list, child: list, parts: Path, take, save) -> list:
    """Each ablation of ``todo`` in a process of its own (this tool with ``child``'s arguments and
    --only NAME --resume, into a file of ``parts``), at most ``jobs`` at once.  Every few seconds the
    runs they have finished are taken into the results (``take``) and saved, so a job stopped
    part-way keeps them.  Returns the ablations whose process failed."""
    parts.mkdir(parents=True, exist_ok=True)
    waiting, running, failed = list(todo), {}, []
    stop = signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))   # a time limit: stop the processes too
    try:
        while waiting or running:
            while waiting and len(running) < jobs:
                name = waiting.pop(0)
                part = parts / f"{slug(name)}.json"
                log = open(part.with_suffix(".log"), "w", encoding="utf-8")
                running[name] = (subprocess.Popen(child + ["--only", name, "--out", str(part), "--resume"],
                                                  stdout=log, stderr=subprocess.STDOUT), part, log)
            time.sleep(POLL_S)
            for name, (proc, part, log) in list(running.items()):
                finished = proc.poll() is not None
                if part.exists():
                    take(part)
                if finished:
                    log.close()
                    del running[name]
                    if proc.returncode:
                        failed.append(name)
                        print(f"{name}: its process failed; the end of {part.with_suffix('.log')}:\n"
                              + "".join(part.with_suffix(".log").read_text(encoding="utf-8").splitlines(True)[-5:]))
            save()
    finally:
        signal.signal(signal.SIGTERM, stop)
        for proc, part, log in running.values():
            proc.terminate()            # a run stops cleanly on SIGTERM, and is not recorded
            proc.wait()
            log.close()
            if part.exists():
                take(part)
        save()
    return failed


POLL_S = 2.0


def _round(x):
    return x if x is None or isinstance(x, int) else round(float(x), 5)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", choices=sorted(RECIPES), default="builtin")
    p.add_argument("--steps", type=int, help="steps per run (default: the recipe's)")
    p.add_argument("--seeds", type=int, default=len(SEEDS), help="seeds 0 .. N-1 (default 3)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--data-dir", help="a local copy of the corpus (WikiText-2's wiki.valid.raw and wiki.test.raw)")
    p.add_argument("--out", type=Path, help="the results file (default: the recipe's, in notebooks/pretrained/)")
    p.add_argument("--resume", action="store_true",
                   help="keep the runs the results file already holds (of the same recipe) and run the rest")
    p.add_argument("--only", action="append", choices=list(ABLATIONS), metavar="NAME",
                   help=f"run only this ablation (repeatable; one of: {', '.join(ABLATIONS).replace('%', '%%')})")
    p.add_argument("--merge", nargs="+", type=Path, metavar="FILE",
                   help="join the runs of these results files (of the same recipe) into --out; run nothing")
    p.add_argument("--runs-dir", type=Path, help="keep the run folders here (default: a temporary folder)")
    p.add_argument("--jobs", type=int, default=1,
                   help="run the ablations in this many processes at once (each keeps its runs in "
                        "OUT.jobs/, joined into OUT every few seconds)")
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error("--jobs must be at least 1")
    recipe, steps, out = RECIPES[args.recipe]
    steps, out = args.steps or steps, args.out or out
    if steps < 10 or args.seeds < 1:
        p.error("--steps must be at least 10 and --seeds at least 1")
    base = dict(recipe, device=args.device, **({"data_dir": args.data_dir} if args.data_dir else {}))
    seeds = list(range(args.seeds))
    hidden = ("seed", "progress", "plot", "keep", "data_dir") + (("device",) if args.device == "cpu" else ())
    shown = {k: v for k, v in settings(0, base, steps).items() if k not in hidden}
    results = dict(recipe=shown, steps=steps, seeds=seeds, columns=list(KEEP), ablations={}, complete=False)
    same = ("recipe", "steps", "seeds", "columns")
    def take(path: Path, hint: str) -> None:
        """Add the runs of the results file ``path``, refused if it was made with another recipe."""
        old = json.loads(path.read_text(encoding="utf-8"))
        differs = [k for k in same if old.get(k) != results[k]]
        if differs:
            p.error(f"{path} holds runs of another recipe ({', '.join(differs)} differ): {hint}")
        for name, entry in old["ablations"].items():
            mine = results["ablations"].setdefault(name, dict(flag=entry["flag"], runs=[]))
            seen = {r["seed"] for r in mine["runs"]}
            mine["runs"] = sorted(mine["runs"] + [r for r in entry["runs"] if r["seed"] not in seen],
                                  key=lambda r: r["seed"])

    if args.resume and out.exists():
        take(out, "move it away, or run without --resume")

    def save():
        # in the order of ABLATIONS whatever order the runs were made in; a stopped job leaves a whole file
        results["ablations"] = {n: results["ablations"][n] for n in ABLATIONS if n in results["ablations"]}
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_name(out.name + ".part")
        part.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        part.replace(out)

    def has_all(name) -> bool:
        return sorted(r["seed"] for r in results["ablations"].get(name, {}).get("runs", [])) == seeds

    def whole() -> bool:
        return all(has_all(n) for n in ABLATIONS)

    if args.merge:
        for path in args.merge:
            take(path, "it cannot be joined to these")
        results["complete"] = whole()
        save()
        print(f"wrote {out}: {sum(len(a['runs']) for a in results['ablations'].values())} runs"
              + ("" if results["complete"] else f", not all {len(ABLATIONS) * len(seeds)} yet"))
        return

    if args.jobs > 1:
        todo = [n for n in ABLATIONS if (not args.only or n in args.only) and not has_all(n)]
        child = [sys.executable, str(Path(__file__).resolve()), "--recipe", args.recipe, "--steps", str(steps),
                 "--seeds", str(args.seeds), "--device", args.device]
        child += ["--data-dir", args.data_dir] if args.data_dir else []
        child += ["--runs-dir", str(args.runs_dir)] if args.runs_dir else []
        parts = out.with_name(out.name + ".jobs")
        for name in todo:        # each process starts from the runs of its ablation the results hold
            mine = {name: results["ablations"][name]} if name in results["ablations"] else {}
            part = parts / f"{slug(name)}.json"
            part.parent.mkdir(parents=True, exist_ok=True)
            part.write_text(json.dumps(dict(results, ablations=mine)) + "\n", encoding="utf-8")
        before = {n: len(a["runs"]) for n, a in results["ablations"].items()}

        def take_and_tell(part):
            take(part, "it was not made by this job")
            for n, a in results["ablations"].items():
                for run in a["runs"][before.get(n, 0):]:
                    print(f"{n} seed {run['seed']}: held-out MLM loss {run['evals'][-1][1]:.3f}", flush=True)
                before[n] = len(a["runs"])
        failed = in_parallel(args.jobs, todo, child, parts, take_and_tell, save)
        results["complete"] = whole()
        save()
        if failed:
            sys.exit(f"wrote {out}, without what the processes of {', '.join(failed)} did not finish: "
                     "--resume runs it again")
        shutil.rmtree(parts)     # every process finished: their files are in OUT
        print(f"wrote {out}" + ("" if results["complete"] else " (not every ablation)"))
        return

    with tempfile.TemporaryDirectory(prefix="minibert-ablations-") as tmp:
        tmp = Path(tmp)
        runs_dir = args.runs_dir or tmp
        batches = {}
        for name, (flag, flags) in ABLATIONS.items():
            if args.only and name not in args.only:
                continue
            entry = results["ablations"].setdefault(name, dict(flag=flag, runs=[]))
            for seed in seeds:
                if any(r["seed"] == seed for r in entry["runs"]):
                    print(f"{name} seed {seed}: in {out} already", flush=True)
                    continue
                if seed not in batches:
                    batches[seed] = common_batches(seed, tmp, base, steps)
                start = time.perf_counter()
                run = one_run(name, seed, flags, runs_dir, batches[seed], base, steps)
                entry["runs"].append(run)
                entry["runs"].sort(key=lambda r: r["seed"])
                save()
                print(f"{name} seed {seed}: held-out MLM loss {run['evals'][-1][1]:.3f} "
                      f"({time.perf_counter() - start:.0f} s)", flush=True)
    results["complete"] = whole()
    save()
    print(f"wrote {out}" + ("" if results["complete"] else " (not every ablation: --merge joins the others)"))


if __name__ == "__main__":
    main()
