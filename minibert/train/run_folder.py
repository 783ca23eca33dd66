"""The run's folder: its file names, the write probe, the lock, a fresh start, the history file, the export."""
from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

from ..textio import write_whole

VOCAB_NAME = "vocab.txt"
METRICS_NAME = "metrics.jsonl"
PLOT_NAME = "loss.png"
RUN_NAME = "run.json"          # written first by every run: marks the folder as a minibert run
DOCTOR_PLOT_NAME = "doctor.png"   # written by `minibert doctor RUN`
OUTPUT_NAMES = (VOCAB_NAME, METRICS_NAME, PLOT_NAME, "model", DOCTOR_PLOT_NAME)   # what a run writes (and replaces)

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


def read_history(path: Path, upto: int, log=print) -> list:
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


def start_fresh(out: Path, args) -> None:
    """Make ``out`` the folder of a new run (``args``: its ``TrainArgs``), never replacing files that no run
    of ours wrote.

    A folder with ``run.json`` holds an earlier run that stopped before its
    first checkpoint: a new run replaces its outputs.  Without it, a
    ``vocab.txt``, ``metrics.jsonl``, ``loss.png`` or ``model/`` there are
    someone else's files, and the run refuses to start.
    """
    taken = [n for n in OUTPUT_NAMES if (out / n).exists()]
    if args.vocab is not None and Path(args.vocab).resolve() == (out / VOCAB_NAME).resolve():
        taken.remove(VOCAB_NAME)    # the run reads it, and writes the same vocabulary back
    if taken and not (out / RUN_NAME).is_file():
        raise ValueError(f"--out {out} already holds {', '.join(taken)}, which no minibert run wrote "
                         f"and a run would replace; choose another --out")
    info = {"minibert_run": 1, "args": asdict(args)}
    (out / RUN_NAME).write_text(json.dumps(info, indent=2, default=str) + "\n", encoding="utf-8")


def write_history(path: Path, records: list) -> None:
    text = "".join(json.dumps(r) + "\n" for r in records)
    write_whole(path, lambda f: f.write(text.encode()))


