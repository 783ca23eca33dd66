"""The loss curves of a run, with the baselines drawn as lines."""
from __future__ import annotations

import math
from pathlib import Path

from ..textio import write_whole


def plot_history(history, path=None, vocab_size=None):
    """Train and held-out MLM loss, and accuracies, with the baselines drawn as lines.

    Saves a PNG at ``path`` (if given) and returns the matplotlib ``Figure``.
    """
    # a bare Figure, not pyplot: saving a file must not switch the backend of a
    # notebook or an interactive session that called us
    from matplotlib.figure import Figure

    train = [h for h in history if h["kind"] == "train"]
    evals = [h for h in history if h["kind"] == "eval"]
    fig = Figure(figsize=(11, 4))
    ax1, ax2 = fig.subplots(1, 2)
    if train:
        ax1.plot([h["step"] for h in train], [h["mlm_loss"] for h in train], lw=1, alpha=0.7,
                 label="MLM loss (train)")
    if evals:
        ax1.plot([h["step"] for h in evals], [h["mlm_loss"] for h in evals], "o-", ms=3,
                 label="MLM loss (held-out)")
        ax1.axhline(evals[-1]["unigram_baseline"], color="gray", ls="--", label="unigram baseline")
    if vocab_size:
        ax1.axhline(math.log(vocab_size), color="gray", ls=":", label="ln V (uniform guess)")
    ax1.set_xlabel("step")
    ax1.set_ylabel("nats per masked token")
    ax1.set_title("Masked language modelling")
    ax1.legend(fontsize=8)
    nsp = any("nsp_acc" in h for h in history)       # a run with --no-nsp has no NSP numbers
    if evals and nsp:
        ax2.plot([h["step"] for h in evals], [h["nsp_acc"] for h in evals], "o-", ms=3,
                 label="NSP accuracy (held-out)")
    if evals:
        ax2.plot([h["step"] for h in evals], [h["mlm_acc"] for h in evals], "s-", ms=3,
                 label="MLM accuracy (held-out)")
    if train and nsp:
        ax2.plot([h["step"] for h in train], [h["nsp_acc"] for h in train], lw=1, alpha=0.4,
                 label="NSP accuracy (train)")
    if nsp:
        ax2.axhline(0.5, color="gray", ls="--", label="NSP chance (50%)")
    if nsp and evals and evals[-1]["nsp_majority"] > 0.5:
        ax2.axhline(evals[-1]["nsp_majority"], color="gray", ls=":", label="NSP: more common label")
    ax2.set_ylim(0, 1)
    ax2.set_xlabel("step")
    ax2.set_title("Accuracy")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    if path is not None:
        kind = Path(path).suffix.lstrip(".") or "png"
        write_whole(path, lambda f: fig.savefig(f, dpi=110, format=kind))
    return fig

