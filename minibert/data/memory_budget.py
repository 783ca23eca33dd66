"""Will the pre-training instances of a corpus fit in memory?  Asked before they are cut.

Cutting a large corpus many times (``dupe_factor``) can ask for more memory than the
machine has; the estimate below refuses such a run at once, with the most that fits,
rather than letting it swap or be killed an hour in.
"""
from __future__ import annotations

import os

# Cut instances hold each corpus token about 1.5 times (NotNext segments repeat text of
# other documents) as an 8-byte list entry, plus every instance's own objects: 16 to 22
# bytes per corpus token and pass, measured on the built-in corpus at 32 to 512 tokens
# per sequence. The low end is used, so that no run that fits is refused.
BYTES_PER_INSTANCE_TOKEN = 16
ASSUMED_MEMORY = 16 * 2**30  # when the free memory cannot be read


def _read_int(path: str, field_name: str | None = None) -> int | None:
    """An integer from a /proc or /sys file (the value after ``field_name:``), or None."""
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":") if field_name else ("", "", line)
                if key == (field_name or ""):
                    words = value.split()
                    unit = 1024 if words[1:] == ["kB"] else 1
                    return int(words[0]) * unit if words and words[0].isdigit() else None
    except OSError:
        pass
    return None


def available_memory() -> tuple[int, bool]:
    """Bytes of memory that new data can take, and whether that was measured (False: assumed).

    The smallest of what the system (``MemAvailable``) and a container limit (cgroup v2)
    leave; where neither can be read, the free physical pages; else ``ASSUMED_MEMORY``.
    """
    candidates = [_read_int("/proc/meminfo", "MemAvailable")]
    limit, used = _read_int("/sys/fs/cgroup/memory.max"), _read_int("/sys/fs/cgroup/memory.current")
    if limit is not None and used is not None:
        candidates.append(max(limit - used, 0))
    found = [c for c in candidates if c is not None]
    if not found:
        try:
            found = [os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")]
        except (AttributeError, ValueError, OSError):
            return ASSUMED_MEMORY, False
    return min(found), True


def _size(n_bytes: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n_bytes < 1000:
            return f"{n_bytes:.0f} {unit}"
        n_bytes /= 1000
    return f"{n_bytes:,.0f} TB"


def check_instances_fit(num_tokens: int, dupe_factor: int, unit: str = "tokens") -> None:
    """Refuse, before anything is allocated, a ``dupe_factor`` whose instances cannot fit in memory.

    Cutting the corpus ``dupe_factor`` times keeps about ``num_tokens * dupe_factor``
    tokens in instances, ``BYTES_PER_INSTANCE_TOKEN`` bytes each. ``unit`` names what
    ``num_tokens`` counts ("words" for a first check before tokenizing: there are at
    least as many tokens).
    """
    need = num_tokens * dupe_factor * BYTES_PER_INSTANCE_TOKEN
    free, measured = available_memory()
    if need <= free:
        return
    per_pass = max(num_tokens * BYTES_PER_INSTANCE_TOKEN, 1)
    where = "available" if measured else "assumed (the free memory could not be read)"
    advice = (f"the most that could fit is {free // per_pass:,}" if free >= per_pass
              else "not even 1 fits: use a smaller corpus or a machine with more memory")
    raise ValueError(
        f"dupe_factor={dupe_factor:,} (--dupe-factor) cuts the corpus's {num_tokens:,} {unit} into "
        f"instances {dupe_factor:,} times: about {_size(need)} in memory, more than the {_size(free)} "
        f"{where}; {advice} (minibert masks afresh every epoch, so 1 or 2 are enough).")
