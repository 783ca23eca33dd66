"""A run folder as ``minibert doctor`` reads it: its settings, its data facts, its records; what a check returns."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

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
    log = RunLog(folder, info["args"], info.get("data"), info.get("model"),
                 [r for r in history if r["kind"] == "train"], [r for r in history if r["kind"] == "eval"])
    if not history:
        log.notes.append(f"{METRICS_NAME} holds no records yet: the run has not logged a step")
    if log.data is None and recompute:
        _recompute_facts(log)
    return log


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
