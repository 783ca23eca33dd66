"""``make demo``: pre-train a tiny BERT on the built-in corpus and show that it learned.

A few minutes on a laptop CPU: the WordPiece vocabulary is trained on the
corpus, the model starts from random weights, and at the end the held-out
numbers are printed next to the baselines a model that learned nothing would
get, with the loss curves and a few fill-mask predictions.
"""
from __future__ import annotations

import math
import shutil
import time
from pathlib import Path

from .train import TrainArgs, check_args, fill_mask, pretrain

# Short sequences in large batches: within a few CPU minutes the model sees many
# sequences, and NSP (one label per sequence) gets 128 labels a step.  BERT's
# dropout (0.1) stays on: without it the model memorises which training
# documents go together and NSP does not carry over to held-out documents.
DEMO = dict(corpus="builtin", config="tiny", vocab_size=4000, seq_len=32, batch_size=128,
            steps=800, lr=3e-3, warmup=80, eval_every=100, save_every=200, log_every=10,
            heldout_fraction=0.1, eval_instances=512, seed=0)

SENTENCES = [
    "the [MASK] statement exits the innermost enclosing loop .",
    "return a new list containing the [MASK] of the sequence .",
    "raise a valueerror if the [MASK] is not found .",
    "if the file does not exist , an [MASK] is raised .",
]


MARKER = ".minibert-demo"   # written into the demo's folder: the only folder it will ever delete


def run_demo(out="runs/demo", steps=None) -> int:
    start = time.perf_counter()
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise ValueError(f"--steps must be a positive integer, got {steps!r}")
    settings = dict(DEMO)
    if steps is not None:  # a shorter (or longer) demo keeps the warmup at a tenth of the run at most
        settings.update(steps=steps, warmup=min(DEMO["warmup"], steps // 10))
    args = TrainArgs(out=str(out), **settings)
    check_args(args)              # every setting checked before anything is deleted
    out = Path(out)
    clear_previous_demo(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("a minibert demo run: `minibert demo` replaces this folder\n")
    result = pretrain(args)
    ev = result.final_eval
    V = result.model.config.vocab_size
    print()
    print(f"held-out after {result.step} steps ({time.perf_counter() - start:.0f} s in all):")
    print(f"  {'':22s}{'minibert':>10s}{'baseline':>10s}")
    print(f"  {'MLM loss (nats)':22s}{ev['mlm_loss']:10.3f}{ev['unigram_baseline']:10.3f}"
          f"   guessing by word frequency alone (uniform guess: ln V = {math.log(V):.2f})")
    print(f"  {'MLM accuracy':22s}{ev['mlm_acc']:10.1%}")
    print(f"  {'NSP accuracy':22s}{ev['nsp_acc']:10.1%}{max(0.5, ev['nsp_majority']):10.1%}"
          f"   chance: the {ev['n_pairs']} held-out pairs are half IsNext, half NotNext")
    print(f"  ({ev['n_masked']} masked tokens in held-out documents the model never saw)")
    print()
    print("fill-mask, top 5:")
    for text in SENTENCES:
        preds = fill_mask(result.model, result.tokenizer, text, top_k=5)[0]
        print(f"  {text}\n      " + "  ".join(f"{t} ({p:.2f})" for t, p in preds))
    print(f"\nloss curves: {result.out / 'loss.png'}   model: {result.out / 'model'}")
    return 0


def clear_previous_demo(out: Path) -> None:
    """The demo always starts from scratch, but deletes only a folder that an earlier demo made."""
    if not out.is_dir() or not any(p.name != ".write-test" for p in out.iterdir()):
        return
    here = Path.cwd().resolve()
    target = out.resolve()
    if target == here or target in here.parents or target == Path.home().resolve():
        raise ValueError(f"--out {out} is the current folder, one above it or the home folder; "
                         f"the demo needs a folder of its own")
    if not (out / MARKER).is_file():
        raise ValueError(f"--out {out} is not empty and no earlier demo wrote it (no {MARKER} file); "
                         f"choose another folder, or delete it yourself if it is yours to delete")
    shutil.rmtree(out)
