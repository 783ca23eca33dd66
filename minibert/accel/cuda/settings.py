"""The GPU ops' switches read from the environment at import (MINIBERT_ATTENTION, MINIBERT_CUBLAS).

Read where an exception would stop any use of the GPU's ops: a value the switch does not take is
said once on stderr, with the values it does take, and leaves the switch off.
"""
from __future__ import annotations

import os
import sys


def switch(variable: str, on: str, on_means: str, off_means: str) -> bool:
    """True when ``$variable`` is ``on``; unset or empty is off; anything else is named, and off."""
    value = os.environ.get(variable, "")
    if value not in ("", on):
        print(f"minibert: warning: {variable}={value!r} is not a value it takes: {on!r} ({on_means}) or unset "
              f"({off_means}); using the {off_means}", file=sys.stderr)
    return value == on
