"""What stops a run from outside: a signal, or the end of its output.

SIGINT (Ctrl-C), SIGTERM (a scheduler) and SIGHUP (the terminal went away: a
dropped SSH session) each ask the loop to save a checkpoint and stop after the
current step.  So does the loss of stdout or stderr: when the reader of a pipe
exits, or a terminal hangs up, a write raises ``BrokenPipeError`` (or EIO), and
the run would otherwise die at its next progress-bar update, with no checkpoint
and, its error line being a write too, without a word.  A log file that can no
longer be written (a full disk) stops the run the same way.
"""
from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys

# SIGHUP does not exist on Windows
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
# a write to a pipe whose reader exited (EPIPE), or to a terminal that hung up (EIO)
OUTPUT_GONE = (errno.EPIPE, errno.EIO)


def honoured(sig) -> bool:
    """Whether minibert should handle ``sig``: not a SIGHUP that the user chose to ignore (``nohup``)."""
    return not (sig == getattr(signal, "SIGHUP", None) and signal.getsignal(sig) == signal.SIG_IGN)


_requested = None     # the stop signal the last StopSignal received, for the command line after it


def stop_requested():
    """The name of the signal that stopped the last run (it saved, and is ending), or None."""
    return _requested


class StopSignal:
    """Turns the stop signals, and a lost stdout or stderr, into a request to save and stop after the current step."""

    def __init__(self):
        self.signal, self._old = None, {}

    @property
    def received(self):
        """The signal's name ("SIGHUP"), or why stdout or stderr went ("stderr closed"), or None."""
        return self.signal or output_lost()

    def __enter__(self):
        global _requested
        _requested = None
        for sig in STOP_SIGNALS:
            if not honoured(sig):
                continue
            try:
                self._old[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread: leave the defaults alone
                pass
        return self

    def _handle(self, signum, frame):
        global _requested
        self.signal = _requested = signal.Signals(signum).name

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)


def output_lost():
    """Why the guarded sys.stdout or sys.stderr can no longer be written ("stderr closed"), or None.

    None too when neither is a ``GuardedStream`` (``pretrain`` called from a notebook or a script).
    """
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(stream, GuardedStream) and stream.lost:
            return f"{name} {stream.lost}"
    return None


class GuardedStream:
    """A text stream whose writes never raise once it cannot be written: they are dropped, and remembered.

    ``lost`` then says why: "closed" (its reader or terminal is gone), or "could not be written
    (No space left on device)" for a log file on a full disk, say. The stream's file descriptor
    is pointed at ``os.devnull``, as Python's documentation advises for a broken pipe: the
    interpreter flushes the stream once more at exit, and that flush must not fail (and print) again.
    """

    def __init__(self, stream):
        self._stream, self.lost = stream, None

    def write(self, text):
        if not self.lost:
            try:
                return self._stream.write(text)
            except OSError as exc:
                self._lose(exc)
        return len(text)

    def flush(self):
        if not self.lost:
            try:
                self._stream.flush()
            except OSError as exc:
                self._lose(exc)

    def _lose(self, exc: OSError) -> None:
        if isinstance(exc, (BlockingIOError, InterruptedError)):    # a full pipe or a signal: not lost
            raise exc
        self.lost = "closed" if exc.errno in OUTPUT_GONE else f"could not be written ({exc.strerror or exc})"
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self._stream.fileno())
            finally:
                os.close(null)
        except (OSError, ValueError, AttributeError):    # no descriptor of its own (a test's capture)
            pass

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded_output():
    """sys.stdout and sys.stderr as ``GuardedStream``s for the block (the command line's whole run)."""
    old = sys.stdout, sys.stderr
    # None: started with the descriptor closed (`2>&-`) or without a console; print() skips it,
    # but the progress bar would fail on it: it writes to os.devnull instead
    with contextlib.ExitStack() as closing:
        sys.stdout, sys.stderr = (GuardedStream(s if s is not None else
                                                closing.enter_context(open(os.devnull, "w", encoding="utf-8")))
                                  for s in old)
        try:
            yield
        finally:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()      # a pipe's last buffered lines: found gone here, not at exit
            sys.stdout, sys.stderr = old
