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


class AgreedError(Exception):
    """An error every rank of a data-parallel job raised at the same point, so none is left waiting.

    ``error`` is the error itself: rank 0 alone prints it, and every rank exits with the
    status its ``kind`` calls for (its class name; for another rank's error, that error's).
    Only several processes agree: one process raises its errors as they are (``Single.agreed``).
    """

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error
        self.kind = getattr(error, "kind", type(error).__name__)


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
    except (OSError, AgreedError) as exc:      # agreed: a write of rank 0, which every rank of the job has
        failed = os_error_in(exc)
        if failed is None:
            raise
        raise replaced(exc, write_failed(failed, step, last_ckpt, what)) from None


def os_error_in(exc: BaseException) -> OSError | None:
    """The OSError that ``exc`` is, or that every rank agreed on; None for any other error."""
    inner = exc.error if isinstance(exc, AgreedError) else exc
    return inner if isinstance(inner, OSError) else None


def replaced(exc: BaseException, error: BaseException) -> BaseException:
    """``error`` raised in place of ``exc``: agreed by every rank where ``exc`` was."""
    return AgreedError(error) if isinstance(exc, AgreedError) else error

