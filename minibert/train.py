"""Pre-training BERT with masked language modelling and next sentence prediction.

``pretrain(TrainArgs(...))`` is the whole job, used by ``minibert pretrain``,
``make demo`` and the pre-training notebook alike:

1. set-up: check every argument, load the corpus, load or train the
   WordPiece vocabulary, split off held-out documents, cut NSP instances;
2. the model and AdamW (or both restored from the last checkpoint);
3. the loop: for each step, a freshly masked batch (or several, with
   gradient accumulation), forward, backward, clip, AdamW with the
   warmup-then-decay learning rate; log, evaluate on held-out data, save;
4. the end: a last checkpoint, the model in Hugging Face's format with its
   ``vocab.txt``, ``metrics.jsonl`` and a loss-curve picture.

Reproducible: one seed fixes the initial weights, the instances, the batch
order, every mask and every dropout mask (re-seeded from (seed, step) at each
step), so a run resumed from a checkpoint continues exactly as if it had
never stopped.
"""
from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shutil
import signal
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from . import accel
from .backend import get_xp, to_numpy
from .checkpoint import (CheckpointError, checkpoint_step, latest_checkpoint, load_checkpoint,
                         save_checkpoint)
from .config import PRESETS, BertConfig
from .corpus import Corpus
from .model import BertForPreTraining
from .optim import AdamW, LossScaler, clip_grad_norm, linear_warmup_decay
from .textio import write_whole

VOCAB_NAME = "vocab.txt"
METRICS_NAME = "metrics.jsonl"
PLOT_NAME = "loss.png"
RUN_NAME = "run.json"          # written first by every run: marks the folder as a minibert run
OUTPUT_NAMES = (VOCAB_NAME, METRICS_NAME, PLOT_NAME, "model")   # what a run writes (and replaces)


class TrainingError(RuntimeError):
    """The run cannot go on (e.g. the loss became NaN); the message says why and what is saved."""


@dataclass
class TrainArgs:
    """Every setting of a pre-training run (the command line's flags, one to one)."""
    corpus: str = "builtin"            # "builtin", "wikitext-2", or a path (one sentence per line)
    corpus_format: str = "bert"        # for a path: "bert" or "plain"
    data_dir: str | None = None        # a local WikiText-2 folder
    vocab: str | None = None           # a vocab.txt; None: train one on the corpus
    vocab_size: int = 4000             # size of the trained vocabulary
    config: str = "tiny"               # a preset name or a config.json
    steps: int = 1000
    batch_size: int = 32
    seq_len: int = 128
    lr: float = 1e-3
    warmup: int | None = None          # None: 10% of the steps
    accum: int = 1                     # micro-batches per optimiser step
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0         # 0: no clipping
    bias_correction: bool = True       # False: google-research/bert's AdamW
    dropout: float | None = None       # None: the config's (0.1 for the presets)
    device: str = "cpu"
    dtype: str = "float32"
    mixed_precision: bool = False      # float16 products, float32 master weights, dynamic loss scaling
    seed: int = 0
    out: str = "runs/minibert"
    resume: bool = False
    eval_every: int = 100
    save_every: int = 100
    keep: int = 3                      # checkpoints kept
    log_every: int = 10
    stop_at: int | None = None         # save and stop at this step (the schedule still runs to `steps`)
    heldout_fraction: float = 0.05
    eval_instances: int = 256
    dupe_factor: int = 2
    max_predictions: int | None = None # None: ceil(0.15 * seq_len)
    cache_dir: str | None = None
    progress: bool = True
    plot: bool = True

    @property
    def warmup_steps(self) -> int:
        return int(0.1 * self.steps) if self.warmup is None else self.warmup


@dataclass
class RunResult:
    out: Path
    step: int
    history: list = field(default_factory=list)   # every record written to metrics.jsonl
    final_eval: dict | None = None
    model: object = None
    tokenizer: object = None
    stopped_by: str | None = None                  # "SIGINT", "SIGTERM", "stop_at" or None


# ------------------------------------------------------------------------ checks
def check_args(a: TrainArgs) -> BertConfig:
    """Every argument checked before any work; returns the model config (vocab size to be set)."""
    positive = dict(steps=a.steps, batch_size=a.batch_size, accum=a.accum, eval_every=a.eval_every,
                    save_every=a.save_every, keep=a.keep, log_every=a.log_every, vocab_size=a.vocab_size,
                    eval_instances=a.eval_instances, dupe_factor=a.dupe_factor)
    for name, value in positive.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be a positive integer, got {value!r}")
    if isinstance(a.seed, bool) or not isinstance(a.seed, int) or a.seed < 0:
        raise ValueError(f"--seed must be an integer >= 0, got {a.seed!r}")
    if a.eval_instances < 2:
        raise ValueError(f"--eval-instances must be at least 2 (one IsNext and one NotNext pair), "
                         f"got {a.eval_instances}")
    if not str(a.out).strip():
        raise ValueError("--out must name a folder for the run, got an empty string")
    if not a.lr > 0 or not math.isfinite(a.lr):
        raise ValueError(f"--lr must be a positive number, got {a.lr!r}")
    if not 0 <= a.warmup_steps <= a.steps:
        raise ValueError(f"--warmup must be between 0 and --steps ({a.steps}), got {a.warmup_steps}")
    if a.stop_at is not None and not 0 < a.stop_at <= a.steps:
        raise ValueError(f"--stop-at must be between 1 and --steps ({a.steps}), got {a.stop_at}")
    if not 0 < a.heldout_fraction < 1:
        raise ValueError(f"--heldout-fraction must be in (0, 1), got {a.heldout_fraction}")
    if not (0 <= a.max_grad_norm < math.inf):
        raise ValueError(f"--max-grad-norm must be >= 0 (0: no clipping), got {a.max_grad_norm!r}")
    if not (0 <= a.weight_decay < math.inf):
        raise ValueError(f"--weight-decay must be >= 0, got {a.weight_decay!r}")
    if a.dropout is not None and not 0 <= a.dropout < 1:
        raise ValueError(f"--dropout must be in [0, 1), got {a.dropout}")
    config = load_model_config(a.config)
    if a.dropout is not None:
        config.hidden_dropout_prob = config.attention_probs_dropout_prob = a.dropout
    if config.type_vocab_size < 2:
        raise ValueError(f"the model config has type_vocab_size={config.type_vocab_size}; pre-training "
                         f"needs 2 (segment A and segment B of each NSP pair)")
    # [CLS] A [SEP] B [SEP] needs 3 special tokens and at least one token on each side
    if not 5 <= a.seq_len <= config.max_position_embeddings:
        raise ValueError(f"--seq-len must be between 5 ([CLS] A [SEP] B [SEP]) and the config's "
                         f"max_position_embeddings={config.max_position_embeddings}, got {a.seq_len}")
    get_xp(a.device)  # a clear error now if CuPy or the GPU is missing
    from .backend import resolve_dtype
    resolve_dtype(a.dtype)
    if a.mixed_precision and resolve_dtype(a.dtype) != np.float32:
        raise ValueError(f"--mixed-precision keeps float32 master weights: it needs --dtype float32, "
                         f"got {a.dtype}")
    if a.data_dir is not None and str(a.corpus) not in ("wikitext-2", "wikitext2"):
        raise ValueError(f"--data-dir is where WikiText-2 is read from; it does nothing for "
                         f"--corpus {a.corpus} (give the file itself as --corpus)")
    if a.vocab is not None and not Path(a.vocab).is_file():
        raise FileNotFoundError(f"--vocab {a.vocab}: no such file")
    if a.vocab is None:
        from .wordpiece_trainer import check_vocab_size_option
        check_vocab_size_option(a.vocab_size)
    check_writable(Path(a.out))
    return config


def load_model_config(spec: str) -> BertConfig:
    """A preset name (tiny, mini, ...) or the path of a config.json."""
    if spec in PRESETS:
        return BertConfig.from_preset(spec)
    if spec.endswith(".json") or Path(spec).is_file():
        return BertConfig.from_json_file(spec)
    raise ValueError(f"--config {spec!r} is neither a preset ({', '.join(PRESETS)}) nor a config.json file")


def check_writable(out: Path) -> None:
    """``out`` is a folder (made if missing) that this process can write into."""
    try:
        blocker = _file_in_the_way(out)
        if blocker is None:
            out.mkdir(parents=True, exist_ok=True)
            # a probe of its own name: runs started at once on one folder never remove each other's
            with tempfile.TemporaryFile(dir=out, prefix=".write-test-"):
                pass
    except OSError as exc:
        raise PermissionError(f"--out {out} is not writable ({exc.strerror or exc})") from exc
    if blocker is not None:
        where = "" if blocker == out else f": {blocker}"
        raise NotADirectoryError(f"--out {out}{where} is a file, not a folder; choose another --out")


def _file_in_the_way(out: Path):
    """The file at ``out`` or at a folder above it, where a folder should be; None if there is none."""
    for path in (out, *out.parents):
        if path.exists():
            return None if path.is_dir() else path
    return None


# -------------------------------------------------------------------------- data
def split_documents(corpus: Corpus, fraction: float, seed: int) -> tuple[Corpus, Corpus]:
    """Hold out whole documents (at least 2, so NotNext pairs exist there too)."""
    n = corpus.num_documents
    n_held = max(2, round(n * fraction))
    if n - n_held < 2:
        raise ValueError(f"corpus {corpus.name!r} has {n} document{'s' if n != 1 else ''}: too few to hold "
                         f"out {n_held} for evaluation and keep 2 for training")
    order = np.random.default_rng((seed, 1)).permutation(n)
    held = set(order[:n_held].tolist())
    docs = corpus.documents
    return (Corpus(corpus.name + " (train)", [d for i, d in enumerate(docs) if i not in held]),
            Corpus(corpus.name + " (held-out)", [d for i, d in enumerate(docs) if i in held]))


class BatchStream:
    """An endless stream of freshly masked batches, resumable from (epoch, index).

    Epoch e visits the instances in the order ``default_rng((seed, e))``
    draws; batch i of epoch e is masked with ``default_rng((seed, e, i))``.
    A batch therefore depends only on (seed, epoch, index): resuming needs
    those two numbers, and skipping ahead costs nothing.
    """

    def __init__(self, dataset, batch_size: int, seed: int):
        if len(dataset) < batch_size:
            raise ValueError(f"the corpus gives {len(dataset)} training instances, fewer than "
                             f"--batch-size {batch_size}; use a smaller batch or a larger corpus")
        self.dataset, self.batch_size, self.seed = dataset, batch_size, seed
        self.per_epoch = len(dataset) // batch_size   # the remainder waits for the next epoch's shuffle
        self.epoch, self.index = 0, 0
        self._order_epoch, self._order = None, None

    def next_batch(self) -> dict:
        if self.index == self.per_epoch:
            self.epoch, self.index = self.epoch + 1, 0
        if self._order_epoch != self.epoch:
            self._order = np.random.default_rng((self.seed, self.epoch)).permutation(len(self.dataset))
            self._order_epoch = self.epoch
        take = self._order[self.index * self.batch_size:(self.index + 1) * self.batch_size]
        rng = np.random.default_rng((self.seed, self.epoch, self.index))
        self.index += 1
        return self.dataset.collate([self.dataset.instances[j] for j in take], rng)

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.index = int(state["epoch"]), int(state["index"])


class Prefetch:
    """Makes the next batch in a background thread while the current step runs.

    Masking and padding a batch is Python work (a few milliseconds for 128
    sequences): next to a CPU step it is negligible, next to a GPU step of
    20-60 ms it is not.  The main thread spends part of every step waiting
    (for BLAS on the CPU, for the GPU to finish at ``float(loss)``), and the
    GIL is free then, so the next batch is ready when it is needed.

    Batches come out in the stream's order, so results do not change.  The
    stream itself runs one batch ahead; ``state_dict`` reports the position
    after the last batch *handed out*, which is what a checkpoint must hold.
    ``wait_s`` accumulates the time the caller spent waiting for batches: the
    data pipeline's cost on the critical path.
    """

    def __init__(self, stream: BatchStream):
        from concurrent.futures import ThreadPoolExecutor
        self.stream, self.wait_s = stream, 0.0
        self._state = stream.state_dict()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="minibert-data")
        self._next = self._pool.submit(self._make)

    def _make(self):
        batch = self.stream.next_batch()
        return batch, self.stream.state_dict()

    def next_batch(self) -> dict:
        t0 = time.perf_counter()
        batch, self._state = self._next.result()
        self.wait_s += time.perf_counter() - t0
        self._next = self._pool.submit(self._make)
        return batch

    def state_dict(self) -> dict:
        return dict(self._state)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def load_run_corpus(a: TrainArgs) -> Corpus:
    """The run's corpus; WikiText-2 is downloaded (and checked) into the cache unless --data-dir names a copy."""
    from .corpus import load_corpus
    return load_corpus(a.corpus, a.corpus_format, data_dir=a.data_dir, download=a.data_dir is None)


def prepare_data(a: TrainArgs, out: Path, log=print):
    """Corpus, tokenizer, training stream and fixed held-out batches.

    The data's warnings (e.g. lines far too long to be sentences) go to ``log``, one line each.
    """
    import warnings

    from .pretraining_data import build_pretraining_dataset, check_instances_fit
    from .tokenizer import WordPieceTokenizer, train_wordpiece

    saved_vocab = out / VOCAB_NAME
    trains_vocab = a.vocab is None and not (a.resume and saved_vocab.is_file())
    corpus = load_run_corpus(a)
    # a first look at memory before the vocabulary and the tokens: a corpus has at least as
    # many tokens as whitespace-separated words (the exact count is checked again later)
    check_instances_fit(corpus.num_words, a.dupe_factor, unit="words")
    train_docs, held_docs = split_documents(corpus, a.heldout_fraction, a.seed)

    if a.vocab is not None:
        tokenizer = WordPieceTokenizer.from_vocab_file(a.vocab)
    elif not trains_vocab:
        tokenizer = WordPieceTokenizer.from_vocab_file(saved_vocab)   # the run's own vocabulary
    else:
        # the vocabulary is learned from the training documents only
        with warnings.catch_warnings():   # the run measures and reports the [UNK] share itself
            warnings.simplefilter("ignore", UserWarning)
            tokenizer = train_wordpiece([" ".join(d) for d in train_docs.documents], a.vocab_size)
    tokenizer.save_vocabulary(out)

    cache = a.cache_dir if a.cache_dir is not None else None
    common = dict(max_seq_length=a.seq_len, max_predictions_per_seq=a.max_predictions, cache_dir=cache)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        train = build_pretraining_dataset(train_docs, tokenizer, dupe_factor=a.dupe_factor, seed=a.seed,
                                          **common)
        held = build_pretraining_dataset(held_docs, tokenizer, dupe_factor=1, seed=a.seed + 1, **common)
    for message in dict.fromkeys(str(w.message) for w in caught):   # each once, in order
        log(f"warning: {message}")
    # held-out batches are masked once, with a fixed generator, so evaluations compare;
    # as many IsNext as NotNext instances, so that NSP's chance level is exactly 50%
    rng = np.random.default_rng((a.seed, 2))
    order = rng.permutation(len(held))
    by_label = [[j for j in order if held.instances[j].is_random_next == r] for r in (False, True)]
    half = min(a.eval_instances // 2, *map(len, by_label))
    if not by_label[0]:
        raise ValueError(f"the held-out documents of {corpus.name!r} give no IsNext pair to evaluate "
                         f"on: {_why_no_is_next(train, a.seq_len)}")
    if not by_label[1]:
        raise ValueError(f"the held-out documents of {corpus.name!r} give no NotNext pair to evaluate "
                         f"on (a NotNext pair needs a second held-out document); raise --heldout-fraction")
    if 2 * half < a.eval_instances // 4:      # far fewer than asked for
        log(f"warning: the held-out documents give only {half} IsNext/NotNext pairs of each kind "
            f"(--eval-instances {a.eval_instances} asked for {a.eval_instances // 2}): held-out numbers "
            f"will be noisy; raise --heldout-fraction or --seq-len")
    chosen = rng.permutation(by_label[0][:half] + by_label[1][:half])
    eval_batches = [held.collate([held.instances[j] for j in chosen[i:i + a.batch_size]], rng)
                    for i in range(0, len(chosen), a.batch_size)]
    return corpus, tokenizer, BatchStream(train, a.batch_size, a.seed), eval_batches


def _why_no_is_next(train, seq_len: int) -> str:
    """The likely reason why no instance is IsNext: said plainly rather than "too small"."""
    share = 1.0 - train.not_next_share()
    if share < 0.02:
        return (f"only {share:.1%} of the training instances are IsNext either. IsNext needs two "
                f"sentences of one document in one sequence of --seq-len {seq_len} tokens: either "
                f"the sentences are longer than that (raise --seq-len), or each document is a single "
                f"line (in the bert format every line is one sentence, and a blank line ends a document)")
    return (f"{share:.1%} of the training instances are IsNext, but none of the held-out ones; "
            f"raise --heldout-fraction")


def unknown_share(batches, tokenizer) -> float:
    """The share of [UNK] among the real tokens of some batches (an unfit vocabulary shows here)."""
    ids = np.concatenate([b["input_ids"][b["attention_mask"] == 1] for b in batches])
    return float((ids == tokenizer.unk_id).mean()) if ids.size else 0.0


def unigram_baseline(train_dataset, tokenizer, eval_batches) -> float:
    """The held-out MLM loss of the best context-free guess, in nats per masked token.

    Masked positions are a uniform sample of the ordinary tokens, so a model
    that ignores the context can do no better than predicting the training
    corpus's token frequencies.  This is the cross-entropy of the held-out
    masked targets under those frequencies (add-one smoothed, so an unseen
    token costs a finite amount).  A model whose held-out MLM loss is not
    clearly below it has learned nothing from the context.  (The plain
    entropy of the few thousand held-out targets would be no baseline: with
    a vocabulary of thousands, that estimate is biased far too low.)
    """
    counts = np.zeros(tokenizer.vocab_size)
    ids = tokenizer.token_to_id
    for inst in train_dataset.instances:
        for t in inst.tokens:
            counts[ids.get(t, tokenizer.unk_id)] += 1
    counts[[tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id]] = 0  # never predicted
    p = (counts + 1) / (counts.sum() + counts.size)
    labels = np.concatenate([b["mlm_labels"].ravel() for b in eval_batches])
    return float(-np.log(p[labels[labels != -100]]).mean())


# ----------------------------------------------------------------------- metrics
def batch_stats(out, batch) -> dict:
    """Sums over one batch: losses weighted by their counts, correct predictions, counts."""
    labels, nsp = out.mlm_targets, out.nsp_targets   # already on the model's device
    n_mlm, n_nsp = int(labels.size), int(nsp.size)
    return dict(
        mlm_loss=float(out.mlm_loss) * n_mlm, nsp_loss=float(out.nsp_loss) * n_nsp,
        mlm_correct=int((out.mlm_logits.argmax(-1) == labels).sum()),
        nsp_correct=int((out.nsp_logits.argmax(-1) == nsp).sum()),
        n_mlm=n_mlm, n_nsp=n_nsp, tokens=int(batch["attention_mask"].sum()))


def summarize(sums: dict) -> dict:
    mlm, nsp = max(sums["n_mlm"], 1), max(sums["n_nsp"], 1)
    return dict(mlm_loss=sums["mlm_loss"] / mlm, nsp_loss=sums["nsp_loss"] / nsp,
                loss=sums["mlm_loss"] / mlm + sums["nsp_loss"] / nsp,
                mlm_acc=sums["mlm_correct"] / mlm, nsp_acc=sums["nsp_correct"] / nsp)


def add(total: dict, part: dict) -> dict:
    return {k: total.get(k, 0) + v for k, v in part.items()}


def evaluate(model, eval_batches) -> dict:
    """Held-out MLM loss and accuracy, NSP loss and accuracy (dropout off).

    ``nsp_majority`` is the accuracy of always answering the more common NSP
    label of these batches: the bar NSP accuracy must clear, besides 50%.
    """
    sums = {}
    for batch in eval_batches:
        out = model.forward(**batch, train=False)
        sums = add(sums, batch_stats(out, batch))
    model.release()  # an evaluation is never back-propagated
    not_next = float(np.mean(np.concatenate([b["nsp_labels"] for b in eval_batches])))
    return dict(summarize(sums), nsp_majority=max(not_next, 1.0 - not_next),
                n_pairs=sums["n_nsp"], n_masked=sums["n_mlm"])


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

    def __init__(self, path: Path, history: list, on_record=None):
        self.history, self.on_record = history, on_record
        self.window, self._t0 = {}, time.perf_counter()
        self._file = LineFile(path)

    def record(self, entry: dict) -> None:
        self._file.append(json.dumps(entry))
        self.history.append(entry)
        if self.on_record is not None:
            self.on_record(entry)

    def add_step(self, sums: dict, grad_norm: float, overflow: bool) -> None:
        # a skipped step's norm is inf: it stays out of the mean
        self.window = add(self.window, dict(sums, grad_norm=0.0 if overflow else grad_norm,
                                            skipped=int(overflow), steps=1))

    def train_record(self, step: int, lr: float, stream, scaler=None) -> dict:
        """Write the record of the steps since the last one, and start the window again."""
        w, elapsed = self.window, max(time.perf_counter() - self._t0, 1e-9)
        taken = w["steps"] - w["skipped"]
        entry = dict(kind="train", step=step, **summarize(w), lr=lr, grad_norm=w["grad_norm"] / max(taken, 1),
                     tokens_per_s=w["tokens"] / elapsed, data_wait=stream.wait_s / elapsed)
        if scaler is not None:
            entry.update(loss_scale=scaler.scale, skipped_steps=w["skipped"])
        self.record(entry)
        self.window, self._t0, stream.wait_s = {}, time.perf_counter(), 0.0
        return entry

    def window_state(self, stream) -> dict:
        """The window, for a checkpoint: the sums since the last train record, and the time they took."""
        return dict(sums=self.window, seconds=time.perf_counter() - self._t0, data_wait_s=stream.wait_s)

    def start(self, stream, window=None) -> None:
        """Start the clock at the first step, from a checkpoint's ``window_state()`` if there is one."""
        window = window or dict(sums={}, seconds=0.0, data_wait_s=0.0)
        self.window = dict(window["sums"])
        self._t0 = time.perf_counter() - window["seconds"]
        stream.wait_s = window["data_wait_s"]

    def close(self) -> None:
        self._file.close()


_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def _write_failed(exc: OSError, step: int, last_ckpt, what=None) -> TrainingError:
    """A write of the run that failed (most often: the disk is full), with what is lost and how to go on."""
    full = exc.errno in _DISK_FULL
    why = f"the disk is full ({exc.strerror})" if full else (exc.strerror or str(exc))
    saved = checkpoint_step(last_ckpt) if last_ckpt else 0
    lost = ("no step is lost" if saved == step else f"step {step} is lost" if saved == step - 1
            else f"steps {saved + 1} to {step} are lost")
    kept = f"The last good checkpoint is {last_ckpt}" if last_ckpt else "No checkpoint was saved yet"
    then = "continue with --resume" if last_ckpt else "start the run again"
    return TrainingError(f"step {step}: could not write {what or exc.filename or 'a file of the run'}: {why}. "
                         f"{kept}: {lost}; {'free some space' if full else 'fix that'}, then {then}.")


@contextlib.contextmanager
def _writes(step: int, last_ckpt, what=None):
    """Turns a failed write into a ``TrainingError`` that says what is lost and how to go on."""
    try:
        yield
    except OSError as exc:
        raise _write_failed(exc, step, last_ckpt, what) from None


# ------------------------------------------------------------------- checkpoints
def run_identity(a: TrainArgs, config: BertConfig, corpus_fp: str, vocab_fp: str) -> dict:
    """What must match for a checkpoint to be resumed by this run."""
    return dict(config=config.to_dict(), corpus=corpus_fp, vocab=vocab_fp, steps=a.steps,
                batch_size=a.batch_size, seq_len=a.seq_len, lr=a.lr, warmup=a.warmup_steps, accum=a.accum,
                weight_decay=a.weight_decay, max_grad_norm=a.max_grad_norm,
                bias_correction=a.bias_correction, seed=a.seed, dtype=a.dtype, dupe_factor=a.dupe_factor,
                mixed_precision=a.mixed_precision, heldout_fraction=a.heldout_fraction,
                eval_instances=a.eval_instances, identity_version=IDENTITY_VERSION)


IDENTITY_VERSION = 2


def _comparable(identity: dict, theirs: dict) -> dict:
    """Our identity as a checkpoint of ``theirs``'s version would have recorded it.

    Version 1 (no ``identity_version``) recorded neither the held-out
    settings nor the evaluation size, and ``mixed_precision`` only when on:
    those checkpoints still resume, compared on what they hold.
    """
    if "identity_version" in theirs:
        return identity
    old = {k: v for k, v in identity.items()
           if k not in ("identity_version", "heldout_fraction", "eval_instances", "mixed_precision")}
    if identity.get("mixed_precision"):
        old["mixed_precision"] = True
    return old


def save_run(out, step, model, opt, stream, identity, keep, scaler=None, log_window=None) -> Path:
    """Write the run's checkpoint of ``step``; ``log_window``: ``MetricsLog.window_state()``."""
    xp = model.xp
    if not bool(xp.isfinite(model.params.data).all()):
        raise TrainingError(f"step {step}: the weights hold NaN or inf; not writing a poisoned checkpoint")
    arrays = {"params": model.params.data, "adam_m": opt.m, "adam_v": opt.v}
    meta = {"run": identity, "adam_t": opt.t, "data": stream.state_dict()}
    if scaler is not None:
        meta["loss_scaler"] = scaler.state_dict()
    if log_window is not None:
        meta["log_window"] = log_window
    return save_checkpoint(out, step, arrays, meta, keep=keep)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_RUN_STATE = {   # what a run's checkpoint holds besides its arrays, and how to tell it is usable
    "run": lambda v: isinstance(v, dict),
    "adam_t": _is_int,
    "data": lambda v: isinstance(v, dict) and _is_int(v.get("epoch")) and _is_int(v.get("index")),
}


def check_complete(path, arrays: dict, meta: dict) -> None:
    """Refuse a checkpoint that lacks part of a run's state, naming what it lacks."""
    missing = [k for k in ("params", "adam_m", "adam_v") if k not in arrays]
    missing += [k for k, usable in _RUN_STATE.items() if not usable(meta.get(k))]
    if missing:
        raise CheckpointError(_lacks(path, missing))


def _lacks(path, names) -> str:
    return (f"checkpoint {path} lacks usable {', '.join(names)}: it is not a whole checkpoint of a minibert "
            f"run, and no run can continue from it; move it out of {Path(path).parent} to resume from the "
            f"checkpoint before it, or start the run in another --out")


def _is_log_window(state) -> bool:
    """What ``MetricsLog.window_state()`` writes."""
    return (isinstance(state, dict) and isinstance(state.get("sums"), dict)
            and all(_is_number(v) for v in state["sums"].values())
            and _is_number(state.get("seconds")) and _is_number(state.get("data_wait_s")))


def restore_run(path, model, opt, stream, identity, scaler=None):
    """Load checkpoint ``path`` into the model, AdamW, the data stream (and the loss scaler).

    Returns (step, log window): the window is the sums of the steps since
    the last train record (``MetricsLog.window_state()``), None in a
    checkpoint from before windows were saved.
    """
    arrays, meta = load_checkpoint(path)
    check_complete(path, arrays, meta)
    theirs = meta["run"]
    identity = _comparable(identity, theirs)
    diff = sorted(k for k in set(identity) | set(theirs) if identity.get(k) != theirs.get(k))
    if diff:
        detail = ", ".join(f"{k}: checkpoint {theirs.get(k)!r} vs now {identity.get(k)!r}"
                           for k in diff if k not in ("config", "corpus", "vocab"))
        what = {"config": "the model config differs",
                "corpus": "the corpus text differs from the one this run started on",
                "vocab": f"the vocabulary differs ({VOCAB_NAME} in the run folder, or --vocab, was changed)"}
        detail += "".join(f", {what[k]}" for k in diff if k in what)
        raise CheckpointError(f"{path} belongs to a different run ({detail.lstrip(', ')}); "
                              f"use another --out or the same settings")
    if scaler is not None and not isinstance(meta.get("loss_scaler"), dict):
        raise CheckpointError(_lacks(path, ["loss_scaler"]))
    window = meta.get("log_window")
    if window is not None and not _is_log_window(window):
        raise CheckpointError(_lacks(path, ["log_window"]))
    targets = {"params": model.params.data, "adam_m": opt.m, "adam_v": opt.v}
    for name, target in targets.items():
        if arrays[name].shape != target.shape:
            raise CheckpointError(f"checkpoint {path}: its {name} holds {arrays[name].size} values (shape "
                                  f"{arrays[name].shape}), the model needs {target.size} (shape "
                                  f"{target.shape}); no run can continue from it")
    for name, target in targets.items():
        target[...] = model.xp.asarray(arrays[name])
    opt.t = int(meta["adam_t"])
    stream.load_state_dict(meta["data"])
    if scaler is not None:
        scaler.load_state_dict(meta["loss_scaler"])
    return int(meta["step"]), window


class StopSignal:
    """Turns SIGINT (Ctrl-C) and SIGTERM into a request to save and stop after the current step."""

    def __init__(self):
        self.received, self._old = None, {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread: leave the defaults alone
                pass
        return self

    def _handle(self, signum, frame):
        self.received = signal.Signals(signum).name

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)


# -------------------------------------------------------------------------- loop
def pretrain(a: TrainArgs, log=print, on_record=None) -> RunResult:
    """Run (or resume) a pre-training job; see the module docstring.

    log: where the set-up and end messages go (``print`` by default).
    on_record: called with each record as it is written to metrics.jsonl
        (a dict with "kind" = "train" or "eval", "step" and the metrics),
        e.g. to draw a live plot in a notebook.
    """
    config = check_args(a)
    out = Path(a.out)
    lock = lock_run_folder(out)   # before anything in the folder is read: a run starting beside us hears of us
    try:
        checkpoint = _checkpoint_to_resume(a, out)
        if not a.resume:
            if latest_checkpoint(out) is not None:
                raise ValueError(f"{out} already holds checkpoints of a run: pass --resume to continue "
                                 f"it, or choose another --out")
            start_fresh(out, a)
        return _run(a, config, out, checkpoint, log, on_record)
    except OSError as exc:        # the loop's own writes say more: this is the set-up's
        if exc.errno not in _DISK_FULL:
            raise
        raise TrainingError(f"could not write {exc.filename or out}: the disk is full ({exc.strerror}); no "
                            f"step was trained in this start: free some space, then run the same command "
                            f"again") from None
    finally:
        lock.close()


def _checkpoint_to_resume(a: TrainArgs, out: Path):
    """The checkpoint --resume continues from, checked now, before any work; None for a new run."""
    if not a.resume:
        return None
    checkpoint = latest_checkpoint(out)
    if checkpoint is None:
        raise CheckpointError(f"--resume: no checkpoint in {out}")
    check_complete(checkpoint, *load_checkpoint(checkpoint))
    return checkpoint


def _run(a: TrainArgs, config: BertConfig, out: Path, checkpoint, log, on_record) -> RunResult:
    """``pretrain`` once the folder is checked and locked: set-up, the loop, the end."""
    accel.enable()   # the accelerated kernels: the same math, faster (MINIBERT_FAST=0: the reference)
    corpus, tokenizer, stream, eval_batches = prepare_data(a, out, log)
    config.vocab_size = tokenizer.vocab_size
    config.pad_token_id = tokenizer.pad_id
    model = BertForPreTraining(config, seed=a.seed, dtype=a.dtype, device=a.device,
                               mixed_precision=a.mixed_precision)
    opt = AdamW(model.params, lr=a.lr, weight_decay=a.weight_decay, bias_correction=a.bias_correction)
    scaler = LossScaler() if a.mixed_precision else None
    identity = run_identity(a, config, corpus.fingerprint(), tokenizer.fingerprint())
    step, window = restore_run(checkpoint, model, opt, stream, identity, scaler) if checkpoint else (0, None)

    baseline = unigram_baseline(stream.dataset, tokenizer, eval_batches)
    log(f"corpus: {corpus}")
    log(f"model: {a.config}, {model.num_parameters():,} parameters, vocabulary {config.vocab_size:,}; "
        f"{stream.per_epoch} batches of {a.batch_size} per epoch")
    log(f"baselines: MLM loss {baseline:.3f} (the training corpus's unigram frequencies), NSP accuracy 50%")
    unk = unknown_share(eval_batches, tokenizer)
    if unk > 0.05:
        source = f"--vocab {a.vocab} does not fit this corpus" if a.vocab else \
            f"--vocab-size {a.vocab_size} is too small for this corpus"
        log(f"warning: {unk:.0%} of the held-out tokens are [UNK]: {source}; the model learns little "
            f"from text it cannot see")
    if checkpoint:
        log(f"resumed from {checkpoint} at step {step}")
        if window is None and step % a.log_every and step < a.steps:
            after = min(step - step % a.log_every + a.log_every, a.steps)
            log(f"note: {checkpoint} holds no sums of the steps since the last train record (older "
                f"checkpoints do not): the record of step {after} averages steps {step + 1} to {after} only")

    metrics = _open_metrics(out / METRICS_NAME, step, checkpoint, log, on_record)
    last_ckpt, stopped_by, end = checkpoint, None, a.stop_at if a.stop_at is not None else a.steps
    with contextlib.ExitStack() as closing:
        closing.callback(metrics.close)
        if step == 0:
            with _writes(step, last_ckpt):
                metrics.record(dict(kind="eval", step=0, **evaluate(model, eval_batches),
                                    unigram_baseline=baseline))
        stream = Prefetch(stream)   # after the restore: it starts from the restored position
        closing.callback(stream.close)
        from tqdm.auto import tqdm
        bar = tqdm(total=a.steps, initial=step, disable=not a.progress, unit="step", dynamic_ncols=True)
        closing.callback(bar.close)
        metrics.start(stream, window)
        # a diverging run overflows: the finiteness check below reports it
        # in one line instead of a wall of NumPy warnings
        with StopSignal() as stop, np.errstate(over="ignore", invalid="ignore"):
            while step < end:
                lr = a.lr * linear_warmup_decay(step, a.steps, a.warmup_steps)
                sums, grad_norm, overflow = _optimiser_step(a, model, opt, scaler, stream, step, lr, last_ckpt)
                step += 1
                metrics.add_step(sums, grad_norm, overflow)

                # ---- log, evaluate, save; a write that fails says which steps are lost
                with _writes(step, last_ckpt):
                    # log steps only, never at a stop: the window goes into the checkpoint instead
                    if step % a.log_every == 0 or step == a.steps:
                        entry = metrics.train_record(step, lr, stream, scaler)
                        bar.set_postfix(loss=f"{entry['loss']:.3f}", mlm_acc=f"{entry['mlm_acc']:.3f}",
                                        nsp_acc=f"{entry['nsp_acc']:.2f}", tok_s=f"{entry['tokens_per_s']:,.0f}")
                    bar.update(1)
                    if step % a.eval_every == 0 or step == a.steps:
                        metrics.record(dict(kind="eval", step=step, **evaluate(model, eval_batches),
                                            unigram_baseline=baseline))
                    if stop.received or step % a.save_every == 0 or step == end:
                        try:
                            last_ckpt = save_run(out, step, model, opt, stream, identity, a.keep, scaler,
                                                 metrics.window_state(stream))
                        except TrainingError as exc:
                            raise TrainingError(f"{exc}. Last good checkpoint: {last_ckpt or 'none'}. "
                                                f"Try a lower --lr.") from None
                if stop.received:
                    stopped_by = stop.received
                    log(f"\n{stopped_by} received: saved {last_ckpt} at step {step}; "
                        f"continue with --resume")
                    break
            else:
                if a.stop_at is not None and step < a.steps:
                    stopped_by = "stop_at"
                    log(f"stopped at step {step} (--stop-at): saved {last_ckpt}; continue with --resume")

    history = metrics.history
    final_eval = next((h for h in reversed(history) if h["kind"] == "eval"), None)
    result = RunResult(out=out, step=step, history=history, final_eval=final_eval, model=model,
                       tokenizer=tokenizer, stopped_by=stopped_by)
    if step == a.steps:
        with _writes(step, last_ckpt, what=out / "model"):
            export_dir = export_model(model, tokenizer, out)
        log(f"model saved to {export_dir} (Hugging Face format, with {VOCAB_NAME})")
    if a.plot:
        with _writes(step, last_ckpt, what=out / PLOT_NAME):
            plot_history(history, out / PLOT_NAME, vocab_size=config.vocab_size)
        log(f"loss curves: {out / PLOT_NAME}")
    return result


def _optimiser_step(a: TrainArgs, model, opt, scaler, stream, step: int, lr: float, last_ckpt):
    """Step ``step + 1``: accum micro-batches, clip, AdamW.  Returns (sums, grad_norm, overflow)."""
    model.seed_dropout((a.seed, step))        # dropout masks depend on (seed, step) only
    loss_scale = scaler.scale if scaler is not None else 1.0
    sums = {}
    for micro in range(a.accum):
        batch = stream.next_batch()
        out_ = model.forward(**batch, train=True)
        model.backward(accumulate=micro > 0, loss_scale=loss_scale)
        sums = add(sums, batch_stats(out_, batch))
    if a.accum > 1 or loss_scale != 1.0:
        # the mean over micro-batches, and the loss scale taken out again
        model.params.grad *= 1.0 / (a.accum * loss_scale)
    stats = summarize(sums)
    grad_norm = clip_grad_norm(model.params, a.max_grad_norm or None)
    overflow = not math.isfinite(grad_norm)
    if not math.isfinite(stats["loss"]) or (overflow and scaler is None):
        raise TrainingError(f"step {step + 1}: the loss is {stats['loss']} (gradient norm "
                            f"{grad_norm}); stopped without saving. Last good checkpoint: "
                            f"{last_ckpt or 'none'}. Try a lower --lr.")
    if scaler is None or scaler.update(not overflow):
        opt.step(lr)
    elif scaler.scale < 1.0:
        # the float16 gradients overflow even unscaled: not an accident of the scale
        raise TrainingError(f"step {step + 1}: the gradients overflow float16 even at loss scale "
                            f"{loss_scale:g}; stopped without saving. Last good checkpoint: "
                            f"{last_ckpt or 'none'}. Try a lower --lr, or train without "
                            f"--mixed-precision.")
    return sums, grad_norm, overflow


def _open_metrics(path: Path, step: int, checkpoint, log, on_record) -> MetricsLog:
    """metrics.jsonl rewound to ``step`` (a new run starts a new file), open for the records to come."""
    history = _read_history(path, upto=step, log=log) if step else []
    with _writes(step, checkpoint, what=path):
        _write_history(path, history)
        return MetricsLog(path, history, on_record)


def export_model(model, tokenizer, out: Path) -> Path:
    """The model in Hugging Face's format, with its vocab.txt, as ``out/model``: written whole or not at all."""
    final, tmp = out / "model", out / ".model.tmp"
    shutil.rmtree(tmp, ignore_errors=True)          # left by a run killed while it exported
    try:
        model.save_pretrained(tmp)
        tokenizer.save_vocabulary(tmp)
        if final.is_dir() and not final.is_symlink():
            shutil.rmtree(final)                    # this run's earlier export: a resumed run writes it again
        os.replace(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _read_history(path: Path, upto: int, log=print) -> list:
    """The records of an earlier run up to step ``upto`` (those after it are replayed on resume).

    A last line cut short (a full disk, a power cut mid-write) is dropped
    with a note: it is after the checkpoint, and the resumed run writes it
    again.  Anything else that is not one of our records is an error.
    """
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    records = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            if not isinstance(r, dict) or not isinstance(r.get("step"), int) or "kind" not in r:
                raise ValueError("not a record of a minibert run")
        except ValueError as exc:
            if n == len(lines):
                log(f"{path}: line {n} is incomplete (cut off mid-write); dropped")
                break
            raise ValueError(f"{path}, line {n}: {exc}; it cannot be resumed from") from None
        records.append(r)
    return [r for r in records if r["step"] <= upto]


_HELD: dict = {}   # folder -> [descriptor, count]: the folders this process has locked


class _FolderLock:
    """A hold on a folder's lock; ``close()`` lets go (the last hold releases the ``flock``)."""

    def __init__(self, key=None):
        self.key = key

    def close(self):
        if self.key is None:
            return
        held = _HELD[self.key]
        held[1] -= 1
        if held[1] == 0:
            os.close(held[0])       # closing the descriptor releases the lock
            del _HELD[self.key]
        self.key = None


def lock_run_folder(out: Path) -> _FolderLock:
    """Lock ``out`` for a run; a second run on the same folder stops with a clear error.

    Two runs writing one folder would interleave their checkpoints and lose
    one run's metrics.  The lock is the operating system's (``flock`` on the
    folder), so it goes with the process, even after a crash, and leaves no
    file behind.  Within one process the lock can be taken again (the demo
    holds it while it clears its folder and then runs ``pretrain``).  Where
    ``flock`` is not available (Windows, some network file systems) the
    folder is not locked.
    """
    key = Path(out).resolve()
    if key in _HELD:
        _HELD[key][1] += 1
        return _FolderLock(key)
    try:
        import fcntl
        fd = os.open(key, os.O_RDONLY)
    except (ImportError, OSError):
        return _FolderLock()
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise ValueError(f"another run is using --out {out} right now; wait for it to end, "
                             f"or choose another --out") from None
        return _FolderLock()        # locking not supported here: run unlocked
    _HELD[key] = [fd, 1]
    return _FolderLock(key)


def start_fresh(out: Path, a: TrainArgs) -> None:
    """Make ``out`` the folder of a new run, never replacing files that no run of ours wrote.

    A folder with ``run.json`` holds an earlier run that stopped before its
    first checkpoint: a new run replaces its outputs.  Without it, a
    ``vocab.txt``, ``metrics.jsonl``, ``loss.png`` or ``model/`` there are
    someone else's files, and the run refuses to start.
    """
    taken = [n for n in OUTPUT_NAMES if (out / n).exists()]
    if a.vocab is not None and Path(a.vocab).resolve() == (out / VOCAB_NAME).resolve():
        taken.remove(VOCAB_NAME)    # the run reads it, and writes the same vocabulary back
    if taken and not (out / RUN_NAME).is_file():
        raise ValueError(f"--out {out} already holds {', '.join(taken)}, which no minibert run wrote "
                         f"and a run would replace; choose another --out")
    info = {"minibert_run": 1, "args": asdict(a)}
    (out / RUN_NAME).write_text(json.dumps(info, indent=2, default=str) + "\n", encoding="utf-8")


def _write_history(path: Path, records: list) -> None:
    text = "".join(json.dumps(r) + "\n" for r in records)
    write_whole(path, lambda f: f.write(text.encode()))


# -------------------------------------------------------------------------- plot
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
    if evals:
        ax2.plot([h["step"] for h in evals], [h["nsp_acc"] for h in evals], "o-", ms=3,
                 label="NSP accuracy (held-out)")
        ax2.plot([h["step"] for h in evals], [h["mlm_acc"] for h in evals], "s-", ms=3,
                 label="MLM accuracy (held-out)")
    if train:
        ax2.plot([h["step"] for h in train], [h["nsp_acc"] for h in train], lw=1, alpha=0.4,
                 label="NSP accuracy (train)")
    ax2.axhline(0.5, color="gray", ls="--", label="NSP chance (50%)")
    if evals and evals[-1]["nsp_majority"] > 0.5:
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


# ---------------------------------------------------------------------- fill-mask
def fill_mask(model, tokenizer, text: str, top_k: int = 5):
    """Top-k predictions for each ``[MASK]`` in ``text``: a list (one per mask) of (token, probability).

    Text past the model's positions is cut off, but a ``[MASK]`` there is an error: every
    ``[MASK]`` gets its predictions, or none does.
    """
    mask_id = tokenizer.mask_id
    n_positions = model.config.max_position_embeddings
    enc = tokenizer.encode(text, max_length=n_positions)
    ids = np.asarray([enc["input_ids"]])
    positions = np.flatnonzero(ids[0] == mask_id)
    n_masks = tokenizer.tokenize_to_ids(text).count(mask_id)
    shown = repr(text) if len(text) <= 80 else repr(text[:60]) + f"... ({len(text):,} characters)"
    if n_masks == 0:
        raise ValueError(f"no [MASK] in {shown}: write [MASK] where a word should be predicted")
    if positions.size < n_masks:
        lost = n_masks - positions.size
        raise ValueError(f"{lost:,} of the {n_masks:,} [MASK] tokens of {shown} "
                         f"{'lies' if lost == 1 else 'lie'} beyond the model's {n_positions} positions: "
                         f"only {positions.size:,} fit (the model reads at most {n_positions - 2} tokens "
                         f"between [CLS] and [SEP]); shorten the text or split it into several")
    out = model.forward(ids, np.asarray([enc["token_type_ids"]]), np.asarray([enc["attention_mask"]]),
                        train=False)
    model.release()
    logits = to_numpy(out.mlm_logits[0, positions]).astype(np.float64)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    result = []
    for p in probs:
        top = np.argsort(-p)[:top_k]
        result.append([(tokenizer.convert_ids_to_tokens([int(i)])[0], float(p[i])) for i in top])
    return result
