"""The student's prints in a check: read from the worker as they come, the first lines shown.

A student's ``print`` goes to the worker's stderr, which the checker reads in a
thread of its own to the end, whatever its size, so that a flood of prints
never blocks the worker; the first ``OUTPUT_LIMIT`` bytes are kept, and the
report shows the first lines under its verdict, with terminal escapes removed.
"""
from __future__ import annotations

import os
import threading

OUTPUT_LIMIT = 64 * 1024      # bytes of the student's prints kept
SHOWN_LINES = 10


class Output:
    """The worker's stderr (the student's prints), read as it comes: the first ``limit`` bytes kept."""

    def __init__(self, stream, limit: int = OUTPUT_LIMIT):
        self.head = bytearray()
        self.total = self.newlines = 0
        self.ends_line = True
        self.limit = limit
        self.thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self.thread.start()

    def _drain(self, stream) -> None:
        # read to the end whatever the size, so that a flood of prints never blocks the worker
        while True:
            try:
                chunk = os.read(stream.fileno(), 1 << 16)
            except (OSError, ValueError):
                return
            if not chunk:
                return
            if len(self.head) < self.limit:
                self.head += chunk[:self.limit - len(self.head)]
            self.total += len(chunk)
            self.newlines += chunk.count(b"\n")
            self.ends_line = chunk.endswith(b"\n")

    def render(self, shown: int = SHOWN_LINES, width: int = 160) -> list[str]:
        """The lines a report shows under its verdict: how much was printed, and the first lines."""
        if not self.total:
            return []
        n = self.newlines + (not self.ends_line)
        lines = self.head.decode("utf-8", "replace").splitlines()[:shown]
        size = f"{self.total / 1e6:.1f} MB" if self.total >= 1e6 else f"{self.total} bytes"
        out = [f"  your code printed {n} line{'s' * (n != 1)} ({size})"
               + (f", the first {len(lines)} shown:" if n > len(lines) else ":")]
        for line in lines:
            line = line.translate(_CONTROL)
            out.append(f"    | {line[:width]}" + (" ..." if len(line) > width else ""))
        return out


_CONTROL = {c: "?" for c in range(32) if c != 9}        # no terminal escapes from the student's prints
