"""Shared look of the course notebooks' figures, and a few small helpers.

``apply()`` sets small, readable figures (the notebooks are committed with
their outputs, so PNGs are kept light).  ``heatmap`` draws a labelled matrix.
``show_error`` prints a gradient-check result in the form the notebooks use.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

BLUE, ORANGE, GREEN, RED, GREY, PURPLE = "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#7f7f7f", "#9467bd"


def apply() -> None:
    plt.rcParams.update({
        "figure.figsize": (6.0, 3.2),
        "figure.dpi": 80,
        "savefig.dpi": 80,
        "font.size": 9,
        "axes.titlesize": 10,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "legend.frameon": False,
        "image.cmap": "viridis",
        "figure.constrained_layout.use": True,
    })


def heatmap(ax, M, xlabels=None, ylabels=None, title=None, cmap="viridis", vmin=None, vmax=None,
            annotate=False, fmt="{:.2f}", colorbar=True, norm=None):
    """Draw matrix M on ax with optional tick labels and cell values.

    ``norm`` (e.g. matplotlib.colors.LogNorm) replaces vmin/vmax; masked
    entries of a masked array are drawn white.
    """
    cmap = plt.get_cmap(cmap).copy()
    cmap.set_bad("white")
    if norm is not None:
        im = ax.imshow(M, cmap=cmap, norm=norm, aspect="auto", interpolation="nearest")
    else:
        im = ax.imshow(M, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    M = np.asarray(M)
    ax.grid(False)
    if xlabels is not None:
        ax.set_xticks(range(len(xlabels)))
        ax.set_xticklabels(xlabels, rotation=90)
    if ylabels is not None:
        ax.set_yticks(range(len(ylabels)))
        ax.set_yticklabels(ylabels)
    if title:
        ax.set_title(title)
    if annotate:
        # white text on dark cells, black on light ones, whatever the colormap
        for i in range(M.shape[0]):
            for j in range(M.shape[1]):
                r, g, b, _ = im.cmap(im.norm(M[i, j]))
                dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
                ax.text(j, i, fmt.format(M[i, j]), ha="center", va="center", fontsize=7,
                        color="white" if dark else "black")
    if colorbar:
        plt.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return im


def show_error(name: str, err: float, tol: float = 1e-7) -> None:
    """One line per gradient check: the measure, its value, and the verdict.

    Values far below the threshold differ from machine to machine in their
    last digits; the notebooks' sanitiser treats any value below 1e-7 alike,
    so the committed output still compares strictly everywhere else.
    """
    verdict = "ok" if err < tol else "WRONG"
    print(f"{name:<28s} max_rel_error = {err:.1e}   {verdict}")
