"""Make the results notebook 12 reads: the default recipe and five one-flag ablations, three seeds each.

    python tools/make_ablation_results.py       # about 45 minutes on a shared 2-core CPU

Every run is ``make demo``'s recipe (``minibert.demo.DEMO``: the built-in corpus, the tiny
model, 128 sequences of 32 tokens a step) cut to ``STEPS`` steps, with one flag changed. For
each run it keeps the held-out evaluations (``metrics.jsonl``'s eval records), and the final
model's MLM loss and accuracy on the *default* run's held-out batches of the same seed: the
same documents, the same tokens masked the same way. (A run's own held-out batches follow
its flags: packed sentences for --no-nsp, whole words or 30% of the tokens masked for the
masking flags, so its own numbers measure another task.) Everything goes into
``notebooks/pretrained/ablations.json``, a few tens of kilobytes.
"""
from __future__ import annotations

import json
import sys
import tempfile
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


def settings(seed: int, **flags) -> dict:
    s = dict(DEMO, steps=STEPS, warmup=STEPS // 10, eval_every=50, save_every=STEPS, seed=seed, keep=1,
             progress=False, plot=False)
    s.update(flags)
    return s


def common_batches(seed: int, tmp: Path) -> list:
    """The default run's held-out batches for ``seed`` (every flag of one seed trains the same vocabulary)."""
    return prepare_data(TrainArgs(out=str(tmp / f"common-{seed}"), **settings(seed)), tmp / f"common-{seed}",
                        log=lambda *a: None)[3]


def one_run(name: str, seed: int, flags: dict, tmp: Path, batches: list) -> dict:
    out = tmp / f"{name.replace(' ', '-').replace('%', '')}-{seed}"
    result = pretrain(TrainArgs(out=str(out), **settings(seed, **flags)), log=lambda *a: None)
    evals = [[_round(e.get(k)) for k in KEEP] for e in result.history if e["kind"] == "eval"]
    common = evaluate(result.model, batches)
    return dict(seed=seed, evals=evals, common=dict(mlm_loss=_round(common["mlm_loss"]),
                                                    mlm_acc=_round(common["mlm_acc"])))


def _round(x):
    return x if x is None or isinstance(x, int) else round(float(x), 5)


def main() -> None:
    recipe = {k: v for k, v in settings(0).items() if k not in ("seed", "progress", "plot", "keep")}
    results = dict(recipe=recipe, steps=STEPS, seeds=list(SEEDS), columns=list(KEEP),
                   ablations={})
    with tempfile.TemporaryDirectory(prefix="minibert-ablations-") as tmp:
        tmp = Path(tmp)
        batches = {seed: common_batches(seed, tmp) for seed in SEEDS}
        for name, (flag, flags) in ABLATIONS.items():
            runs = []
            for seed in SEEDS:
                runs.append(one_run(name, seed, flags, tmp, batches[seed]))
                print(f"{name} seed {seed}: held-out MLM loss {runs[-1]['evals'][-1][1]:.3f}", flush=True)
            results["ablations"][name] = dict(flag=flag, runs=runs)
    OUT.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
