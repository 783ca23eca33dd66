"""What stops a run: ``TrainingError``, and a failed write turned into one that says what is lost."""
from __future__ import annotations

import contextlib
import errno

from .checkpoint_files import checkpoint_step


class TrainingError(RuntimeError):
    """The run cannot go on (e.g. the loss became NaN); the message says why and what is saved."""


class PeerError(RuntimeError):
    """Another rank failed: raised on every rank that did not, with that rank's message.

    ``kind`` is the class name of the original error (the command line's exit status follows it).
    """

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


def agreed(exc: BaseException) -> BaseException:
    """Mark an error that every rank raises at the same point (so no rank is left waiting)."""
    exc.everywhere = True
    return exc


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def write_failed(exc: OSError, step: int, last_ckpt, what=None) -> TrainingError:
    """A write of the run that failed (most often: the disk is full), with what is lost and how to go on."""
    full = exc.errno in DISK_FULL
    why = f"the disk is full ({exc.strerror})" if full else (exc.strerror or str(exc))
    saved = checkpoint_step(last_ckpt) if last_ckpt else 0
    lost = ("no step is lost" if saved == step else f"step {step} is lost" if saved == step - 1
            else f"steps {saved + 1} to {step} are lost")
    kept = f"The last good checkpoint is {last_ckpt}" if last_ckpt else "No checkpoint was saved yet"
    then = "continue with --resume" if last_ckpt else "start the run again"
    return TrainingError(f"step {step}: could not write {what or exc.filename or 'a file of the run'}: {why}. "
                         f"{kept}: {lost}; {'free some space' if full else 'fix that'}, then {then}.")


@contextlib.contextmanager
def writes(step: int, last_ckpt, what=None):
    """Turns a failed write into a ``TrainingError`` that says what is lost and how to go on."""
    try:
        yield
    except OSError as exc:
        error = write_failed(exc, step, last_ckpt, what)
        error.everywhere = getattr(exc, "everywhere", False)   # every rank of a data-parallel run raises it
        raise error from None

