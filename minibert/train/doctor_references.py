"""Reference runs: committed runs of a recipe that ``minibert doctor`` compares a run with, and ``doctor.png``.

``minibert/references/<recipe>/<run>/`` holds the ``run.json`` and ``metrics.jsonl`` of each
(``tools/make_doctor_references.py`` made them; ``references/README.md`` says how). A run is
compared with the references of its recipe: the same corpus, model sizes, sequence length,
sequences per step, vocabulary size and held-out share, which fix what its losses can be.
Learning rate, warmup, steps, seed, dropout and the rest may differ: their effect is what the
comparison shows.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..textio import write_whole
from .args import ABLATIONS
from .run_log import EARLY, OK, UNCHECKED, WARNING, Check, NotARun, RunLog, read_run

REFERENCES = Path(__file__).resolve().parents[1] / "references"
# the settings that may differ from the references', named in the evidence when they do
VARIABLES = ("lr", "warmup", "steps", "seed", "dupe_factor", "dropout", "bias_correction", "max_grad_norm",
             "weight_decay", "mixed_precision", *ABLATIONS)


def recipe(log: RunLog) -> dict | None:
    """What a reference must share with the run to be comparable; None if the run's recipe cannot be told."""
    corpus = str(log.arg("corpus"))
    if corpus not in ("builtin", "wikitext-2", "wikitext2"):
        return None                 # a file's path says nothing of its text
    key = dict(corpus=corpus.replace("wikitext2", "wikitext-2"), architecture=_architecture(log),
               seq_len=log.arg("seq_len"), sequences=log.sequences_per_step, vocab_size=log.vocab_size,
               heldout_fraction=log.arg("heldout_fraction"))
    return None if None in key.values() else key


def _architecture(log: RunLog):
    model = log.model_config()
    if model is None:
        return None
    return tuple(model[k] for k in ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size"))


def find_references(log: RunLog, root: Path = REFERENCES) -> list:
    """The reference runs of the run's recipe (the run itself left out, if it is one of them)."""
    key = recipe(log)
    if key is None or not root.is_dir():
        return []
    found = []
    for run_json in sorted(root.glob("*/*/run.json")):
        try:
            ref = read_run(run_json.parent, recompute=False)
        except NotARun:
            continue
        if recipe(ref) == key and ref.path.resolve() != log.path.resolve():
            found.append(ref)
    return found


def recipes_held(root: Path = REFERENCES) -> list:
    return sorted({p.parent.parent.name for p in root.glob("*/*/run.json")}) if root.is_dir() else []


def band(references, key: str, steps, baseline: float | None = None):
    """(lowest, highest) of the references' held-out ``key`` at ``steps`` (NaN where one has no value).

    ``baseline``: each reference's MLM loss is moved by the difference between its unigram
    baseline and this one. The seed picks the held-out documents, and some are harder to
    predict than others; the distance below the baseline is what the runs share.
    """
    curves = []
    for ref in references:
        xs = [r["step"] for r in ref.evals]
        ys = [r[key] - (r["unigram_baseline"] - baseline if baseline is not None else 0) for r in ref.evals]
        curves.append(np.interp(steps, xs, ys, left=np.nan, right=np.nan) if xs else np.full(len(steps), np.nan))
    stacked = np.array(curves, dtype=float).reshape(len(curves), len(steps))
    return stacked.min(axis=0), stacked.max(axis=0)


def check_reference(log: RunLog, references) -> Check:
    """The run's held-out MLM loss against the band of the reference runs of its recipe."""
    name = "against the reference runs"
    if not references:
        held = ", ".join(recipes_held()) or "none"
        return Check(name, UNCHECKED, f"no reference run of this recipe (corpus, model sizes, --seq-len, "
                     f"sequences per step, vocabulary size, --heldout-fraction); minibert holds reference "
                     f"runs of: {held}")
    evals = [e for e in log.evals if e["step"] >= 100]
    base = evals[-1]["unigram_baseline"] if evals else None
    lo, hi = band(references, "mlm_loss", [e["step"] for e in evals], base) if evals else ([], [])
    inside = [i for i in range(len(evals)) if not math.isnan(hi[i])]
    if not inside:
        return Check(name, EARLY, "no held-out evaluation at a step the reference runs cover yet (from step 100)")
    i = inside[-1]
    e, excess = evals[i], evals[i]["mlm_loss"] - hi[i]
    differs = _differences(log, references)
    numbers = dict(step=e["step"], heldout_mlm_loss=e["mlm_loss"], band=(float(lo[i]), float(hi[i])),
                   excess=float(excess), references=[str(r.path) for r in references])
    runs = f"{len(references)} reference run{'s' if len(references) > 1 else ''}"
    said = (f"held-out MLM loss {e['mlm_loss']:.2f} at step {e['step']:,}; the {runs} of this recipe "
            f"({', '.join(r.path.parent.name + '/' + r.path.name for r in references)}) had {lo[i]:.2f} to "
            f"{hi[i]:.2f} there, each moved onto this run's unigram baseline ({base:.2f}: the seed picks the "
            f"held-out documents, and some are harder than others)"
            + (f"; this run differs from them in {differs}" if differs else ""))
    # seeds alone spread the references' distance below the baseline by 0.15 nats at step 800:
    # only a run further off than that, or than their own spread, is worse than them
    if excess > max(0.2, float(hi[i] - lo[i])):
        return Check(name, WARNING, f"{said}: {excess:.2f} above every one of them",
                     "the settings it does not share with the references are the first suspects", numbers)
    return Check(name, OK, said, numbers=numbers)


def _differences(log: RunLog, references) -> str:
    said = []
    for k in VARIABLES:
        # a run from before the ablation flags was a run of BERT's recipe
        theirs = sorted({repr(ref.args.get(k, ABLATIONS.get(k))) for ref in references})
        mine = log.args.get(k, ABLATIONS.get(k))
        if repr(mine) not in theirs:
            said.append(f"--{k.replace('_', '-')} {mine} (theirs: {', '.join(theirs)})")
    return "; ".join(said)


def draw(log: RunLog, references, path) -> Path:
    """``doctor.png``: the run's MLM loss and NSP accuracy over the band of the reference runs."""
    from matplotlib.figure import Figure      # a bare Figure: no pyplot, no backend switched
    fig = Figure(figsize=(11, 4))
    ax1, ax2 = fig.subplots(1, 2)
    base = log.evals[-1]["unigram_baseline"] if log.evals else None
    _band_behind(ax1, references, "mlm_loss", "held-out, on this run's baseline", base)
    _band_behind(ax2, references, "nsp_acc", "held-out")
    nsp = not log.arg("no_nsp", False)     # a --no-nsp run has no NSP curve of its own
    if log.train:
        steps = [r["step"] for r in log.train]
        ax1.plot(steps, [r["mlm_loss"] for r in log.train], lw=1, alpha=0.7, color="C0", label="this run: training")
        if nsp:
            ax2.plot(steps, [r["nsp_acc"] for r in log.train], lw=1, alpha=0.5, color="C0",
                     label="this run: training")
    if log.evals:
        steps = [e["step"] for e in log.evals]
        ax1.plot(steps, [e["mlm_loss"] for e in log.evals], "o-", ms=3, color="C1", label="this run: held-out")
        ax1.axhline(log.evals[-1]["unigram_baseline"], color="gray", ls="--", label="unigram baseline")
        if nsp:
            ax2.plot(steps, [e["nsp_acc"] for e in log.evals], "o-", ms=3, color="C1", label="this run: held-out")
    if log.uniform_loss:
        ax1.axhline(log.uniform_loss, color="gray", ls=":", label="uniform guess (ln V)")
        ax1.set_ylim(top=log.uniform_loss + 1)    # a diverging loss leaves the picture; the check says how far
    ax2.axhline(0.5, color="gray", ls="--", label="chance (held-out pairs: 50%)")
    p = (log.data or {}).get("not_next_share")
    if isinstance(p, (int, float)):
        ax2.axhline(max(p, 1 - p), color="C0", ls=":", label="training pairs: always the commoner label")
    ax1.set(xlabel="step", ylabel="nats per masked token", title="Masked language modelling")
    ax2.set(xlabel="step", ylim=(0, 1), title="Next sentence prediction: accuracy"
            + ("" if nsp else " (not trained: --no-nsp)"))
    for ax in (ax1, ax2):
        ax.legend(fontsize=7)
    runs = f"{len(references)} reference run{'s' if len(references) > 1 else ''}"
    fig.suptitle(f"{log.path.name}: " + (f"over the band of the {runs} of its recipe (lowest to highest)"
                                         if references else "no reference run of this recipe"), fontsize=10)
    fig.tight_layout()
    write_whole(path, lambda f: fig.savefig(f, dpi=110, format="png"))
    return Path(path)


def _band_behind(ax, references, key: str, what: str, baseline=None) -> None:
    """The references' lowest-to-highest range of a held-out curve, shaded."""
    if not references or (key == "mlm_loss" and baseline is None):
        return
    steps = sorted({e["step"] for ref in references for e in ref.evals})
    lo, hi = band(references, key, steps, baseline)
    ax.fill_between(steps, lo, hi, color="gray", alpha=0.3, lw=0, label=f"reference runs ({len(references)}): {what}")
