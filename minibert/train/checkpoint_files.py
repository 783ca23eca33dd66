"""Training checkpoints that survive a crash.

A checkpoint is one ``.npz`` file holding everything a run needs to continue
exactly where it stopped: the weights, AdamW's two moment buffers and step
count, the training step (the schedule's position), the data stream's
position and random state, and the run's settings (to refuse resuming a
different run).  Dropout needs no saved state: the trainer re-seeds it from
(seed, step) at every step.

Writing is atomic: the file is written under a temporary name in the same
directory, flushed to disk (fsync) and then renamed over the final name, so a
``kill -9`` at any moment leaves either the old checkpoint or the new one,
never half a file.  A SHA-256 of the arrays is stored inside and checked on
loading, so a damaged file is reported instead of silently resumed.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import zipfile
from pathlib import Path

import numpy as np

from ..backend import to_numpy
from ..checks import is_int

_NAME = re.compile(r"^checkpoint-(\d{8,})\.npz$")   # 8 digits, more from step 100,000,000 on


class CheckpointError(ValueError):
    """A checkpoint that cannot be used (damaged, or from a different run)."""


def checkpoint_path(directory, step) -> Path:
    return Path(directory) / f"checkpoint-{step:08d}.npz"



def _write_npz(f, arrays: dict) -> None:
    """``np.savez(f, **arrays)``, with the archive closed even when a write fails.

    Older NumPy leaves the zip file to the garbage collector after an error (a full disk),
    which then prints "Exception ignored ... seek of closed file" under the one-line error.
    """
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)

def list_checkpoints(directory) -> list[Path]:
    """Checkpoints in ``directory``, oldest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]                # by step, not by name


def latest_checkpoint(directory):
    found = list_checkpoints(directory)
    return found[-1] if found else None


def _digest(arrays: dict) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(name.encode())
        h.update(str(a.dtype).encode() + str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def remove_partial_checkpoints(directory) -> list:
    """Delete the temporary files of checkpoints whose writer was killed mid-write; returns them.

    Only call it while no run can be saving in ``directory`` (a run holds its folder's lock).
    """
    partial = sorted(Path(directory).glob(".checkpoint-*.tmp"))
    for path in partial:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return partial


def save_checkpoint(directory, step: int, arrays: dict, meta: dict, keep: int = 3) -> Path:
    """Write ``checkpoint-<step>.npz`` atomically and keep only the newest ``keep``.

    arrays: {name: NumPy or CuPy array} (copied to the host);
    meta: JSON-serialisable state (step, settings, RNG states, data position).
    """
    if not is_int(step) or step < 0:
        raise ValueError(f"a checkpoint's step must be an integer >= 0, got {step!r}")
    step = int(step)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    host = {name: to_numpy(a) for name, a in arrays.items()}
    meta = dict(meta, step=step, sha256=_digest(host))
    final = checkpoint_path(directory, step)
    # a new file of our own (O_EXCL), created with the ordinary mode (0o666 less the umask);
    # mkstemp would make it private to the user
    tmp = str(Path(directory) / f".checkpoint-{os.getpid()}-{secrets.token_hex(4)}.tmp")
    made = False
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        made = True
        with os.fdopen(fd, "wb") as f:
            _write_npz(f, dict(__meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **host))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except OSError as exc:      # a full disk, most often: named by the checkpoint it was writing
        raise OSError(exc.errno, exc.strerror or str(exc), str(final)) from exc
    finally:
        if made and os.path.exists(tmp):     # half a checkpoint is never left behind
            os.remove(tmp)
    # the rename itself must reach the disk too
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    for old in list_checkpoints(directory)[:-keep] if keep > 0 else []:
        old.unlink(missing_ok=True)
    return final


def checkpoint_step(path) -> int:
    """The step in a checkpoint's name."""
    m = _NAME.match(Path(path).name)
    if m is None:
        raise ValueError(f"{path} is not named as a checkpoint (checkpoint-<step>.npz)")
    return int(m.group(1))


def load_checkpoint(path) -> tuple[dict, dict]:
    """Read a checkpoint; returns (arrays, meta).

    Raises ``CheckpointError``: for a damaged file, advising to delete it;
    for a file that cannot be read (permissions, an I/O error), saying why
    and advising nothing of the kind: the file may be perfectly good.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise _unreadable(path, exc) from None
    with f:
        arrays, meta = _parse(path, f)
    if meta.get("sha256") != _digest(arrays):
        raise CheckpointError(f"checkpoint {path} is damaged: its contents do not match the checksum "
                              f"stored inside; delete it to resume from an earlier one")
    return arrays, meta


def _parse(path: Path, f) -> tuple[dict, dict]:
    try:
        z = np.load(f, allow_pickle=False)
        if not isinstance(z, np.lib.npyio.NpzFile):       # a lone .npy array
            raise ValueError("a single array, not an .npz archive")
        with z:
            arrays = {k: z[k] for k in z.files}
        raw = arrays.pop("__meta__")
        if not isinstance(raw, np.ndarray):
            raise ValueError("its __meta__ entry is not an array")
        meta = json.loads(raw.tobytes().decode())
        if not isinstance(meta, dict):
            raise ValueError("its __meta__ entry is not a JSON object")
    except OSError as exc:
        if exc.errno is None:        # raised by a parser, not by the system: the contents are bad
            raise _damaged(path, exc) from exc
        raise _unreadable(path, exc) from None
    except (zipfile.BadZipFile, ValueError, KeyError, EOFError, UnicodeDecodeError) as exc:
        raise _damaged(path, exc) from exc
    return arrays, meta


def _damaged(path: Path, exc: Exception) -> CheckpointError:
    return CheckpointError(f"checkpoint {path} is damaged or not a minibert checkpoint "
                           f"({type(exc).__name__}: {exc}); delete it to resume from an earlier one")


def _unreadable(path: Path, exc: OSError) -> CheckpointError:
    """The system would not let us read the file: that says nothing about its contents."""
    if isinstance(exc, PermissionError):
        return CheckpointError(f"cannot read checkpoint {path}: permission denied; the file itself may "
                               f"be fine: fix its permissions (or run as its owner), then run again")
    return CheckpointError(f"cannot read checkpoint {path} ({exc.strerror or exc}); the file itself may "
                           f"be fine: fix the cause, then run again")
