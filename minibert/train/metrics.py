"""What a run measures: batch sums, held-out evaluation, baselines, and ``metrics.jsonl``."""
from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

import numpy as np

from .. import accel
from ..accel.cuda import bookkeeping
from ..accel.cuda.bookkeeping import SUMS
from ..backend import host_number, on_host, to_numpy
from ..constants import IGNORE_INDEX
from ..ops.common import get_array_module
from .dist import Single
from .errors import writes
from .run_folder import read_history, write_history


def unknown_share(batches, tokenizer) -> float:
    """The share of [UNK] among the real tokens of some batches (an unfit vocabulary shows here)."""
    ids = np.concatenate([b["input_ids"][b["attention_mask"] == 1] for b in batches])
    return float((ids == tokenizer.unk_id).mean()) if ids.size else 0.0


def token_counts(train_dataset, tokenizer) -> np.ndarray:
    """How often each token of the vocabulary occurs in the training instances ([CLS], [SEP] and
    [PAD], which are never predicted, counted 0): what guessing by frequency knows."""
    counts = np.zeros(tokenizer.vocab_size)
    ids = tokenizer.token_to_id
    for inst in train_dataset.instances:
        for t in inst.tokens:
            counts[ids.get(t, tokenizer.unk_id)] += 1
    counts[[tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id]] = 0
    return counts


def unigram_baseline(counts: np.ndarray, eval_batches) -> float:
    """The held-out MLM loss of the best context-free guess, in nats per masked token.

    Masked positions are a uniform sample of the ordinary tokens, so a model
    that ignores the context can do no better than predicting the training
    corpus's token frequencies (``counts``, from ``token_counts``).  This is the
    cross-entropy of the held-out masked targets under those frequencies
    (add-one smoothed, so an unseen token costs a finite amount).  A model whose
    held-out MLM loss is not clearly below it has learned nothing from the
    context.  (The plain entropy of the few thousand held-out targets would be
    no baseline: with a vocabulary of thousands, that estimate is biased far too low.)
    """
    p = (counts + 1) / (counts.sum() + counts.size)
    labels = np.concatenate([b["mlm_labels"].ravel() for b in eval_batches])
    return float(-np.log(p[labels[labels != IGNORE_INDEX]]).mean())


COUNTED = ("mlm_correct", "nsp_correct", "skipped")    # sums that count, integers on the host


def batch_stats(out, batch, fused=False) -> dict:
    """Sums over one batch: losses weighted by their counts, correct predictions, counts.

    A batch without NSP labels (--no-nsp) counts no pairs: its NSP sums are 0 of 0.  ``fused``: on
    a GPU with minibert's kernels, the sums of the logits in one launch (``bookkeeping.batch_sums``).
    """
    labels, nsp = out.mlm_targets, out.nsp_targets   # already on the model's device
    n_mlm, n_nsp = int(labels.size), 0 if nsp is None else int(nsp.size)
    tokens = int(batch["attention_mask"].sum())
    if fused and bookkeeping.takes(out):
        mlm_loss, nsp_loss, mlm_hits, nsp_hits = bookkeeping.batch_sums(out)
        return dict(mlm_loss=mlm_loss, nsp_loss=nsp_loss if n_nsp else 0.0, mlm_correct=mlm_hits,
                    nsp_correct=nsp_hits if n_nsp else 0, n_mlm=n_mlm, n_nsp=n_nsp, tokens=tokens)
    # on a GPU the sums stay there until a log step reads them (``on_host``): a step never waits
    return dict(
        mlm_loss=_sum(out.mlm_loss) * n_mlm, nsp_loss=_sum(out.nsp_loss) * n_nsp if n_nsp else 0.0,
        mlm_correct=_count(out.mlm_logits.argmax(-1) == labels),
        nsp_correct=_count(out.nsp_logits.argmax(-1) == nsp) if n_nsp else 0,
        n_mlm=n_mlm, n_nsp=n_nsp, tokens=tokens)


def _sum(x):
    """A loss as a float for sums: a Python float from the host, float64 where it is on a device."""
    return float(x) if on_host(x) else x.astype("float64")


def _count(hits):
    n = hits.sum()
    return int(n) if on_host(n) else n


def on_host_sums(sums: dict) -> dict:
    """Sums as Python numbers, read back from the device where they are there (a log step's one wait)."""
    return {k: host_number(v) for k, v in sums.items()}


def summarize(sums: dict) -> dict:
    """Mean losses and accuracies; no NSP numbers where no pair was seen (--no-nsp), rather than a fake 50%."""
    mlm = max(sums["n_mlm"], 1)
    result = dict(mlm_loss=sums["mlm_loss"] / mlm, mlm_acc=sums["mlm_correct"] / mlm)
    result["loss"] = result["mlm_loss"]
    if sums["n_nsp"]:
        nsp = sums["n_nsp"]
        result.update(nsp_loss=sums["nsp_loss"] / nsp, nsp_acc=sums["nsp_correct"] / nsp)
        result["loss"] += result["nsp_loss"]
    return {k: result[k] for k in ("mlm_loss", "nsp_loss", "loss", "mlm_acc", "nsp_acc") if k in result}


def add(total: dict, part: dict) -> dict:
    """``total + part`` key by key: a key of one only keeps its value (on a GPU, adding a new key's
    value to 0 would be a launch for nothing)."""
    return {**total, **{k: total[k] + v if k in total else v for k, v in part.items()}}


def evaluate(model, eval_batches, comm=None) -> dict:
    """Held-out MLM loss and accuracy, NSP loss and accuracy (dropout off; no NSP numbers for --no-nsp).

    ``nsp_majority`` is the accuracy of always answering the more common NSP
    label of these batches: the bar NSP accuracy must clear, besides 50%.
    ``comm``: the data-parallel ranks (``dist.py``), each of which evaluates
    its share of every batch; the sums are added over the ranks.
    """
    sums = {}
    for batch in eval_batches:
        mine = comm.share(batch) if comm is not None else batch
        if len(mine["input_ids"]):        # a batch smaller than the number of ranks leaves some idle
            out = model.forward(**mine, train=False)
            sums = add(sums, batch_stats(out, mine, fused=model.ops is accel.cuda))
    model.release()  # an evaluation is never back-propagated
    sums = on_host_sums(sums)
    if comm is not None:
        sums = comm.reduce_step(sums)
    result = summarize(sums)
    if "nsp_labels" in eval_batches[0]:     # MLM-only batches (--no-nsp) have no pairs to count
        not_next = float(np.mean(np.concatenate([b["nsp_labels"] for b in eval_batches])))
        result.update(nsp_majority=max(not_next, 1.0 - not_next), n_pairs=sums["n_nsp"])
    return dict(result, n_masked=sums["n_mlm"])


class LineFile:
    """Appends whole lines to a file: a line the disk cannot take in full is taken out again."""

    def __init__(self, path: Path):
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)

    def append(self, line: str) -> None:
        data = (line + "\n").encode()
        size = os.fstat(self._fd).st_size
        try:
            while data:
                data = data[os.write(self._fd, data):]
        except OSError as exc:
            with contextlib.suppress(OSError):   # should this fail too, a reader drops a torn last line
                os.ftruncate(self._fd, size)
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None

    def close(self) -> None:
        os.close(self._fd)


class MetricsLog:
    """``metrics.jsonl``, the run's history, and the sums behind the next train record.

    A train record averages the steps since the one before it.  Those sums
    (the *window*) go into every checkpoint with the time they took, so a
    run stopped between two log steps and resumed writes the same records
    as a run that never stopped.
    """

    def __init__(self, path: Path | None, history: list, on_record=None, comm=Single()):
        """``path`` None: no file (a data-parallel rank other than 0 keeps the sums and writes nothing).
        ``comm``: the run's ranks (``dist.py``); rank 0 holds the file."""
        self.history, self.on_record, self.comm = history, on_record, comm
        self.window, self._t0 = {}, time.perf_counter()
        self.device_sums = None      # on a GPU: the sums ``bookkeeping.step_book`` adds to there (SUMS)
        self._file = LineFile(path) if path is not None else None

    def record(self, entry: dict) -> None:
        line = json.dumps(entry)
        # every rank records at the same steps and hears whether rank 0 could write: a failure stops them all
        self.comm.on_root(lambda: self._file.append(line) if self._file is not None else None)
        self.history.append(entry)
        if self.on_record is not None:
            self.on_record(entry)

    def add_step(self, sums: dict, grad_norm, finite) -> None:
        """Add a step's sums, its gradient norm and whether that was finite (numbers, or on a GPU
        0-d arrays there, added there)."""
        # a skipped step's norm is inf: it stays out of the mean
        if on_host(grad_norm):
            norm, skipped = (float(grad_norm), 0) if finite else (0.0, 1)
        else:
            xp = get_array_module(grad_norm)
            norm, skipped = xp.where(finite, grad_norm.astype(xp.float64), 0.0), (~finite).astype(xp.int64)
        self.window = add(self.window, dict(sums, grad_norm=norm, skipped=skipped, steps=1))

    def device_window(self, xp):
        """``device_sums``, made on the first step of a window (zeros, in the order of ``SUMS``)."""
        if self.device_sums is None:
            self.device_sums = xp.zeros(len(SUMS))
        return self.device_sums

    def add_counts(self, sums: dict) -> None:
        """Add a step whose other sums ``step_book`` added on the device: the counts the host knows."""
        counts = dict(n_mlm=sums["n_mlm"], n_nsp=sums["n_nsp"], tokens=sums["tokens"], steps=1)
        self.window = add(self.window, counts)    # (a resumed window also holds the other sums)

    def _window_on_host(self) -> dict:
        """The window's sums as Python numbers, those on the device read (a log step's one wait)."""
        w = on_host_sums(self.window)
        if self.device_sums is not None:
            there = dict(zip(SUMS, to_numpy(self.device_sums).tolist()))
            w = add(w, {k: int(v) if k in COUNTED else v for k, v in there.items()})
        return w

    def train_record(self, step: int, lr: float, stream, scaler=None) -> dict:
        """Write the record of the steps since the last one, and start the window again."""
        w, elapsed = self._window_on_host(), max(time.perf_counter() - self._t0, 1e-9)
        taken = w["steps"] - w["skipped"]
        entry = dict(kind="train", step=step, **summarize(w), lr=lr, grad_norm=w["grad_norm"] / max(taken, 1),
                     tokens_per_s=w["tokens"] / elapsed, data_wait=stream.wait_s / elapsed)
        if scaler is not None:
            entry.update(loss_scale=host_number(scaler.scale), skipped_steps=w["skipped"])
        self.record(entry)
        self.window, self.device_sums, self._t0, stream.wait_s = {}, None, time.perf_counter(), 0.0
        return entry

    def window_state(self, stream) -> dict:
        """The window, for a checkpoint: the sums since the last train record, and the time they took."""
        return dict(sums=self._window_on_host(), seconds=time.perf_counter() - self._t0,
                    data_wait_s=stream.wait_s)

    def start(self, stream, window=None) -> None:
        """Start the clock at the first step, from a checkpoint's ``window_state()`` if there is one."""
        window = window or dict(sums={}, seconds=0.0, data_wait_s=0.0)
        self.window, self.device_sums = dict(window["sums"]), None
        self._t0 = time.perf_counter() - window["seconds"]
        stream.wait_s = window["data_wait_s"]

    def close(self) -> None:
        if self._file is not None:
            self._file.close()



def open_metrics(path: Path, step: int, checkpoint, log, on_record, comm=Single()) -> MetricsLog:
    """metrics.jsonl rewound to ``step`` (a new run starts a new file), open for the records to come.

    With several ranks, rank 0 opens the file and the others keep the sums alone."""
    def on_root():
        history = read_history(path, upto=step, log=log) if step else []
        with writes(step, checkpoint, what=path):
            write_history(path, history)
            return MetricsLog(path, history, on_record, comm)
    return comm.on_root(on_root) or MetricsLog(None, [], comm=comm)

