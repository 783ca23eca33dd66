"""Control groups for the grader's sandbox, when it runs as root: each check's processes and memory.

An ordinary user's sandbox is counted by RLIMIT_NPROC (the worker sets it), but Linux exempts
root's own user from that limit, and the sandbox's user is the grader's outside it.  So as root
each grading run makes a cgroup of its own under the one it runs in (cgroup v1: one hierarchy
per controller; cgroup v2: from its root, where it offers the controller), and each check a
child of it: ``pids.max`` for its processes and threads, ``memory.max`` for the memory of the
whole check (the address-space limit is per process, and a check may start several).  Where
they cannot be made (no root, no writable hierarchy) ``run_groups`` gives none, and the grader
says so once.
"""
from __future__ import annotations

import atexit
import os
import signal
import tempfile
import time
from pathlib import Path

from .worker import PROCESSES           # the same count as the worker's RLIMIT_NPROC

# each controller's limits on one check, from --memory-mb (cgroup v2 names, then v1's)
LIMITS = {"pids": lambda mb: [("pids.max", PROCESSES)],
          "memory": lambda mb: [("memory.max", int(mb) << 20), ("memory.swap.max", 0),
                                ("memory.limit_in_bytes", int(mb) << 20)]}


def run_groups() -> dict:
    """As root, {controller: a cgroup of this grading run's own} for pids and memory; else {}."""
    if os.geteuid() != 0:
        return {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return {}
    own = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            own[c] = path
    found = {}
    for controller in LIMITS:
        if controller in own:                              # cgroup v1: a hierarchy per controller
            base = f"/sys/fs/cgroup/{controller}{own[controller].rstrip('/')}"
        elif own.get("") == "/":                           # cgroup v2, from its root
            try:
                if controller not in Path("/sys/fs/cgroup/cgroup.subtree_control").read_text().split():
                    continue
            except OSError:
                continue
            base = "/sys/fs/cgroup"
        else:
            continue
        try:
            made = tempfile.mkdtemp(prefix="minibert-grade-", dir=base)
        except OSError:
            continue
        atexit.register(_remove_tree, made)
        found[controller] = made
    return found


class CheckGroups:
    """One check's cgroups, children of the run's: made with their limits, joined, killed, removed."""

    def __init__(self, bases: dict, memory_mb: float):
        self.paths = []
        for controller, base in bases.items():
            try:
                made = tempfile.mkdtemp(prefix="worker-", dir=base)
                self.paths.append(made)
                for name, value in LIMITS[controller](memory_mb):
                    if os.path.exists(os.path.join(made, name)):
                        Path(made, name).write_text(f"{value}\n")
            except OSError:
                continue

    def enter(self) -> None:
        """Put this process in them (``preexec_fn``: bwrap and all it starts are counted there)."""
        for path in self.paths:
            with open(os.path.join(path, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))

    def kill(self) -> None:
        for path in self.paths:
            try:
                if os.path.exists(os.path.join(path, "cgroup.kill")):        # cgroup v2
                    Path(path, "cgroup.kill").write_text("1\n")
                    continue
                for pid in Path(path, "cgroup.procs").read_text().split():   # v1: each in turn
                    os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass

    def remove(self) -> None:
        """Remove them once their processes are gone (a moment after the kill)."""
        for path in self.paths:
            for _ in range(100):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    self.kill()
                    time.sleep(0.02)
        self.paths = []


def _remove_tree(folder: str) -> None:
    """The run's cgroup at exit: what checks left (none, normally), then itself."""
    try:
        for child in os.listdir(folder):
            path = os.path.join(folder, child)
            if os.path.isdir(path):
                try:
                    os.rmdir(path)
                except OSError:
                    pass
        os.rmdir(folder)
    except OSError:
        pass
