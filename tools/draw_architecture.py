"""Draw BERT's architecture as minibert builds it: notebooks/figures/bert_architecture.png.

    python tools/draw_architecture.py [--out PATH]

The embeddings (three tables summed, then LayerNorm), one post-LN encoder layer (repeated L
times), and the two pre-training heads: the MLM head, whose decoder is the word-embedding table
itself (tied) plus a bias, and the NSP head on the pooled [CLS] vector. Parameter names are
Hugging Face's, as in minibert's state dict.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "notebooks" / "figures" / "bert_architecture.png"
BLUE, ORANGE, GREEN, GREY, PURPLE = "#dbe8f6", "#fbe3cc", "#dcefd9", "#ececec", "#e8def3"


def box(ax, x, y, w, h, text, color, size=8.5, weight="normal"):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                fc=color, ec="#555555", lw=0.8))
    ax.text(x, y, text, ha="center", va="center", fontsize=size, weight=weight)


def arrow(ax, start, end, style="-|>", color="#333333", ls="-", rad=0.0):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=9, color=color, lw=0.9,
                                 linestyle=ls, connectionstyle=f"arc3,rad={rad}", shrinkA=2, shrinkB=2))


def draw(out: Path = OUT) -> Path:
    fig, ax = plt.subplots(figsize=(8.2, 9.4))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 13.6)
    ax.axis("off")

    # ---- the inputs and the embeddings
    for x, name in ((2.2, "input_ids $w_t$"), (5.0, "positions $t$"), (7.8, "token_type_ids $s_t$")):
        ax.text(x, 0.35, name, ha="center", va="center", fontsize=8.5)
    tables = ((2.2, "word_embeddings\n$E_{word}$  (V, H)"), (5.0, "position_embeddings\n(512, H)"),
              (7.8, "token_type_embeddings\n(2, H)"))
    for x, name in tables:
        box(ax, x, 1.25, 2.5, 0.8, name, BLUE)
        arrow(ax, (x, 0.55), (x, 0.85))
        arrow(ax, (x, 1.65), (5.0, 2.25) if x != 5.0 else (5.0, 2.25))
    box(ax, 5.0, 2.55, 3.8, 0.55, "sum, LayerNorm (eps 1e-12), dropout", GREY)

    # ---- one encoder layer, post-LN, repeated L times
    ax.add_patch(FancyBboxPatch((1.3, 3.15), 7.4, 5.3, boxstyle="round,pad=0.05,rounding_size=0.15",
                                fc="none", ec="#888888", lw=1.0, ls="--"))
    ax.text(8.55, 8.25, "× L layers\n(post-LN)", ha="right", va="top", fontsize=8.5, style="italic")
    arrow(ax, (5.0, 2.83), (5.0, 3.55))
    box(ax, 5.0, 3.95, 5.4, 0.75, "multi-head self-attention: A heads of D = H / A\n"
        "softmax(Q K$^T$ / $\\sqrt{D}$ + mask) V, then a dense layer (H, H)", ORANGE)
    box(ax, 5.0, 5.05, 3.8, 0.5, "dropout, add the input, LayerNorm", GREY)
    box(ax, 5.0, 6.15, 4.6, 0.75, "feed-forward: dense (4H, H), GELU (erf),\ndense (H, 4H)", ORANGE)
    box(ax, 5.0, 7.25, 3.8, 0.5, "dropout, add, LayerNorm", GREY)
    for a, b in ((4.33, 4.8), (5.3, 5.77), (6.53, 7.0)):
        arrow(ax, (5.0, a), (5.0, b))
    # the two skip paths
    arrow(ax, (2.7, 3.3), (3.1, 5.05), rad=-0.35, color="#777777")
    arrow(ax, (2.7, 5.3), (3.1, 7.25), rad=-0.35, color="#777777")
    ax.text(1.55, 4.35, "skip", fontsize=7.5, color="#777777")
    ax.text(1.55, 6.4, "skip", fontsize=7.5, color="#777777")
    ax.text(5.0, 8.1, "hidden states (B, T, H)", ha="center", fontsize=8.5)
    arrow(ax, (5.0, 7.5), (5.0, 7.95))

    # ---- the MLM head (every position; the loss at the chosen 15%)
    arrow(ax, (3.6, 8.3), (2.6, 9.05))
    box(ax, 2.6, 9.4, 3.6, 0.6, "transform: dense (H, H), GELU,\nLayerNorm", GREEN)
    box(ax, 2.6, 10.6, 3.6, 0.75, "decoder: $E_{word}^T$ + bias (V)\n(the word table itself: tied)", GREEN)
    arrow(ax, (2.6, 9.7), (2.6, 10.22))
    box(ax, 2.6, 11.85, 3.6, 0.6, "MLM: softmax over the V words,\ncross-entropy at the masked positions", GREY,
        size=8)
    arrow(ax, (2.6, 10.98), (2.6, 11.55))
    # the tie: the decoder's matrix is the embedding table
    arrow(ax, (0.95, 1.25), (0.8, 10.6), style="<|-|>", color="#b04a4a", ls="--", rad=-0.08)
    ax.text(0.28, 6.0, "the same matrix", rotation=90, va="center", fontsize=8, color="#b04a4a")

    # ---- the NSP head ([CLS] only)
    arrow(ax, (6.4, 8.3), (7.4, 9.05))
    box(ax, 7.4, 9.4, 3.6, 0.6, "pooler: hidden[:, 0] ([CLS]),\ndense (H, H), tanh", PURPLE)
    box(ax, 7.4, 10.6, 3.6, 0.6, "seq_relationship: dense (2, H)", PURPLE)
    arrow(ax, (7.4, 9.7), (7.4, 10.3))
    box(ax, 7.4, 11.85, 3.6, 0.6, "NSP: softmax over IsNext / NotNext,\ncross-entropy", GREY, size=8)
    arrow(ax, (7.4, 10.9), (7.4, 11.55))

    ax.text(5.0, 12.95, "loss = MLM loss + NSP loss", ha="center", fontsize=9.5, weight="bold")
    arrow(ax, (2.6, 12.15), (4.3, 12.8))
    arrow(ax, (7.4, 12.15), (5.7, 12.8))
    ax.set_title("BertForPreTraining, as minibert builds it", fontsize=11)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Draw BERT's architecture (notebooks/figures/bert_architecture.png).")
    parser.add_argument("--out", type=Path, default=OUT, help=f"the PNG to write (default {OUT})")
    print(f"wrote {draw(parser.parse_args(argv).out)}")


if __name__ == "__main__":
    main()
