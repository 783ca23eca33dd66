"""The GLUE tasks' files as the benchmark distributes them, read into examples.

Each task is a folder of tab-separated files (``train.tsv``, ``dev.tsv``, ``test.tsv``; MNLI has a
matched and a mismatched dev and test).  Every file has a header line naming its columns but CoLA's
training and dev files, which have none (source, label, the original mark, sentence).  A file is
split on tabs alone, with no quoting, as google-research/bert's ``run_classifier.py`` reads it (a
lecturer's own task, ``custom.py``, may be a CSV file, read with its quoting).

A line that cannot be an example (too few columns, a label not in the task's set, a score that is
not a number from 0 to 5), a file that is missing or holds no example: ``TaskDataError``, one line
naming the file, the line and the column.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np


class TaskDataError(ValueError):
    """A task's file cannot be read as the task's format; the message names file, line and column."""


@dataclass(frozen=True)
class Columns:
    """Where a split's fields are: by header name, or by position in a file without a header."""
    text_a: str | int
    text_b: str | int | None = None
    label: str | int | None = None          # None: a test split, without labels
    index: str | int | None = None          # the id GLUE's submission format wants, in a test split
    header: bool = True


@dataclass(frozen=True)
class Task:
    name: str
    labels: tuple | None                    # the label set, in the order of the model's outputs; None: regression
    metrics: tuple
    train: Columns
    test: Columns
    dev_files: tuple = ("dev",)
    test_files: tuple = ("test",)
    submission: tuple = ()                  # GLUE's file name for each test file's predictions
    score_range: tuple | None = (0.0, 5.0)  # a regression's scores (STS-B's: 0 to 5); None: any number
    suffix: str = ".tsv"
    folder: str = ""                        # the task's folder in GLUE's download (SST-2/, ...)
    exact_rows: bool = False                # a row may not have more fields than the header (a custom task's)

    @property
    def ranked_by(self) -> tuple:
        """(development file, metric): the number a setting of the search is ranked by (MNLI: matched;
        MRPC and QQP: F1)."""
        return self.dev_files[0], self.metrics[0]


PAIR = dict(text_a="sentence1", text_b="sentence2")
TASKS = {t.name: t for t in (
    Task("cola", ("0", "1"), ("matthews",), Columns(text_a=3, label=1, header=False),
         Columns(text_a="sentence", index="index"), submission=("CoLA",), folder="CoLA"),
    Task("sst2", ("0", "1"), ("accuracy",), Columns(text_a="sentence", label="label"),
         Columns(text_a="sentence", index="index"), submission=("SST-2",), folder="SST-2"),
    Task("mrpc", ("0", "1"), ("f1", "accuracy"), Columns("#1 String", "#2 String", "Quality"),
         Columns("#1 String", "#2 String", index="index"), submission=("MRPC",), folder="MRPC"),
    Task("stsb", None, ("pearson", "spearman"), Columns(**PAIR, label="score"),
         Columns(**PAIR, index="index"), submission=("STS-B",), folder="STS-B"),
    Task("qqp", ("0", "1"), ("f1", "accuracy"), Columns("question1", "question2", "is_duplicate"),
         Columns("question1", "question2", index="id"), submission=("QQP",), folder="QQP"),
    Task("mnli", ("contradiction", "entailment", "neutral"), ("accuracy",), Columns(**PAIR, label="gold_label"),
         Columns(**PAIR, index="index"), dev_files=("dev_matched", "dev_mismatched"),
         test_files=("test_matched", "test_mismatched"), submission=("MNLI-m", "MNLI-mm"), folder="MNLI"),
    Task("qnli", ("entailment", "not_entailment"), ("accuracy",), Columns("question", "sentence", "label"),
         Columns("question", "sentence", index="index"), submission=("QNLI",), folder="QNLI"),
    Task("rte", ("entailment", "not_entailment"), ("accuracy",), Columns(**PAIR, label="label"),
         Columns(**PAIR, index="index"), submission=("RTE",), folder="RTE"),
    Task("wnli", ("0", "1"), ("accuracy",), Columns(**PAIR, label="label"),
         Columns(**PAIR, index="index"), submission=("WNLI",), folder="WNLI"),
)}
ALIASES = {"sst-2": "sst2", "sts-b": "stsb"}


@dataclass
class Examples:
    """One split: the texts, the labels (class numbers, or scores for a regression; None in a test
    split) and, in a test split, the ids its predictions are written under."""
    text_a: list
    text_b: list | None
    labels: np.ndarray | None
    ids: list | None
    source: str


# the longest text an example may have: a BERT reads 512 tokens at most, some 3,000 characters of English;
# a text far longer is nearly always the rest of a file run into one field
MAX_TEXT = 100_000


def task(name: str) -> Task:
    key = ALIASES.get(name.lower(), name.lower())
    if key not in TASKS:
        raise TaskDataError(f"no GLUE task {name!r}; the tasks: {', '.join(TASKS)}")
    return TASKS[key]


def read_split(t: Task, path: Path, test: bool = False) -> Examples:
    """The examples of one of task ``t``'s files."""
    columns = t.test if test else t.train
    rows = _rows(t, path)
    first = 1 if columns.header else 0
    header = rows[0][1] if columns.header and rows else []
    where = {k: _position(getattr(columns, k), header, path) for k in ("text_a", "text_b", "label", "index")}
    needed = 1 + max(p for p in where.values() if p is not None)
    out = Examples([], [] if where["text_b"] is not None else None, None, [] if where["index"] is not None else None,
                   str(path))
    labels = []
    for number, fields in rows[first:]:
        if len(fields) < needed:
            raise TaskDataError(f"{path}, line {number}: {len(fields)} column{'s' * (len(fields) != 1)}, where "
                                f"{t.name}'s format has at least {needed}"
                                + (" (tab-separated)" if t.suffix == ".tsv" else ""))
        if t.exact_rows and header and len(fields) > len(header):
            raise TaskDataError(f"{path}, line {number}: {len(fields)} fields, where the header has {len(header)}: "
                                + ("a tab inside a text? (a TSV file's fields are separated by tabs, so a text "
                                   "cannot hold one)" if t.suffix == ".tsv" else "a comma in a text outside quotes?"))
        for k in ("text_a", "text_b") if out.text_b is not None else ("text_a",):
            text = fields[where[k]]
            if len(text) > MAX_TEXT:
                raise TaskDataError(f"{path}, line {number}, column {_name(getattr(columns, k))}: a text of "
                                    f"{len(text):,} characters, more than a model reads by far (minibert takes "
                                    f"{MAX_TEXT:,} at most): lines run together, or a quote never closed?")
            getattr(out, k).append(text)
        if out.ids is not None:
            out.ids.append(fields[where["index"]])
        if where["label"] is not None:
            labels.append(_label(t, fields[where["label"]], f"{path}, line {number}, column "
                                 f"{_name(columns.label)}"))
    if not out.text_a:
        raise TaskDataError(f"{path}: no examples" + (" below its header line" if columns.header else ""))
    if where["label"] is not None:
        out.labels = np.array(labels, dtype=np.float64 if t.labels is None else np.int64)
    return out


def _rows(t: Task, path: Path) -> list:
    """(line number, fields) of each line of a TSV file (tabs alone, no quoting) or a CSV file (quoted
    fields as Python's csv reads them: the number is the line a row ends on)."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
    except FileNotFoundError:
        raise TaskDataError(f"{path}: not found ({t.name} reads {', '.join(files(t))} from its folder)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskDataError(f"{path}: cannot be read as UTF-8 text ({exc})") from None
    if path.suffix.lower() == ".csv":
        reader = csv.reader(io.StringIO(text, newline=""), strict=True)
        try:
            return [(reader.line_num, row) for row in reader if row]
        except csv.Error as exc:
            raise TaskDataError(f"{path}, line {reader.line_num}: not CSV ({exc})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [(i, (line[:-1] if line.endswith("\r") else line).split("\t")) for i, line in enumerate(lines, start=1)]


def column_values(t: Task, path: Path, column: str) -> list:
    """Every value of the training file's column ``column`` (by header name), as text."""
    rows = _rows(t, path)
    where = _position(column, rows[0][1] if rows else [], path)
    return [fields[where] for _, fields in rows[1:] if len(fields) > where]


def files(t: Task) -> list[str]:
    return [f"{n}{t.suffix}" for n in ("train", *t.dev_files, *t.test_files)]


def _position(column, header: list, path: Path) -> int | None:
    if column is None or isinstance(column, int):
        return column
    if column not in header:
        raise TaskDataError(f"{path}, line 1: no column {column!r} in the header ({', '.join(map(repr, header))})")
    return header.index(column)


def _name(column) -> str:
    return repr(column) if isinstance(column, str) else f"{column + 1}"


def _label(t: Task, text: str, where: str):
    if t.labels is None:
        try:
            score = float(text)
        except ValueError:
            score = math.nan
        low, high = t.score_range or (-math.inf, math.inf)
        if not (math.isfinite(score) and low <= score <= high):
            raise TaskDataError(f"{where}: {text!r} is not " + (f"a similarity score from {low:g} to {high:g}"
                                                               if t.score_range else "a finite number"))
        return score
    if text not in t.labels:
        raise TaskDataError(f"{where}: {text!r} is not one of {t.name}'s labels ({', '.join(t.labels)})")
    return t.labels.index(text)
