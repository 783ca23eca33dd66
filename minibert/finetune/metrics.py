"""GLUE's metrics, as the benchmark defines them (Wang et al. 2018, table 1).

    CoLA                  Matthews correlation
    SST-2, MNLI, QNLI, RTE, WNLI   accuracy
    MRPC, QQP             F1 of the positive class (1: a paraphrase, a duplicate) and accuracy
    STS-B                 Pearson and Spearman correlation

Each takes the predictions and the gold labels as 1-D arrays of the same length.  A metric that is
0/0 (no positive prediction and no positive label for F1, a constant column for a correlation) is 0,
as scikit-learn and GLUE's scorer report it.
"""
from __future__ import annotations

import numpy as np


def accuracy(pred, gold) -> float:
    pred, gold = _classes(pred, gold)
    return float(np.mean(pred == gold))


def f1(pred, gold, positive=1) -> float:
    """F1 of ``positive``: 2 TP / (2 TP + FP + FN), the harmonic mean of precision and recall."""
    pred, gold = _classes(pred, gold)
    tp = np.sum((pred == positive) & (gold == positive))
    fp_fn = np.sum((pred == positive) != (gold == positive))
    return float(2 * tp / (2 * tp + fp_fn)) if tp + fp_fn else 0.0


def matthews(pred, gold) -> float:
    """Matthews correlation for two classes or more: (c s - sum_k p_k t_k) /
    sqrt((s^2 - sum_k p_k^2) (s^2 - sum_k t_k^2)), with c the right predictions, s the examples, p_k and
    t_k how often class k is predicted and true (Gorodkin 2004); for two classes, the phi coefficient."""
    pred, gold = _classes(pred, gold)
    classes = np.union1d(pred, gold)
    p = np.array([np.sum(pred == k) for k in classes], dtype=np.float64)
    t = np.array([np.sum(gold == k) for k in classes], dtype=np.float64)
    c, s = float(np.sum(pred == gold)), float(len(gold))
    denominator = np.sqrt((s * s - p @ p) * (s * s - t @ t))
    return float((c * s - p @ t) / denominator) if denominator else 0.0


def pearson(pred, gold) -> float:
    pred, gold = _pair(pred, gold, float)
    dp, dg = pred - pred.mean(), gold - gold.mean()
    denominator = np.sqrt((dp @ dp) * (dg @ dg))
    return float(dp @ dg / denominator) if denominator else 0.0


def spearman(pred, gold) -> float:
    """Pearson's correlation of the ranks, tied values sharing the mean of their ranks."""
    pred, gold = _pair(pred, gold, float)
    return pearson(ranks(pred), ranks(gold))


def ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks of ``x``; equal values each get the mean of the ranks they span."""
    order = np.argsort(x, kind="stable")
    values, start, counts = np.unique(x[order], return_index=True, return_counts=True)
    mean_rank = start + (counts + 1) / 2.0                  # ranks start+1 .. start+count, averaged
    out = np.empty(len(x))
    out[order] = np.repeat(mean_rank, counts)
    return out


def _pair(pred, gold, dtype=None):
    try:
        pred, gold = np.asarray(pred, dtype=dtype), np.asarray(gold, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"a metric compares two 1-D arrays of numbers: {exc}") from None
    if pred.ndim != 1 or pred.shape != gold.shape or not len(gold):
        raise ValueError(f"a metric compares two 1-D arrays of the same length, at least one entry; got "
                         f"predictions of shape {pred.shape} and labels of shape {gold.shape}")
    for what, a in (("predictions", pred), ("labels", gold)):
        if a.dtype.kind == "f" and not np.isfinite(a).all():      # NaN would count as a value, or as a rank
            raise ValueError(f"the {what} hold NaN or infinite values")
    return pred, gold


def _classes(pred, gold):
    """Class numbers (the logits' argmax, the labels' ids): probabilities or label names would compare unequal
    to every class, and the metric be 0 without a word."""
    pred, gold = _pair(pred, gold)
    for what, a in (("predictions", pred), ("labels", gold)):
        if a.dtype.kind not in "iub" and not (a.dtype.kind == "f" and np.array_equal(a, np.round(a))):
            raise ValueError(f"the {what} must be class numbers (the argmax of the logits, the label ids), got "
                             f"{a.dtype} values such as {a[0].item()!r}" + (": probabilities?" if a.dtype.kind == "f" else ""))
    return pred, gold


METRICS = {"accuracy": accuracy, "f1": f1, "matthews": matthews, "pearson": pearson, "spearman": spearman}
