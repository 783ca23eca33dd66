"""A run's checkpoints: what identifies the run, what a checkpoint holds, saving and restoring it."""
from __future__ import annotations

from pathlib import Path

from .checkpoint_files import CheckpointError, latest_checkpoint, load_checkpoint, save_checkpoint
from ..checks import is_int, is_number
from ..model.config import BertConfig
from .args import ABLATIONS, TrainArgs
from .errors import TrainingError
from .run_folder import VOCAB_NAME


def run_identity(args: TrainArgs, config: BertConfig, corpus_fp: str, vocab_fp: str) -> dict:
    """What must match for a checkpoint to be resumed by this run."""
    return dict(config=config.to_dict(), corpus=corpus_fp, vocab=vocab_fp, steps=args.steps,
                batch_size=args.batch_size, seq_len=args.seq_len, lr=args.lr, warmup=args.warmup_steps,
                accum=args.accum, weight_decay=args.weight_decay, max_grad_norm=args.max_grad_norm,
                bias_correction=args.bias_correction, seed=args.seed, dtype=args.dtype,
                dupe_factor=args.dupe_factor, mixed_precision=args.mixed_precision,
                heldout_fraction=args.heldout_fraction, eval_instances=args.eval_instances,
                identity_version=IDENTITY_VERSION, **{k: getattr(args, k) for k in ABLATIONS})


IDENTITY_VERSION = 2


def save_run(out, step, model, opt, stream, identity, keep, log_window, scaler=None) -> Path:
    """Write the run's checkpoint of ``step``; ``log_window``: ``MetricsLog.window_state()``."""
    xp = model.xp
    if not bool(xp.isfinite(model.params.data).all()):
        raise TrainingError(f"step {step}: the weights hold NaN or inf; not writing a poisoned checkpoint")
    arrays = {"params": model.params.data, "adam_m": opt.m, "adam_v": opt.v}
    meta = {"run": identity, "adam_t": opt.t, "data": stream.state_dict(), "log_window": log_window}
    if scaler is not None:
        meta["loss_scaler"] = scaler.state_dict()
    return save_checkpoint(out, step, arrays, meta, keep=keep)


_RUN_STATE = {   # what a run's checkpoint holds besides its arrays, and how to tell it is usable
    "run": lambda v: isinstance(v, dict),
    "adam_t": is_int,
    "data": lambda v: isinstance(v, dict) and is_int(v.get("epoch")) and is_int(v.get("index")),
    "log_window": lambda v: _is_log_window(v),
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
            and all(is_number(v) for v in state["sums"].values())
            and is_number(state.get("seconds")) and is_number(state.get("data_wait_s")))


def restore_run(path, model, opt, stream, identity, scaler=None):
    """Load checkpoint ``path`` into the model, AdamW, the data stream (and the loss scaler).

    Returns (step, log window): the window is the sums of the steps since
    the last train record (``MetricsLog.window_state()``).
    """
    arrays, meta = load_checkpoint(path)
    check_complete(path, arrays, meta)
    # a checkpoint from before the ablation flags was written by a run of BERT's recipe
    theirs = {**ABLATIONS, **meta["run"]}
    if theirs.get("identity_version") != IDENTITY_VERSION:
        raise CheckpointError(f"{path} was written by an earlier minibert, whose runs recorded other settings "
                              f"(identity version {theirs.get('identity_version', 1)}, now {IDENTITY_VERSION}); "
                              f"no run of this one continues from it: start the run in another --out")
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
    return int(meta["step"]), meta["log_window"]



def checkpoint_to_resume(args: TrainArgs, out: Path):
    """The checkpoint --resume continues from, checked now, before any work; None for a new run."""
    if not args.resume:
        return None
    checkpoint = latest_checkpoint(out)
    if checkpoint is None:
        raise CheckpointError(f"--resume: no checkpoint in {out}")
    check_complete(checkpoint, *load_checkpoint(checkpoint))
    return checkpoint

