"""The sandbox a submission runs in when a class is graded: bubblewrap, a private root, nothing shared.

``grade`` runs every student's code as the lecturer's own user, on the
lecturer's machine.  A worker process (``sandbox.Worker``) already keeps the
verdict out of the student's reach; ``Confinement`` keeps everything else
out of it too.  Each worker starts inside ``bwrap`` (bubblewrap, the sandbox
Flatpak is built on) with

* a private root that holds only the Python environment, read-only (the
  interpreter, the standard library, site-packages and the ``minibert``
  package), the worker's own four modules, and the student's one file,
  copied into a private folder: no classmate's file, no output folder, no
  solutions, no case tables, no checkers, no home folder;
* new namespaces: its own process IDs (the grader, the other workers and
  the lecturer's processes cannot be seen or signalled, and every process
  the student started dies with the check), no network, its own user (the
  student's code runs as ``nobody``, without capabilities), no further
  namespaces;
* a clean environment (a few variables of its own, none of the grader's),
  a small private /tmp, and limits on processes, file size, address space,
  open files and CPU time (set by the worker, soft and hard alike, before
  the student's file is imported).

``Confinement.find()`` builds it once and tries it; where it cannot be made
(not Linux, no ``bwrap``, no user namespaces) it raises ``Unavailable`` with
the reason in one line, and ``grade`` refuses to run unless told
``--no-sandbox``.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path

from .cgroups import CheckGroups, run_groups

HERE = Path(__file__).resolve().parent
# what of the exercises package the worker needs: it runs the student's code and nothing else
WORKER_MODULES = ("__init__.py", "worker.py", "codec.py", "protocol.py", "pieces.py")
INSIDE = "/grader"                      # the worker's modules, and the trace file, in the sandbox
SUBMISSION = "/submission"              # the student's file, in the sandbox
TMP_BYTES = 16 << 20                    # the sandbox's /tmp, a tmpfs of its own
NOBODY = 65534
# system folders the interpreter and its libraries may load from, read-only where they exist
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives")
# one BLAS thread per worker: the checks run several workers at a time
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
INSTALL = ("apt install bubblewrap (Debian, Ubuntu), dnf install bubblewrap (Fedora), "
           "pacman -S bubblewrap (Arch)")


def worker_args(package_parent: str) -> list[str]:
    """The worker's interpreter arguments: in isolated mode (-I: no PYTHON* variables, no user site,
    not the current folder on sys.path) it finds the exercises package by this path alone;
    -u: the student's prints unbuffered."""
    return ["-I", "-u", "-c", f"import sys; sys.path.insert(0, {package_parent!r}); "
                              "from exercises.worker import main; main()"]


class Unavailable(Exception):
    """No sandbox can be made here; the message says why, in one line."""


class Confinement:
    """How to start a worker inside bubblewrap; ``command`` gives the command line for one worker."""

    _found: "Confinement | Unavailable | None" = None

    def __init__(self, bwrap: str, python: str, binds: list[str], cgroups: dict | None = None):
        self.bwrap, self.python, self.binds = bwrap, python, binds
        self.cgroups = cgroups or {}     # {controller: a cgroup each worker gets a child of} (as root)

    # -------------------------------------------------------------------------- making one
    @classmethod
    def find(cls) -> "Confinement":
        """The sandbox for this machine, built and tried once per process; raises ``Unavailable``."""
        if cls._found is None:
            try:
                cls._found = cls._build()
            except Unavailable as exc:
                cls._found = exc
        if isinstance(cls._found, Unavailable):
            raise cls._found
        return cls._found

    @classmethod
    def _build(cls) -> "Confinement":
        if not sys.platform.startswith("linux"):
            raise Unavailable(f"no sandbox on {sys.platform}: grading confines each submission with "
                              "bubblewrap, which needs Linux")
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise Unavailable(f"no sandbox: bubblewrap (bwrap) is not installed; {INSTALL}")
        python = sys.executable     # a venv is known by the path it is started from
        binds = _environment()
        exposed = [b for b in binds if _inside(HERE, b)]
        if exposed:
            raise Unavailable(f"no sandbox: the Python environment ({exposed[0]}) holds the exercises "
                              f"folder {HERE}, so its solutions could not be hidden; install minibert "
                              "into an environment outside the repository")
        made = cls(bwrap, python, binds, run_groups())
        made._try()
        return made

    @property
    def limits_processes(self) -> bool:
        """Whether each check's processes are counted: by the worker's RLIMIT_NPROC for an ordinary
        user, by a pids cgroup for root (Linux exempts root's own user from RLIMIT_NPROC, and the
        sandbox's user is the grader's outside it)."""
        return os.geteuid() != 0 or "pids" in self.cgroups

    def _try(self) -> None:
        """Start one worker in a sandbox (it imports NumPy, then ends at the end of its empty input);
        a failure becomes ``Unavailable`` with bwrap's reason."""
        with tempfile.TemporaryDirectory(prefix="exercises-sandbox-") as folder:
            work = Workspace(Path(folder))
            argv = self.command(work, worker_args(INSIDE))
            try:
                res = subprocess.run(argv, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise Unavailable(f"no sandbox: bwrap could not be started ({exc})") from None
        if res.returncode != 0:
            why = (res.stderr or res.stdout).decode("utf-8", "replace").strip().splitlines()
            reason = why[-1] if why else f"exit status {res.returncode}"
            hint = ""
            if "namespace" in reason or "Operation not permitted" in reason:
                hint = "; user namespaces look disabled (try: unshare -Ur true)"
            raise Unavailable(f"no sandbox: bwrap failed: {reason[:300]}{hint}")

    # -------------------------------------------------------------------------- one worker
    def command(self, work: "Workspace", python_args: list[str], info_fd: int | None = None) -> list[str]:
        """``bwrap ... python PYTHON_ARGS`` for one worker, whose private folders are ``work``'s;
        info_fd: a pipe's end for bwrap's JSON about the sandbox (``Workspace.watch_init``)."""
        argv = [self.bwrap,
                "--unshare-all", "--unshare-user", "--disable-userns",     # pid, net, ipc, uts, cgroup, user
                "--uid", str(NOBODY), "--gid", str(NOBODY), "--cap-drop", "ALL",
                "--die-with-parent", "--new-session",                     # no process outlives the check
                "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
                "--setenv", "LANG", "C.UTF-8", "--setenv", "PYTHONDONTWRITEBYTECODE", "1"]
        for var, value in ONE_THREAD.items():
            argv += ["--setenv", var, value]
        for path in SYSTEM:
            if os.path.islink(path):              # /lib -> usr/lib on a merged /usr
                argv += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                argv += ["--ro-bind", path, path]
        # /tmp first: a Python environment under /tmp (a venv in a clone there) is bound over it
        argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
        for path in SYSTEM_FILES:
            argv += ["--ro-bind-try", path, path]
        for path in self.binds:
            argv += ["--ro-bind", path, path]
        for name in WORKER_MODULES:
            argv += ["--ro-bind", str(HERE / name), f"{INSIDE}/exercises/{name}"]
        argv += ["--bind", str(work.trace), f"{INSIDE}/trace.txt",
                 "--ro-bind", str(work.submission), SUBMISSION, "--chdir", SUBMISSION,
                 # the root and /dev are tmpfs too: read-only, so that no file in them takes memory
                 "--remount-ro", "/dev", "--remount-ro", "/"]
        if info_fd is not None:               # bwrap says there the host's PID of the sandbox's init
            argv += ["--info-fd", str(info_fd)]
        return argv + ["--", self.python, *python_args]


class Workspace:
    """A worker's private folders on the grader's side: the submission (read-only inside) and the
    trace; as root, its cgroups (``cgroups.CheckGroups``); and the sandbox's init."""

    def __init__(self, root: Path, cgroups: dict | None = None, memory_mb: float = 2048):
        self.root = root
        self.groups = CheckGroups(cgroups or {}, memory_mb)
        self.enter = self.groups.enter           # preexec_fn
        self.submission = root / "submission"
        self.submission.mkdir(mode=0o755)
        self.trace = root / "trace.txt"          # the worker's stack dumps: it writes them, the grader reads
        self.trace.touch(mode=0o600)
        self.init = None                         # a pidfd of the sandbox's init, once bwrap has said it

    def watch_init(self, info) -> None:
        """Read bwrap's info (``{"child-pid": N}``) from the pipe ``info`` and hold a pidfd of that
        process, the sandbox's init: killing it ends every process of the sandbox (a PID namespace
        ends with its init), even one that has undone ``--die-with-parent`` by ptrace."""
        def read():
            try:
                with os.fdopen(info, "rb") as f:
                    pid = json.loads(f.read(4096).decode() or "{}").get("child-pid")
                if isinstance(pid, int) and hasattr(os, "pidfd_open"):
                    self.init = os.pidfd_open(pid)
            except (OSError, ValueError):
                pass
        threading.Thread(target=read, daemon=True).start()

    def end(self) -> None:
        """SIGKILL to the sandbox's init and to whatever is left in its cgroups."""
        if self.init is not None:
            try:
                signal.pidfd_send_signal(self.init, signal.SIGKILL)
            except OSError:
                pass
        self.groups.kill()

    def close(self) -> None:
        """Remove the folders, the pidfd and the cgroups (after ``end``)."""
        shutil.rmtree(self.root, ignore_errors=True)
        if self.init is not None:
            os.close(self.init)
            self.init = None
        self.groups.remove()

    def place(self, name: str, data: bytes) -> tuple[Path, str]:
        """Copy the student's file in: (its path here, its path inside the sandbox)."""
        here = self.submission / f"{name}.py"
        here.write_bytes(data)
        return here, f"{SUBMISSION}/{name}.py"


def _environment() -> list[str]:
    """The folders the worker's interpreter imports from, read-only in the sandbox: the prefixes,
    the standard library and site-packages, and where NumPy, SciPy and minibert live (an editable
    install of minibert lies outside them), each with its symbolic links resolved."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable))}
    paths.update(sysconfig.get_paths().get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib"))
    paths.update(site.getsitepackages())
    for module in ("numpy", "scipy", "minibert"):
        try:
            spec = __import__(module).__file__
        except ImportError:
            continue
        paths.add(os.path.dirname(spec))
    real = {os.path.realpath(p) for p in paths if p and os.path.isdir(p)}
    real |= {p for p in paths if p and os.path.isdir(p) and not os.path.islink(p)}
    # a folder inside another one is bound with it; the system folders are bound anyway
    kept = sorted(p for p in real if not any(_inside(p, q) and p != q for q in real)
                  and not any(_inside(p, s) for s in SYSTEM))
    return kept


def _inside(path, folder) -> bool:
    path, folder = Path(path), Path(folder)
    return path == folder or folder in path.parents
