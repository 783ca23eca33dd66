"""Exact resume of ``minibert finetune``, a search's runs included.

Everything lives in ``OUT/checkpoints/``:

* ``search.json``: what identifies the job (the task's data, the starting weights, the runs in order, the
  sequence length, the precision), the results of the runs finished so far, which finished runs' models are
  kept, and how long ``metrics.jsonl`` was then;
* ``run-<i>/checkpoint-<step>.npz``: run ``i``, the one in progress: its weights, AdamW's moments and step
  count, the loss scaler, where ``metrics.jsonl`` ended (written every ``--save-every`` steps and on a stop);
* ``model-<i>/checkpoint-<i>.npz``: a finished run's weights, for at most two runs: the best setting's best
  seed so far and the current setting's.

A run is fixed by its recipe and seed (``train.train``: each epoch's order by (seed, epoch), each step's
dropout by (seed, step)), so a finished run is not run again (its results are read back and the search's
choice replayed from them), and the run in progress goes on from its checkpoint with the batches and masks
it would have had: the resumed job ends with the numbers and the model of one that never stopped.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np

from ..backend import to_numpy
from ..train.checkpoint_files import CheckpointError, latest_checkpoint, load_checkpoint, save_checkpoint
from ..train.run_folder import RUN_NAME

FOLDER, STATE, VERSION = "checkpoints", "search.json", 1
OUTPUTS = ("metrics.jsonl", "finetune.png", "results.json", "predictions", "model")     # what a job writes in --out


def fingerprint(*parts) -> str:
    """SHA-256 of arrays and lists of token ids: the data and the weights a job starts from."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, list):
            part = np.concatenate([np.asarray(p, dtype=np.int64).ravel() for p in part] or [np.zeros(0, np.int64)])
        a = np.ascontiguousarray(to_numpy(part))
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


class Progress:
    """A job's saved state in ``out/checkpoints``: read where ``resume``, else a new job (refused where the
    folder holds one)."""

    def __init__(self, out: Path, identity: dict, resume: bool):
        self.out, self.dir, self.identity = out, out / FOLDER, identity
        self.done, self.log_offset = [], 0
        self.saved = None          # the run in progress's checkpoint, read once: (path, arrays, meta)
        state_file = self.dir / STATE
        if not resume:
            if state_file.exists():
                try:
                    finished = json.loads(state_file.read_text(encoding="utf-8")).get("finished") is True
                except (ValueError, UnicodeDecodeError, AttributeError):
                    finished = False
                raise ValueError(f"{out} already holds a " + ("finished fine-tuning job (results.json): choose "
                                 "another --out, or delete it first" if finished else
                                 f"fine-tuning job ({state_file}): pass --resume to continue it, or choose "
                                 f"another --out"))
            _check_nothing_to_replace(out)
            self._write(kept=[])         # the job's identity, before its first checkpoint
            return
        if not state_file.is_file():
            raise ValueError(f"--resume: no fine-tuning job in {out} (no {FOLDER}/{STATE})")
        try:
            state = json.loads(state_file.read_text(encoding="utf-8"))
            theirs, done, offset = state["identity"], state["done"], state["log_offset"]
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise CheckpointError(f"{state_file} is damaged ({exc}); the job cannot be resumed: start it in "
                                  f"another --out") from None
        if state.get("finished"):
            raise ValueError(f"--resume: the job in {out} is finished (results.json); nothing to resume")
        diff = sorted(k for k in set(identity) | set(theirs) if identity.get(k) != theirs.get(k))
        if diff:
            raise ValueError(f"--resume: {out} holds another job ({_differences(diff, theirs, identity)}); "
                             f"give the command it was started with, or choose another --out")
        self.done, self.log_offset = done, int(offset)
        path = latest_checkpoint(self.dir / f"run-{len(done)}")
        if path is not None:
            arrays, meta = load_checkpoint(path)
            if meta.get("run") != identity["runs"][len(done)]:
                raise CheckpointError(f"{path} is not a checkpoint of run {len(done)} of this job; the job cannot "
                                      f"be resumed: start it in another --out")
            self.saved = (path, arrays, meta)

    def start_log(self, path: Path):
        """``metrics.jsonl`` opened for appending, cut back to the saved state (lines after it are written again)."""
        if self.done or self.saved is not None:
            with open(path, "r+b") as f:
                f.truncate(self.saved[2]["log_offset"] if self.saved is not None else self.log_offset)
            return open(path, "a", encoding="utf-8")
        return open(path, "w", encoding="utf-8")

    def restore(self, model, opt, scaler) -> int:
        """Load the run in progress's checkpoint into ``model``, ``opt`` and ``scaler``; its step."""
        if self.saved is None:
            return 0
        (path, arrays, meta), self.saved = self.saved, None       # its arrays are not kept beyond this
        targets = {"params": model.params.data, "adam_m": opt.m, "adam_v": opt.v}
        for name, target in targets.items():
            if name not in arrays or arrays[name].shape != target.shape:
                raise CheckpointError(f"{path} does not hold this model's {name}; the job cannot be resumed")
            target[...] = model.xp.asarray(arrays[name])
        opt.t = int(meta["adam_t"])
        if scaler is not None:
            scaler.load_state_dict(meta["loss_scaler"])
        return int(meta["step"])

    def save_step(self, step: int, model, opt, scaler, log) -> Path:
        """A checkpoint of the run in progress at ``step``."""
        log.flush()
        meta = {"adam_t": int(opt.t), "log_offset": _length(log), "run": self.identity["runs"][len(self.done)]}
        if scaler is not None:
            meta["loss_scaler"] = scaler.state_dict()
        arrays = {"params": model.params.data, "adam_m": opt.m, "adam_v": opt.v}
        return save_checkpoint(self.dir / f"run-{len(self.done)}", step, arrays, meta, keep=1)

    def finished(self, results: dict, model, keep: set, log) -> None:
        """Run ``len(done)`` ended with ``results``; ``keep``: the finished runs whose models the search may
        still choose (``model`` saved where it is one of them)."""
        index = len(self.done)
        if model is not None and index in keep:
            save_checkpoint(self.dir / f"model-{index}", index, {"params": model.params.data}, {}, keep=1)
        self.done.append(results)
        self.log_offset = _length(log)
        self._write(kept=sorted(keep))
        for path in self.dir.iterdir():
            name = path.name
            stale = name.startswith("run-") or (name.startswith("model-") and int(name[6:]) not in keep)
            if stale and path.is_dir():
                shutil.rmtree(path, ignore_errors=True)

    def kept_weights(self, index: int) -> np.ndarray:
        """A finished run's weights, saved by ``finished``."""
        path = latest_checkpoint(self.dir / f"model-{index}")
        if path is None:
            raise CheckpointError(f"{self.dir}: the weights of run {index}, which the search kept, are missing; "
                                  f"the job cannot be finished from here: start it in another --out")
        return load_checkpoint(path)[0]["params"]

    def close(self) -> None:
        """The job is done (results.json written): its weights' checkpoints removed, ``search.json`` kept."""
        self._write(kept=[], finished=True)
        for path in self.dir.iterdir():
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)

    def _write(self, **extra) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / f".{STATE}.{os.getpid()}.tmp"
        state = {"version": VERSION, "identity": self.identity, "done": self.done, "log_offset": self.log_offset,
                 **extra}
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(json.dumps(state, indent=1) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.dir / STATE)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


def _check_nothing_to_replace(out: Path) -> None:
    """A new job writes over nothing it did not write: not a pre-training run's folder, nor another job's outputs."""
    if (out / RUN_NAME).is_file():
        raise ValueError(f"--out {out} is a pre-training run's folder ({RUN_NAME} there): fine-tuning would write over "
                         f"its metrics.jsonl and model/; choose another --out, e.g. {out / 'finetune'}")
    taken = [name for name in OUTPUTS if (out / name).exists()]
    if taken:
        raise ValueError(f"--out {out} already holds {', '.join(taken)}, which fine-tuning writes; choose another "
                         f"--out, or delete them first if they may go")


def _length(log) -> int:
    """How many bytes ``log`` holds, its buffer written out."""
    log.flush()
    return os.fstat(log.fileno()).st_size


def _differences(keys, theirs: dict, ours: dict) -> str:
    named = {"data": "the task's files differ", "model": "the starting weights differ",
             "runs": "the runs differ (--lr, --batch-size, --epochs, --search, --seed, --seeds)"}
    return "; ".join(named.get(k, f"{k}: then {theirs.get(k)!r}, now {ours.get(k)!r}") for k in keys)
