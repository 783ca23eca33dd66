"""``make demo``: pre-train a tiny BERT on the built-in corpus and show that it learned.

A few minutes on a laptop CPU: the WordPiece vocabulary is trained on the
corpus, the model starts from random weights, and at the end the held-out
numbers are printed next to the baselines a model that learned nothing would
get (guessing by word frequency), with the loss curves and some held-out masked
words, drawn at random, with the model's guesses.
"""
from __future__ import annotations

import math
import shutil
import signal
import time
from pathlib import Path

import numpy as np

from .checks import is_int
from .train import METRICS_NAME, OUTPUT_NAMES, RUN_NAME, TrainArgs, check_args, heldout, lock_run_folder, pretrain

# Short sequences in large batches: within a few CPU minutes the model sees many
# sequences, and NSP (one label per sequence) gets 128 labels a step.  BERT's
# dropout (0.1) stays on: without it the model memorises which training
# documents go together and NSP does not carry over to held-out documents.
DEMO = dict(corpus="builtin", config="tiny", vocab_size=4000, seq_len=32, batch_size=128,
            steps=800, lr=3e-3, warmup=80, eval_every=100, save_every=200, log_every=10,
            heldout_fraction=0.1, eval_instances=512, seed=0)

MARKER = ".minibert-demo"   # written into the demo's folder: the only folder it will ever delete


def run_demo(out="runs/demo", steps=None, device="cpu") -> int:
    start = time.perf_counter()
    if steps is not None and (not is_int(steps) or steps < 1):
        raise ValueError(f"--steps must be a positive integer, got {steps!r}")
    settings = dict(DEMO)
    if steps is not None:  # a shorter (or longer) demo keeps the warmup at a tenth of the run at most
        settings.update(steps=steps, warmup=min(DEMO["warmup"], steps // 10))
    args = TrainArgs(out=str(out), device=device, **settings)
    check_args(args)              # every setting (and the GPU, for "cuda") checked before anything is deleted
    out = Path(out)
    lock = lock_run_folder(out)   # held from the clearing to the end: no run is in there meanwhile
    try:
        clear_previous_demo(out)
        (out / MARKER).write_text("a minibert demo run: `minibert demo` replaces this folder\n")
        # the demo has no --resume (it starts over each time): the loop's advice to use it is left out
        result = pretrain(args, log=lambda message: print(message.replace("; continue with --resume", "")))
    finally:
        lock.close()
    if result.stopped_by is not None:       # a signal, or an output that went away: no results to show
        print(f"\nthe demo stopped at step {result.step} of {args.steps} ({result.stopped_by}) before its "
              f"held-out numbers, loss curves and model; run it again to start it over")
        signum = getattr(signal, str(result.stopped_by), None)
        return 128 + int(signum) if isinstance(signum, signal.Signals) else 1
    print()
    print(f"held-out after {result.step} steps ({time.perf_counter() - start:.0f} s in all):")
    show_heldout(result)
    print(f"\nloss curves: {result.out / 'loss.png'}   model: {result.out / 'model'}")
    return 0


def show_heldout(result, examples_shown: int = 4) -> None:
    """The held-out numbers beside what a model that learned nothing would get, and some held-out
    masked words (drawn at random, not chosen) with the model's guesses."""
    ev, tokenizer = result.final_eval, result.tokenizer
    V = result.model.config.vocab_size
    found = heldout.predictions(result.model, result.eval_batches, result.token_counts)
    common = [tokenizer.vocab[i] for i in np.argsort(-result.token_counts, kind="stable")[:5]]
    print(f"  {'':22s}{'minibert':>10s}{'baseline':>10s}")
    print(f"  {'MLM loss (nats)':22s}{ev['mlm_loss']:10.3f}{ev['unigram_baseline']:10.3f}"
          f"   guessing by word frequency alone (uniform guess: ln V = {math.log(V):.2f})")
    # 80% of the positions show [MASK]; at the others the model sees a random token or the true one
    at_mask = [p for p in found if p.shown_id == tokenizer.mask_id]
    for k, which in ((1, f"always {common[0]!r}"), (5, "always " + " ".join(common))):
        model, frequency = heldout.top_k_accuracy(found, k)
        print(f"  {f'MLM top-{k} accuracy':22s}{model:10.1%}{frequency:10.1%}   {which}")
    for k in (1, 5):
        model, frequency = heldout.top_k_accuracy(at_mask, k)
        print(f"  {f'  at [MASK] only':22s}{model:10.1%}{frequency:10.1%}   top-{k}, the {len(at_mask)} "
              f"positions that show [MASK]" + (" (the rest show a random or the true word)" if k == 1 else ""))
    print(f"  {'NSP accuracy':22s}{ev['nsp_acc']:10.1%}{max(0.5, ev['nsp_majority']):10.1%}"
          f"   chance: the {ev['n_pairs']} held-out pairs are half IsNext, half NotNext")
    print(f"  ({ev['n_masked']} masked tokens in held-out documents the model never saw)")
    shown = heldout.examples(found, result.eval_batches, tokenizer, n=examples_shown)
    print(f"\n{len(shown)} held-out masked words (____), drawn at random, in the text as the model saw it "
          f"(other words masked or replaced too): the true word's rank among {V:,} under minibert and by "
          f"frequency, and minibert's top 5")
    for ex in shown:
        p = ex["prediction"]
        print(f"  {ex['text']}\n      {ex['true']}: rank {p.model_rank} under minibert, {p.frequency_rank} by "
              f"frequency; minibert: " + "  ".join(f"{t} ({q:.2f})" for t, q in ex["top"]))


def clear_previous_demo(out: Path) -> None:
    """Empty ``out`` for a new demo run, if an earlier demo made what is in it.

    Only a folder that holds nothing but what a run writes is ever emptied,
    and only if the demo marked it, or (a demo run from before the marker
    existed) its newest checkpoint was written with the demo's settings.
    """
    # a probe of a run starting beside us is its own, not ours to delete
    entries = [p for p in out.iterdir() if not p.name.startswith(".write-test")] if out.is_dir() else []
    if not entries:
        return
    here = Path.cwd().resolve()
    target = out.resolve()
    if target == here or target in here.parents or target == Path.home().resolve():
        raise ValueError(f"--out {out} is the current folder, one above it or the home folder; "
                         f"the demo needs a folder of its own")
    foreign = [p.name for p in entries if not _written_by_a_run(p.name)]
    if foreign or not ((out / MARKER).is_file() or _old_demo_run(out)):
        raise ValueError(f"--out {out} is not empty and no earlier demo wrote it"
                         + (f" (it holds {', '.join(sorted(foreign)[:3])})" if foreign else "")
                         + "; choose another folder, or delete it yourself if it is yours to delete")
    for p in entries:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()


# what a run killed mid-write leaves: a file written whole under a temporary name (and the
# name metrics.jsonl's had before), an export under way, half a checkpoint
_TEMPORARY = {f".{name}.tmp" for name in (*OUTPUT_NAMES, RUN_NAME)} | {Path(METRICS_NAME).with_suffix(".tmp").name}


def _written_by_a_run(name: str) -> bool:
    return (name in (*OUTPUT_NAMES, RUN_NAME, MARKER) or name in _TEMPORARY
            or (name.startswith("checkpoint-") and name.endswith(".npz"))
            or (name.startswith(".checkpoint-") and name.endswith(".tmp")))


def _old_demo_run(out: Path) -> bool:
    """A run folder whose newest checkpoint has the demo's settings (a demo from before the marker)."""
    from .train.checkpoint_files import CheckpointError, latest_checkpoint, load_checkpoint
    path = latest_checkpoint(out)
    if path is None:
        return False
    try:
        run = load_checkpoint(path)[1].get("run", {})
    except (CheckpointError, OSError, ValueError):
        return False
    same = all(run.get(k) == DEMO[k] for k in ("batch_size", "seq_len", "lr", "seed"))
    return same and run.get("config", {}).get("hidden_size") == 128     # the tiny preset
