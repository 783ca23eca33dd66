"""A lecturer's own task (``--task custom``): named columns of a TSV or CSV file with a header line.

The folder holds ``train`` and ``dev`` files, and optionally ``test``, all ``.tsv`` (tabs, no quoting) or
all ``.csv`` (commas, fields quoted as Python's csv reads them).  ``--text-a`` names the text's column,
``--text-b`` a second text's for a pair task, ``--label`` the label's, ``--id`` the test file's ids (its
line numbers without it).  A test file with the label's column is scored too (GLUE's test files have no
labels; a lecturer's own often do).  The labels are ``--labels`` in that order, or the training file's own,
sorted (as numbers where they all are); ``--regression``: a number per example instead.  Metrics:
accuracy, and F1 of the second label for two; Pearson and Spearman for a regression.
"""
from __future__ import annotations

import csv
from pathlib import Path

from .glue import Columns, Task, TaskDataError, column_values

MAX_LABELS = 100          # more distinct labels than this in the training file: likely a regression


def custom_task(folder: Path | None, text_a: str | None, text_b: str | None, label: str | None, labels: str | None,
                regression: bool, id_column: str | None) -> Task:
    if folder is None:
        raise TaskDataError("--task custom needs --data-dir, the folder of its train and dev files")
    if not text_a or not label:
        raise TaskDataError("--task custom needs --text-a COLUMN and --label COLUMN (and --text-b COLUMN for "
                            "a pair), the names in the files' header line")
    if regression and labels:
        raise TaskDataError("--labels names classes; --regression has none: give one of them")
    suffix = _suffix(folder)
    scored = label in _header(folder / f"test{suffix}")          # a test file with labels
    task = Task("custom", None, ("pearson", "spearman"), Columns(text_a, text_b, label),
                Columns(text_a, text_b, label if scored else None, id_column), submission=("custom",),
                score_range=None, suffix=suffix, exact_rows=True)
    if regression:
        return task
    names = [n.strip() for n in labels.split(",")] if labels else _found(task, folder / f"train{suffix}", label)
    if len(names) < 2 or len(set(names)) != len(names) or "" in names:
        raise TaskDataError(f"the labels of a classification are two or more distinct names, not {names}")
    metrics = ("accuracy", "f1") if len(names) == 2 else ("accuracy",)
    return Task("custom", tuple(names), metrics, task.train, task.test, submission=("custom",), suffix=suffix,
                exact_rows=True)


def _suffix(folder: Path) -> str:
    found = [s for s in (".tsv", ".csv") if (folder / f"train{s}").is_file()]
    if len(found) != 1:
        raise TaskDataError(f"{folder}: " + ("both train.tsv and train.csv: keep one" if found else
                                             "no train.tsv or train.csv (--task custom reads train, dev and, "
                                             "if there, test files of one kind)"))
    return found[0]


def _header(path: Path) -> list:
    """The column names of a file's first line ([] where there is no such file: it is optional)."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            first = f.readline().rstrip("\r\n")
    except (OSError, UnicodeDecodeError):
        return []                      # (reading the file itself says what is wrong with it)
    if path.suffix == ".csv":
        return next(csv.reader([first]), []) if first else []
    return first.split("\t")


def _found(task: Task, path: Path, label: str) -> list:
    values = sorted(set(column_values(task, path, label)))
    if len(values) > MAX_LABELS:
        raise TaskDataError(f"{path}: {len(values)} different labels in column {label!r}: a number to predict? "
                            "pass --regression (or name the classes with --labels)")
    try:
        return sorted(values, key=float)
    except ValueError:
        return values
