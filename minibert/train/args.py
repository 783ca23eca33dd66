"""A run's settings (``TrainArgs``), all checked before any work, and what a run returns."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np

from ..backend import get_xp, resolve_dtype
from ..kernels import KERNELS
from ..checks import is_int, is_number
from ..model.config import PRESETS, BertConfig
from ..data.corpus import check_data_dir
from ..data.wordpiece_trainer import check_vocab_size_option
from .run_folder import check_writable


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
    # the ablations of notebook 12, one flag each (with --dropout 0)
    no_nsp: bool = False               # MLM only: full sentences packed into one segment, no NSP loss
    mlm_probability: float = 0.15      # the share of tokens predicted (80/10/10 kept)
    whole_word_masking: bool = False   # a word's WordPieces chosen together
    pre_ln: bool = False               # pre-LayerNorm layers (not exportable as BertForPreTraining)
    device: str = "cpu"
    dtype: str = "float32"
    mixed_precision: bool = False      # float16 products, float32 master weights, dynamic loss scaling
    cuda_graph: bool = False           # on a GPU: each step replayed as one CUDA graph (train/graph_step.py)
    kernels: str = "fast"              # the accelerated kernels; "reference": minibert/ops alone
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
    data_worker: str = "auto"          # where batches are made: "thread", "process"; auto: a process on a GPU
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
    stopped_by: str | None = None    # "SIGINT", "SIGTERM", "SIGHUP", "stop_at", "stdout closed", "stderr closed", ...
    eval_batches: list | None = None     # the held-out batches every evaluation used
    token_counts: object = None          # how often each token occurs in the training text


def check_args(args: TrainArgs, probe_out: bool = True) -> BertConfig:
    """Every argument checked before any work; returns the model config (vocab size to be set).

    ``probe_out``: make --out and check that it is writable (False: the data-parallel ranks
    other than 0, which write nothing).
    """
    _check_kinds(args)
    positive = dict(steps=args.steps, batch_size=args.batch_size, accum=args.accum, eval_every=args.eval_every,
                    save_every=args.save_every, keep=args.keep, log_every=args.log_every, vocab_size=args.vocab_size,
                    eval_instances=args.eval_instances, dupe_factor=args.dupe_factor)
    for name, value in positive.items():
        if not is_int(value) or value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be a positive integer, got {value!r}")
    if not is_int(args.seed) or args.seed < 0:
        raise ValueError(f"--seed must be an integer >= 0, got {args.seed!r}")
    if args.eval_instances < 2 and not args.no_nsp:     # NSP needs an IsNext and a NotNext pair; MLM one sequence
        raise ValueError(f"--eval-instances must be at least 2 (one IsNext and one NotNext pair), "
                         f"got {args.eval_instances}")
    if not str(args.out).strip():
        raise ValueError("--out must name a folder for the run, got an empty string")
    if not args.lr > 0 or not math.isfinite(args.lr):
        raise ValueError(f"--lr must be a positive number, got {args.lr!r}")
    if not 0 <= args.warmup_steps <= args.steps:
        raise ValueError(f"--warmup must be between 0 and --steps ({args.steps}), got {args.warmup_steps}")
    if args.stop_at is not None and not 0 < args.stop_at <= args.steps:
        raise ValueError(f"--stop-at must be between 1 and --steps ({args.steps}), got {args.stop_at}")
    if not 0 < args.heldout_fraction < 1:
        raise ValueError(f"--heldout-fraction must be in (0, 1), got {args.heldout_fraction}")
    if not (0 <= args.max_grad_norm < math.inf):
        raise ValueError(f"--max-grad-norm must be >= 0 (0: no clipping), got {args.max_grad_norm!r}")
    if not (0 <= args.weight_decay < math.inf):
        raise ValueError(f"--weight-decay must be >= 0, got {args.weight_decay!r}")
    if args.dropout is not None and not 0 <= args.dropout < 1:
        raise ValueError(f"--dropout must be in [0, 1), got {args.dropout}")
    _check_ablations(args)
    config = load_model_config(args.config)
    if args.dropout is not None:
        config.hidden_dropout_prob = config.attention_probs_dropout_prob = args.dropout
    if config.type_vocab_size < 2:
        raise ValueError(f"the model config has type_vocab_size={config.type_vocab_size}; pre-training "
                         f"needs 2 (segment A and segment B of each NSP pair)")
    # [CLS] A [SEP] B [SEP] needs 3 special tokens and at least one token on each side
    if not 5 <= args.seq_len <= config.max_position_embeddings:
        raise ValueError(f"--seq-len must be between 5 ([CLS] A [SEP] B [SEP]) and the config's "
                         f"max_position_embeddings={config.max_position_embeddings}, got {args.seq_len}")
    _check_cuda_graph(args)
    get_xp(args.device)  # a clear error now if CuPy or the GPU is missing
    resolve_dtype(args.dtype)
    if args.kernels not in KERNELS:
        raise ValueError(f"--kernels must be one of {list(KERNELS)}, got {args.kernels!r}")
    if args.mixed_precision and resolve_dtype(args.dtype) != np.float32:
        raise ValueError(f"--mixed-precision keeps float32 master weights: it needs --dtype float32, "
                         f"got {args.dtype}")
    check_data_dir(args.corpus, args.data_dir)
    _check_data_worker(args)
    _check_vocab(args)
    if probe_out:
        check_writable(Path(args.out))
    return config


DATA_WORKERS = ("auto", "thread", "process")


def _check_cuda_graph(args: TrainArgs) -> None:
    if args.cuda_graph and (args.device != "cuda" or args.kernels != "fast"):
        raise ValueError("--cuda-graph replays a GPU step with minibert's kernels: it needs --device cuda and "
                         "--kernels fast")


def _check_data_worker(args: TrainArgs) -> None:
    if args.data_worker not in DATA_WORKERS:
        raise ValueError(f"--data-worker must be one of {list(DATA_WORKERS)}, got {args.data_worker!r}")
    if args.data_worker == "process" and os.name != "posix":
        raise ValueError("--data-worker process needs a POSIX system (Linux, macOS); use --data-worker thread")


def uses_data_process(args: TrainArgs) -> bool:
    """Whether batches are made by a process of their own: asked for, or by default on a GPU, whose
    launch-bound steps need the interpreter a thread would share (train/data_worker.py)."""
    return args.data_worker == "process" or (args.data_worker == "auto" and args.device == "cuda"
                                             and os.name == "posix")


# the ablation flags and their defaults (BERT's recipe): what a run's identity and run.json record
ABLATIONS = dict(no_nsp=False, mlm_probability=0.15, whole_word_masking=False, pre_ln=False)


def _check_ablations(args: TrainArgs) -> None:
    """The ablation flags: the share of tokens strictly between 0 and 1 (the switches: _check_kinds)."""
    p = args.mlm_probability
    # 0 predicts nothing, and 1 hides every token, leaving no context to predict it from
    if not is_number(p) or not 0 < p < 1:
        raise ValueError(f"--mlm-probability must be a share of the tokens strictly between 0 and 1 "
                         f"(BERT: 0.15), got {p!r}")


def _check_vocab(args: TrainArgs) -> None:
    """--vocab names a file (not a folder, as a model's folder would be), or --vocab-size leaves room for words."""
    if args.vocab is None:
        check_vocab_size_option(args.vocab_size)
        return
    if Path(args.vocab).is_dir():
        hint = f" (it holds {Path(args.vocab) / 'vocab.txt'})" if (Path(args.vocab) / "vocab.txt").is_file() else ""
        raise IsADirectoryError(f"--vocab {args.vocab} is a folder; name the vocabulary file in it{hint}")
    if not Path(args.vocab).is_file():
        raise FileNotFoundError(f"--vocab {args.vocab}: no such file")


def _check_kinds(args: TrainArgs) -> None:
    """Each setting of the kind its annotation says: in Python (not on the command line, which makes them) a
    string for a number, a number for a switch or a Corpus for a path would fail late, or pass unseen."""
    for f in fields(args):
        value, kind = getattr(args, f.name), f.type.replace(" | None", "")
        if value is None and f.type.endswith("| None"):
            continue
        flag, hint = f"--{f.name.replace('_', '-')}", ""
        if kind == "bool":
            ok, what = isinstance(value, (bool, np.bool_)), "a switch: True or False"
        elif kind == "int":
            ok, what = is_int(value), "a whole number"
            hint = " (a number of steps, not a fraction of them)" if f.name == "warmup" and is_number(value) else ""
        elif kind == "float":
            ok, what = is_number(value), "a number"
            hint = " (0: no clipping)" if f.name == "max_grad_norm" else ""
        else:
            ok = isinstance(value, (str, os.PathLike)) or (f.name == "config" and isinstance(value, BertConfig))
            what = "text: a name or a path"
            hint = (" (a Corpus object: write its documents to a file, one sentence per line)"
                    if f.name == "corpus" and not isinstance(value, str) else "")
        if not ok:
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            raise ValueError(f"{flag} ({f.name}) {'is' if kind == 'bool' else 'must be'} {what}, got "
                             f"{type(value).__name__} {shown}{hint}")


def load_model_config(spec) -> BertConfig:
    """A preset name (tiny, mini, ...), the path of a config.json, or a BertConfig (a copy of it)."""
    if isinstance(spec, BertConfig):
        return replace(spec)
    spec = str(spec)
    if spec in PRESETS:
        return BertConfig.from_preset(spec)
    if spec.endswith(".json") or Path(spec).is_file():
        return BertConfig.from_json_file(spec)
    raise ValueError(f"--config {spec!r} is neither a preset ({', '.join(PRESETS)}) nor a config.json file")


