"""SIGINT and SIGTERM during the loop: save and stop after the current step."""
from __future__ import annotations

import signal


class StopSignal:
    """Turns SIGINT (Ctrl-C) and SIGTERM into a request to save and stop after the current step."""

    def __init__(self):
        self.received, self._old = None, {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread: leave the defaults alone
                pass
        return self

    def _handle(self, signum, frame):
        self.received = signal.Signals(signum).name

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)


