"""A run folder as ``minibert doctor`` reads it: its settings, its data facts, its records; what a check returns."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from .checkpoint_files import checkpoint_step, latest_checkpoint
from .run_folder import METRICS_NAME, RUN_NAME, VOCAB_NAME, read_history

# a check's verdicts, from the best to the worst; "not checked" when the run lacks what it needs
OK, EARLY, UNCHECKED, WARNING, PROBLEM = "ok", "not enough data yet", "not checked", "warning", "problem"
VERDICTS = (OK, EARLY, UNCHECKED, WARNING, PROBLEM)


@dataclass
class Check:
    """One check's answer: a verdict, the evidence (numbers from the run) and what to try."""
    name: str
    verdict: str
    evidence: str
    advice: str = ""
    numbers: dict = field(default_factory=dict)


class NotARun(ValueError):
    """The folder given is not a minibert run (no ``run.json``, or files no run wrote)."""


class DamagedRun(NotARun):
    """A run folder whose records were edited by hand or damaged: a field missing, of the wrong type,
    or out of range.  The message names the file, the line and the field."""


@dataclass
class RunLog:
    path: Path
    args: dict                # run.json's settings (the command line's flags)
    data: dict | None         # run.json's data facts (run_facts.py); None when unknown
    model: dict | None        # the model's config and parameter count; None in older runs
    train: list               # the train records of metrics.jsonl, in order
    evals: list               # its held-out evaluations, in order
    notes: list = field(default_factory=list)   # what could not be read, said once

    def arg(self, name, default=None):
        value = self.args.get(name)
        return default if value is None else value

    @property
    def step(self) -> int:
        """The last step the run logged."""
        return max([r["step"] for r in self.train + self.evals], default=0)

    @property
    def warmup(self) -> int:
        w = self.args.get("warmup")
        return int(0.1 * self.arg("steps", 0)) if w is None else int(w)

    @property
    def sequences_per_step(self) -> int:
        return self.arg("batch_size", 0) * self.arg("accum", 1)

    @property
    def vocab_size(self) -> int | None:
        if self.data and self.data.get("vocab_size"):
            return int(self.data["vocab_size"])
        if self.model and self.model.get("vocab_size"):
            return int(self.model["vocab_size"])
        vocab = self.path / VOCAB_NAME
        if vocab.is_file():
            return sum(1 for line in vocab.read_text(encoding="utf-8").splitlines() if line.strip())
        return None

    @property
    def uniform_loss(self) -> float | None:
        """ln V, the loss of a uniform guess; else the held-out loss at step 0, where a new model is."""
        if self.vocab_size:
            return math.log(self.vocab_size)
        start = [e["mlm_loss"] for e in self.evals if e["step"] == 0]
        return start[0] if start else None

    def model_config(self) -> dict | None:
        """The model's config: recorded in run.json, else the preset's, its config.json or the exported one."""
        if self.model:
            return self.model
        from ..model.config import PRESETS, BertConfig
        spec = str(self.arg("config", ""))
        if spec in PRESETS:
            return dict(BertConfig.from_preset(spec, vocab_size=self.vocab_size or 30522).to_dict())
        for path in (Path(spec), self.path / "model" / "config.json"):
            if path.suffix == ".json" and path.is_file():
                try:
                    return BertConfig.from_json_file(path).to_dict()
                except (OSError, ValueError, TypeError):
                    continue
        return None

    def late(self, end: int) -> list:
        """The train records of the last tenth of the steps up to ``end`` (at least 50 steps)."""
        span = max(50, end // 10)
        return [r for r in self.train if end - span < r["step"] <= end]


def mean(records, key) -> float | None:
    values = [r[key] for r in records if isinstance(r.get(key), (int, float))]
    return sum(values) / len(values) if values else None


def read_run(path, recompute: bool = True) -> RunLog:
    """The run in folder ``path``; ``NotARun`` (one line) if it is not one.

    ``recompute``: for a run whose ``run.json`` has no data facts (older runs), compute them from
    its corpus and ``vocab.txt`` (``run_facts.facts_from_corpus``); a note says how it went.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise NotARun(f"{folder} is not a folder" if folder.exists() else f"{folder}: no such folder")
    info = _run_json(folder)
    try:
        history = read_history(folder / METRICS_NAME, upto=math.inf, log=lambda note: None)
    except ValueError as exc:
        raise NotARun(str(exc).replace("; it cannot be resumed from", "")) from None
    _check_records(folder, info)
    log = RunLog(folder, info["args"], info.get("data"), info.get("model"),
                 [r for r in history if r["kind"] == "train"], [r for r in history if r["kind"] == "eval"])
    if lost := _lost_records(folder, history, info["args"]):
        log.notes.append(lost)
    elif not history:
        log.notes.append(f"{METRICS_NAME} holds no records yet: the run has not logged a step")
    if log.data is None and recompute:
        _recompute_facts(log)
    return log


def _lost_records(folder: Path, history: list, args: dict) -> str | None:
    """A note where the run's checkpoints are ahead of its records by a whole --log-every or more: records were
    lost (metrics.jsonl deleted or cut), and the checks see only what is left."""
    saved = latest_checkpoint(folder)
    every = args.get("log_every") if isinstance(args.get("log_every"), int) and args["log_every"] > 0 else 1
    last = max((r["step"] for r in history), default=0)
    step = checkpoint_step(saved) if saved is not None else 0
    if step < last + every:
        return None
    what = (f"{METRICS_NAME} is missing" if not (folder / METRICS_NAME).exists() else
            f"{METRICS_NAME} ends at step {last}" if history else f"{METRICS_NAME} holds no records")
    return (f"{what}, but the run has a checkpoint at step {step}: records were lost (the file "
            f"deleted or cut), and the checks below see only what is left")


def _run_json(folder: Path) -> dict:
    path = folder / RUN_NAME
    if not path.is_file():
        raise NotARun(f"{folder} is not a minibert run folder: it has no {RUN_NAME} (the file every "
                      f"`minibert pretrain` writes first)")
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise NotARun(f"{path} cannot be read as a run's settings ({exc})") from None
    if not isinstance(info, dict) or "minibert_run" not in info or not isinstance(info.get("args"), dict):
        raise NotARun(f"{path} is not the {RUN_NAME} of a minibert run (no \"minibert_run\" and \"args\")")
    for key in ("data", "model"):
        if not isinstance(info.get(key), (dict, type(None))):
            info[key] = None
    return info


def _recompute_facts(log: RunLog) -> None:
    from .run_facts import facts_from_corpus
    try:
        log.data = facts_from_corpus(log.args, log.path)
        log.notes.append(f"{RUN_NAME} predates the data facts minibert now records; they were computed "
                         f"again from the corpus {log.args.get('corpus')!r} and the run's {VOCAB_NAME}")
    except Exception as exc:        # whatever stops the corpus from being read: the checks say what they lack
        log.notes.append(f"{RUN_NAME} predates the data facts minibert now records, and they could not be "
                         f"computed again ({exc}): the checks that need them say so")


# ------------------------------------------------------------------------------ damaged records
# what every run writes, and what each value may be: "count" an int >= 0, "positive" an int >= 1,
# "rate" a finite number >= 0, "share" one in [0, 1], "loss" any number (a diverged run logs inf or
# NaN, which the stability check reads as such), "flag" true or false
_ARGS = {"steps": "positive", "batch_size": "positive", "accum": "positive", "seq_len": "positive",
         "warmup": "count", "lr": "rate", "log_every": "positive", "eval_every": "count",
         "mixed_precision": "flag"}
_DATA = {"vocab_size": "positive", "documents": "count", "distinct_documents": "count",
         "train_documents": "count", "heldout_documents": "count", "heldout_seen_in_training": "count",
         "train_instances": "count", "train_tokens": "count", "not_next_share": "share",
         "unigram_baseline": "rate"}
_MODEL = {"vocab_size": "positive", "hidden_size": "positive", "num_hidden_layers": "positive",
          "num_attention_heads": "positive", "intermediate_size": "positive",
          "max_position_embeddings": "positive", "type_vocab_size": "positive", "parameters": "count"}
_MODEL_NEEDED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
_RECORD = {"mlm_loss": "loss", "nsp_loss": "loss", "loss": "loss", "mlm_acc": "share", "nsp_acc": "share",
           "nsp_majority": "share", "lr": "rate", "grad_norm": "loss", "tokens_per_s": "rate",
           "data_wait": "share", "n_pairs": "count", "n_masked": "count", "unigram_baseline": "rate",
           "loss_scale": "rate", "skipped_steps": "count"}
_NEEDED = {"train": ("mlm_loss", "loss", "lr", "tokens_per_s"), "eval": ("mlm_loss", "unigram_baseline")}


def _bad_value(value, kind: str) -> str | None:
    """Why ``value`` is not a ``kind``, or None when it is one."""
    if kind == "flag":
        return None if isinstance(value, bool) else "is not true or false"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "is not a number"
    if kind in ("count", "positive"):
        low = 1 if kind == "positive" else 0
        if not (math.isfinite(value) and low <= value <= 10 ** 15):
            return f"is out of range ({value!r}; a whole number from {low} up)"
        return None if value == int(value) else f"is not a whole number ({value!r})"
    if kind == "loss":
        return None
    if not math.isfinite(value) or value < 0 or (kind == "share" and value > 1):
        return f"is out of range ({value!r}; {'from 0 to 1' if kind == 'share' else 'a finite number from 0 up'})"
    return None


def _check_fields(where: str, values: dict, kinds: dict, needed=()) -> None:
    for key in needed:
        if values.get(key) is None:
            raise DamagedRun(f"{where}: the field {key!r} is missing: the record is damaged "
                             "(edited by hand, or not written by minibert)")
    for key, kind in kinds.items():
        if values.get(key) is not None:
            why = _bad_value(values[key], kind)
            if why:
                raise DamagedRun(f"{where}: the field {key!r} {why}: the record is damaged")


def _check_records(folder: Path, info: dict) -> None:
    """``DamagedRun`` (one line: the file, the line, the field) for the first record no run writes."""
    run_json = folder / RUN_NAME
    _check_fields(f"{run_json}, \"args\"", info["args"], _ARGS)
    if info.get("data") is not None:
        _check_fields(f"{run_json}, \"data\"", info["data"], _DATA)
    if info.get("model") is not None:
        _check_fields(f"{run_json}, \"model\"", info["model"], _MODEL, _MODEL_NEEDED)
    steps = info["args"].get("steps")
    path = folder / METRICS_NAME
    if not path.is_file():
        return
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    for n, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except ValueError:
            continue                      # read_history has said what it makes of such a line
        if not isinstance(record, dict) or record.get("kind") not in _NEEDED:
            continue
        where = f"{path}, line {n}"
        step = record.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0 or (steps is not None and step > steps):
            raise DamagedRun(f"{where}: the field 'step' is out of range ({step!r}; the run has "
                             f"{steps if steps is not None else 'an unknown number of'} steps): the record is damaged")
        _check_fields(where, record, _RECORD, _NEEDED[record["kind"]])
