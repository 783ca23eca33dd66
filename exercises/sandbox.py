"""Checks with the student's code in a worker process: a verdict that code cannot fake, hang or silence.

``check_isolated(name, source)`` runs exercise ``name``'s checker in this
process on a ``RemoteModule``: every call of a student function goes to a
worker process (``worker.py``) that runs it and sends back what it returned
or raised, as data.  The reference computations, the numerical gradients and
every comparison run here, on that data, so the student's code cannot reach
the checker's modules, and whatever it does to its own process (patch NumPy,
print without end, exit, crash, loop forever) ends at worst in a FAIL line
that says what happened.  The verdict and the exit status are this process's.

Limits, per exercise: ``timeout`` seconds for the whole check (the worker is
killed when they run out, and the report names the function and the line it
was in), ``memory_mb`` of address space for the worker where the platform
can set one, and the first ``output.OUTPUT_LIMIT`` bytes of the student's prints
(the rest is read and dropped).  ``run_check`` on a module imported into this
process still works, for self-checks in a notebook, but it is not a grade.
"""
from __future__ import annotations

import linecache
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import types
from pathlib import Path

import numpy as np

from . import file_of
from .output import Output
from .codec import Decoder, Encoder
from .confine import INSIDE, ONE_THREAD, Confinement, Workspace, worker_args
from .protocol import ProtocolError, read_frame, write_frame
from .remote import MAX_MESSAGE, Outcome, RemoteModule, WorkerGone, rebuild_exception

HERE = Path(__file__).resolve().parent
DEFAULT_TIMEOUT = 30.0        # s per exercise; each solution needs about 1 s at most on a slow laptop
# the capstone trains a model: its right answer needs about a minute on a laptop, its diagnosis a few more
TIMEOUTS = {"bert": 900.0}
DEFAULT_MEMORY_MB = 2048      # the solutions need about 300 MB (most of it NumPy and SciPy)

HINT_TIMEOUT = ("a loop that never ends, or code far too slow: look at the loop at that line (a while "
                "loop whose condition never changes?). A right solution needs well under a second")
HINT_EXIT = ("do not call sys.exit(), exit(), quit() or os._exit() in your functions: return the result, "
             "or let an exception show what went wrong")
HINT_CRASH = ("the Python process itself crashed (in ctypes, a C extension, or an array built over memory "
              "it does not own, as np.lib.stride_tricks can): NumPy code alone does not do this")
HINT_PROTOCOL = "return plain results (NumPy arrays, numbers, lists, tuples), and do not write to the checker's pipes"
_SIGNALS = {"SIGSEGV": "a segmentation fault", "SIGBUS": "a bus error", "SIGFPE": "a floating-point exception",
            "SIGILL": "an illegal instruction", "SIGABRT": "an abort", "SIGKILL": "SIGKILL (out of memory?)"}


class LoadError(Exception):
    def __init__(self, message, hint="fix the file so that Python can import it, then run the check again"):
        super().__init__(message)
        self.hint = hint


# ------------------------------------------------------------------------------ the worker
class Worker:
    """One worker process, for one exercise; ``load`` starts its clock."""

    def __init__(self, memory_mb: float = DEFAULT_MEMORY_MB, confine: Confinement | None = None):
        """confine: start the worker in that sandbox (``grade``); None: as a plain process (``check``,
        a student's own code on the student's own machine)."""
        session = {"start_new_session": True} if os.name == "posix" else {}   # its own group: killpg
        self.space = None
        if confine is not None:
            self.space = Workspace(Path(tempfile.mkdtemp(prefix="exercises-worker-")), confine.cgroups, memory_mb)
            info, told = os.pipe()
            session.update(preexec_fn=self.space.enter, pass_fds=(told,))
            argv, env = confine.command(self.space, worker_args(INSIDE), info_fd=told), {}
            self.trace_path, self.trace_inside = str(self.space.trace), f"{INSIDE}/trace.txt"
        else:
            argv = [sys.executable, *worker_args(str(HERE.parent))]
            env = dict(os.environ, **ONE_THREAD)
            fd, self.trace_path = tempfile.mkstemp(prefix="exercises-worker-", suffix=".txt")
            os.close(fd)
            self.trace_inside = self.trace_path
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, **session)
        if self.space is not None:
            os.close(told)
            self.space.watch_init(info)
        self.output = Output(self.proc.stderr)
        self.memory_mb = memory_mb
        self.timer = self.path = self.copy = self.inside = None
        self.timeout = 0.0
        self.doing = self.expired = None

    def load(self, name: str, path: Path, timeout: float, data: bytes | None = None) -> "RemoteModule":
        self.path = Path(path).resolve()
        if self.space is not None:        # a copy of the one file, in the sandbox's private folder
            self.copy, self.inside = self.space.place(name, self.path.read_bytes() if data is None else data)
            sys_path = None               # the sandbox's own: its environment, nothing of the grader's
        else:
            self.copy, self.inside = self.path, str(self.path)
            sys_path = [os.path.abspath(p) for p in sys.path]
        self.timeout = timeout
        self.timer = threading.Timer(timeout, self._expire)
        self.timer.daemon = True
        self.timer.start()
        request = {"op": "load", "name": name, "path": self.inside, "memory": self.memory_mb,
                   "sys_path": sys_path, "trace": self.trace_inside, "timeout": timeout,
                   "confined": self.space is not None}
        answer, _ = self._request(request, [], f"the import of {self.path.name}")
        if "load_error" in answer:
            raise LoadError(str(answer["load_error"])[:MAX_MESSAGE])
        functions = answer.get("functions")
        if not isinstance(functions, dict):
            raise WorkerGone("the worker process sent back something the checker cannot read", HINT_PROTOCOL)
        return RemoteModule(self, self.path, functions)

    def call_each(self, func: str, calls: list) -> list:
        """Run ``func(*args, **kwargs)`` for each (args, kwargs) of ``calls`` in the worker, in one message.

        Returns one outcome per call, a function that returns the call's result
        or raises its exception; called in order, each first writes back into
        the checker's arguments what that call changed in place, so the checks
        see each call's effects as they would in-process.  The worker stops at
        the first exception: the list ends with that call's outcome.
        """
        enc = Encoder()
        request = {"op": "call", "func": func, "calls": {"t": "l", "items": [
            {"t": "tu", "items": [enc.sequence(args), enc(dict(kwargs))]} for args, kwargs in calls]}}
        answer, dec = self._request(request, enc.blobs, func)
        results = [self._read(dec, node) for node in _list(answer.get("ok"))]
        changes = {}
        for entry in _list(answer.get("changes")):
            k, pairs = entry if isinstance(entry, list) and len(entry) == 2 else (None, None)
            if type(k) is not int or not 0 <= k < len(calls) or not isinstance(pairs, list):
                raise self._unreadable("a change to an argument of no call")
            changes[k] = [(key, self._read(dec, node)) for key, node in map(_pair, pairs)]
        exc = answer.get("exc")
        if (len(results) != len(calls)) if exc is None else (len(results) >= len(calls)):
            raise self._unreadable("not one result per call")
        outcomes = []
        for k, (args, kwargs) in enumerate(calls[:len(results) + (exc is not None)]):
            error = rebuild_exception(exc) if k == len(results) else None
            outcomes.append(Outcome(args, kwargs, changes.get(k, []), results[k] if error is None else None, error))
        return outcomes

    def swap(self, pieces) -> None:
        """From now on the student's functions call minibert's ``pieces`` in place of theirs (``pieces.py``)."""
        self._request({"op": "swap", "pieces": list(pieces)}, [], "the swap of pieces")

    def map(self, func: str, args, kwargs, index: int, variants: np.ndarray, seed):
        """[func(*args', **kwargs)[0] for each row of variants in place of args[index]], in one message."""
        enc = Encoder()
        request = {"op": "map", "func": func, "args": enc.sequence(args), "kwargs": enc(dict(kwargs)),
                   "index": index, "variants": enc(variants), "seed": seed}
        answer, dec = self._request(request, enc.blobs, f"{func} (called by the gradient check)")
        if "exc" in answer:
            raise rebuild_exception(answer["exc"])
        outs = [self._read(dec, node) for node in _list(answer.get("ok"))]
        if len(outs) != len(variants):
            raise self._unreadable("not one output per input")
        return outs

    def _unreadable(self, what: str) -> WorkerGone:
        self.kill()
        return WorkerGone(f"the worker process sent back something the checker cannot read ({what})"[:MAX_MESSAGE],
                          HINT_PROTOCOL)

    def _request(self, request: dict, blobs: list, doing: str):
        self.doing = doing
        try:
            write_frame(self.proc.stdin, request, blobs)
            answer, blob = read_frame(self.proc.stdout)
        except (EOFError, OSError):            # a broken pipe: the worker is gone
            raise self._gone(doing) from None
        except ProtocolError as exc:
            self.kill()
            raise WorkerGone(f"the worker process sent back something the checker cannot read ({exc})",
                             HINT_PROTOCOL) from None
        finally:
            self.doing = None
        if "exit" in answer:                   # sys.exit in the student's code, caught by the worker
            self.kill()
            raise WorkerGone(_ended(str(answer["exit"])[:100], str(answer.get("where", ""))[:500], doing),
                             HINT_EXIT)
        if "internal" in answer:
            raise WorkerGone(f"the worker could not run {doing}: {str(answer['internal'])[:500]}")
        return answer, Decoder(blob)

    def _read(self, dec: Decoder, node):
        try:
            return dec.piece(node)
        except Exception as exc:               # whatever the bytes were: never a crash of the checker
            raise self._unreadable(f"{type(exc).__name__}: {exc}") from None

    def _expire(self) -> None:
        self.expired = self.doing or "the checks"
        self.kill()

    def _gone(self, doing: str) -> WorkerGone:
        """Why the worker stopped answering, in one line, with the student's line when there is one."""
        if self.expired:
            what = self.expired if self.expired == doing else "the checks"
            return WorkerGone(f"{what} did not return within {self.timeout:g} s (an endless loop?)"
                              f"{self._where()[0]}", HINT_TIMEOUT)
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.wait()
        where, exit_call = self._where()
        if self.space is not None and code > 128 and exit_call is None:
            code = 128 - code          # bwrap passes a signal's end on as the shell does: 128 + its number
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
            return WorkerGone(f"the checker's worker process crashed with {_SIGNALS.get(name, name)} "
                              f"(signal {-code}) while {doing} ran{where}", HINT_CRASH)
        return WorkerGone(_ended(exit_call or f"exit status {code}", where, doing), HINT_EXIT)

    def _where(self) -> tuple[str, str | None]:
        """('  (at gelu.py line 7 : <code>)', 'os._exit(0)' or None) from the worker's last stack dump."""
        try:
            with open(self.trace_path, encoding="utf-8", errors="replace") as f:
                text = f.read(1 << 18)
        except OSError:
            return "", None
        exits = re.findall(r"^os\._exit\((.{0,40})\)$", text, re.M)
        last = text.rsplit("(most recent call first):", 1)[-1]
        for file, line in re.findall(r'^\s*File "(.*)", line (\d+)', last, re.M):
            if self.inside is not None and file == self.inside:
                code = linecache.getline(str(self.copy), int(line)).strip()
                return (f"  (at {self.path.name} line {line}{' : ' + code if code else ''})",
                        f"os._exit({exits[-1]})" if exits else None)
        return "", (f"os._exit({exits[-1]})" if exits else None)

    def kill(self) -> None:
        try:
            if os.name == "posix":
                os.killpg(self.proc.pid, signal.SIGKILL)     # the worker and whatever it started
            else:
                self.proc.kill()
        except (ProcessLookupError, PermissionError, OSError):
            pass
        if self.space is not None:                           # the sandbox's init, and its cgroups
            self.space.end()

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.proc.poll() is None:
            try:
                write_frame(self.proc.stdin, {"op": "bye"}, [])
                self.proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        self.proc.wait()
        self.output.thread.join(timeout=2)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
        if self.space is not None:
            self.space.close()
        else:
            try:
                os.unlink(self.trace_path)
            except OSError:
                pass


def _list(value) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise WorkerGone("the worker process sent back something the checker cannot read", HINT_PROTOCOL)
    return value


def _pair(value):
    if not isinstance(value, list) or len(value) != 2:
        raise WorkerGone("the worker process sent back something the checker cannot read", HINT_PROTOCOL)
    return value


def _ended(call: str, where: str, doing: str) -> str:
    at = re.sub(r"^\s*\(at (.*?)(?: : .*)?\)$", r" at \1", where, flags=re.S) if where else ""
    return f"the student's code ended the checker's worker process ({call}{at}) while {doing} ran"


# ------------------------------------------------------------------------------ checking a file
def source_file(name: str, source: str = "stubs") -> Path:
    """The file to check for exercise ``name``: ``source`` is "stubs", "solutions", a .py file or a directory
    holding NAME.py (a question: questions.py).  Raises ``LoadError`` with a hint that fits when there is none."""
    stem = file_of(name)
    if source in ("stubs", "solutions"):
        if source == "solutions" and not (HERE / "solutions").is_dir():
            raise LoadError("this copy of the exercises has no solutions (the student version)",
                            hint="check your own files: python -m exercises check NAME")
        return HERE / source / f"{stem}.py"
    path = Path(source)
    if path.is_dir():
        path = path / f"{stem}.py"
        if path.is_dir():
            raise LoadError(f"{path} is a folder, not a file", hint=f"put your code in a file named {stem}.py")
        if not path.is_file():
            raise LoadError(f"no such file: {path}",
                            hint=f"--path DIR reads DIR/{stem}.py: name your file {stem}.py, "
                                 "or give --path the file itself")
    if not path.is_file():
        raise LoadError(f"no such file: {path}",
                        hint="the file does not exist: check the path (a relative path starts from "
                             "the folder you run the command in)")
    return path


def default_timeout(name: str) -> float:
    return TIMEOUTS.get(name, DEFAULT_TIMEOUT)


def check_isolated(name: str, source: str = "stubs", timeout: float | None = None,
                   memory_mb: float = DEFAULT_MEMORY_MB, worker: Worker | None = None,
                   confine: Confinement | None = None, data: bytes | None = None, parts=None):
    """Check exercise ``name`` with the student's code in a worker process; return the ``Report``.

    worker: one started in advance (``check all`` starts the next exercise's
    while it checks this one); it is closed here in any case.  data: the file's bytes (``grade``'s);
    parts: check only the parts of these functions (a notebook's, ``run_check``'s ``functions``)."""
    from .checks import run_check
    from .report import Report

    report = None
    try:
        path = source_file(name, source)
        worker = worker or Worker(memory_mb, confine)
        report = run_check(name, worker.load(name, path, timeout or default_timeout(name), data), parts)
    except LoadError as exc:
        report = Report(name)
        report.fail(str(exc), exc.hint)
    except WorkerGone as gone:               # at the import: the checks never started
        report = Report(name, types.SimpleNamespace(__file__=str(path)))
        report.fail(gone.message, gone.hint)
    finally:
        if worker is not None:
            worker.close()
    if worker is not None:
        report.output = worker.output.render()
    return report
