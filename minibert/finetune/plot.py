"""A fine-tuning run at a glance: each run's training loss, and each setting's development metric."""
from __future__ import annotations

import json
from pathlib import Path

RUN = ("lr", "batch_size", "epochs", "seed")


def plot_finetune(metrics_file: Path, metric: tuple, path: Path):
    """Left: the loss of every step of every run in ``metrics_file`` (metrics.jsonl).  Right: the
    development metric ``metric`` ((file, name), e.g. ("dev", "accuracy")) of each run, by setting, with
    each setting's mean.  Saves a PNG at ``path``; returns the matplotlib ``Figure``."""
    from matplotlib.figure import Figure

    rows = [json.loads(line) for line in Path(metrics_file).read_text(encoding="utf-8").splitlines() if line]
    steps, results = {}, {}
    for r in rows:
        run = tuple(r.get(k) for k in RUN)
        if "loss" in r:
            steps.setdefault(run, []).append((r["step"], r["loss"]))
        elif r.get("split") == metric[0] and metric[1] in r:
            results.setdefault(run[:3], []).append(r[metric[1]])
    fig = Figure(figsize=(11, 4))
    ax1, ax2 = fig.subplots(1, 2)
    for (lr, batch, epochs, seed), points in steps.items():
        ax1.plot(*zip(*points), lw=1, alpha=0.8, label=f"lr {lr:g}, batch {batch}, {epochs} ep., seed {seed}")
    ax1.set_xlabel("step")
    ax1.set_ylabel("training loss")
    ax1.set_title("Fine-tuning loss")
    if len(steps) <= 8:
        ax1.legend(fontsize=7)
    for i, values in enumerate(results.values()):
        ax2.plot([i] * len(values), values, "o", alpha=0.6, color="C0")
        ax2.plot([i - 0.3, i + 0.3], [sum(values) / len(values)] * 2, color="C1", lw=2)
    ax2.set_xticks(range(len(results)))
    many = len(results) > 6                 # BERT's grid has 18: a label each, upright
    ax2.set_xticklabels([f"b{b}, lr {lr:g}, {e} ep." if many else f"b{b}\nlr {lr:g}\n{e} ep." for lr, b, e in results],
                        fontsize=7, rotation=90 if many else 0)
    ax2.set_ylabel(f"{metric[0]} {metric[1]}")
    ax2.set_title("Each run (dots) and each setting's mean (line)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return fig
