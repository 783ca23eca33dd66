"""Process-wide memory setting of the accelerated CPU path: glibc's malloc keeps what it frees."""
from __future__ import annotations

import os

_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4     # mallopt parameters, <malloc.h>
_malloc_tuned = None


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep freed memory for reuse instead of returning it.

    A training step allocates and frees the same arrays every time (about a
    gigabyte for ``mini``).  By default glibc hands freed memory back to the
    kernel, so the next step takes it again page by page: 38,000 page faults
    per ``mini`` step, each one a trip into the kernel to map and zero 4 KiB,
    a quarter of the step on a 2-core machine.  Large arrays are worse: glibc
    gives every allocation over 32 MiB a mapping of its own (the MLM logits
    and their gradient, 74 MB each for ``mini``) and unmaps it when freed, so
    each step the kernel finds and zeroes fresh huge pages for them again
    (the MLM cross-entropy's backward took 45 ms in a step instead of 11).
    Two settings stop both: memory freed at the top of the heap stays with
    the process (trim threshold), and every allocation, whatever its size,
    comes from the heap rather than from a mapping of its own (mmap count 0).
    Peak memory is unchanged; the process simply keeps its peak between
    steps.

    Made when a model first chooses the fast CPU ops.  Does nothing where malloc
    is not glibc's.  Returns whether the settings were applied.
    """
    global _malloc_tuned
    if _malloc_tuned is None:
        _malloc_tuned = False
        if os.name == "posix":
            try:
                import ctypes
                libc = ctypes.CDLL(None)
                mallopt = libc.mallopt
                _malloc_tuned = bool(mallopt(_M_TRIM_THRESHOLD, (1 << 31) - 1)
                                     and mallopt(_M_MMAP_MAX, 0))
            except (OSError, AttributeError):   # no glibc (macOS, musl): nothing to do
                pass
    return _malloc_tuned

