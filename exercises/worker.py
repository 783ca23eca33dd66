"""The worker process of an isolated check: it runs the student's functions and nothing else.

The checker (``sandbox.py``) starts it with ``python -I -u`` and talks to it
over its stdin and stdout (``protocol.py``); the student's prints go to
stderr, which the checker reads into a bounded buffer.  The worker imports
the student's file, calls its functions on the inputs the checker sends, and
sends back what they returned or raised, and the arguments each call changed
in place (a function that changes its inputs must be caught doing it).  It
decides nothing: every check runs in the checker's process on the data sent
back, so nothing the student's code does here (patch a module, print, exit,
crash, loop) can change a verdict.  The checker imports this module too, for
the messages that name the student's line.
"""
from __future__ import annotations

import builtins
import copy
import faulthandler
import importlib.util
from importlib.machinery import SourceFileLoader
import inspect
import os
import sys
import threading
import time
import traceback
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from .codec import Decoder, Encoder
from .protocol import read_frame, write_frame

_SCALARS = frozenset((type(None), bool, int, float, str))

FILE_BYTES = 16 << 20                 # the largest file the student's code may write
OPEN_FILES = 256
PROCESSES = 64                        # threads count too: NumPy's, the worker's own two (a cgroup's too, as root)
_REAL_EXIT = os._exit                 # the worker's own exit, whatever the student's code does to os


# ------------------------------------------------------------------------------ where
def student_frame(exc: BaseException, path) -> traceback.FrameSummary | None:
    """The deepest frame of ``exc``'s traceback that lies in the student's file, or None."""
    target = Path(path).resolve()
    mine = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == target]
    return mine[-1] if mine else None


def student_where(exc: BaseException, path) -> str:
    """'  (at layernorm.py line 42 : <code>)' for the student's line of ``exc``, or ''."""
    f = student_frame(exc, path)
    if f is None:
        return ""
    code = f" : {f.line.strip()}" if f.line else ""
    return f"  (at {Path(f.filename).name} line {f.lineno}{code})"


def import_message(exc: BaseException, path: Path) -> str:
    """What a student reads when their file cannot be imported."""
    if isinstance(exc, SyntaxError):
        # a file of NUL bytes or a bad coding line has no line to name
        line, text = (f" (line {exc.lineno})" if exc.lineno else ""), (exc.text or "").strip()
        return f"{path.name} does not compile: {exc.msg}{line}" + (f": {text}" if text else "")
    # an exception while the file runs (a NameError at module level, a failing import...):
    # name the line of the file it came from, as for an exception in a checked function
    where = ""
    f = student_frame(exc, path)
    if f is not None:
        code = f": {f.line.strip()}" if f.line else ""
        where = f" (at {path.name} line {f.lineno}{code})"
    return f"could not import {path.name}: {type(exc).__name__}: {exc}{where}"


def describe_exception(exc: BaseException, path) -> dict:
    """An exception as data: its type's name, the built-in classes it derives from, its text, its line."""
    try:
        text = str(exc)
    except BaseException:
        text = "<an exception whose message cannot be printed>"
    bases = [k.__name__ for k in type(exc).__mro__ if getattr(builtins, k.__name__, None) is k]
    return {"type": type(exc).__name__, "bases": bases, "message": text, "where": student_where(exc, path)}


# ------------------------------------------------------------------------------ the worker
class _Worker:
    def __init__(self, reply):
        self.reply = reply
        self.handles: dict = {}
        self.module = self.original = None
        self.path = None

    def load(self, req, dec, enc) -> dict:
        self.path = Path(req["path"])
        if req["sys_path"] is not None:
            sys.path[:] = [str(p) for p in req["sys_path"]]
        _limit(req["memory"], req["timeout"], bool(req.get("confined")))
        _watch(req["trace"], req["timeout"])
        module, loader = source_module(f"_exercise_{req['name']}", self.path)
        try:
            loader.exec_module(module)
        except SystemExit:
            raise
        except BaseException as exc:
            return {"load_error": import_message(exc, self.path)}
        self.module = module
        return {"functions": {k: _parameters(v) for k, v in vars(module).items()
                              if callable(v) and not k.startswith("__")}}

    def swap(self, req, dec, enc) -> dict:
        """Put minibert's version of the named pieces in place of the student's (the capstone's
        diagnosis, ``pieces.swapped``); no pieces: the student's own functions again."""
        from .pieces import PIECES, swapped
        if self.original is None:
            self.original = self.module
        pieces = [p for p in req["pieces"] if p in PIECES]
        functions = {k: v for k, v in vars(self.original).items() if callable(v) and not k.startswith("__")}
        self.module = SimpleNamespace(**swapped(functions, pieces)) if pieces else self.original
        return {}

    def call(self, req, dec, enc) -> dict:
        """Each (args, kwargs) of ``calls`` in turn, up to the first exception.

        Each result, and each argument a call changed in place, is encoded as
        soon as that call returns: a later call may change them again, and the
        checker must see each as the call it examines left it.
        """
        func = getattr(self.module, req["func"])
        results, changes, snapshots = [], [], {}
        for k, (args, kwargs) in enumerate(dec(req["calls"])):
            watched = [(key, obj) for key, obj in [*enumerate(args), *kwargs.items()] if _can_change(obj)]
            for _, obj in watched:          # an object shared by several calls: one snapshot
                if id(obj) not in snapshots:
                    snapshots[id(obj)] = (obj, _snapshot(obj))
            try:
                results.append(enc.piece(func(*args, **kwargs)))
                exc = None
            except SystemExit:
                raise
            except BaseException as error:
                exc = describe_exception(error, self.path)
            changed = []
            for key, obj in watched:
                if _changed(obj, snapshots[id(obj)][1]):
                    changed.append([key, enc.piece(obj)])
                    snapshots[id(obj)] = (obj, _snapshot(obj))
            if changed:
                changes.append([k, changed])
            if exc is not None:
                return {"ok": results, "changes": changes, "exc": exc}
        return {"ok": results, "changes": changes}

    def map(self, req, dec, enc) -> dict:
        """func(*args, **kwargs)[0] once per row of ``variants``, put in place of args[index]:
        the many calls of a numerical gradient in one message."""
        func = getattr(self.module, req["func"])
        base, kwargs, variants = dec(req["args"]), dec(req["kwargs"]), dec(req["variants"])
        outs = []
        for row in variants:
            args = [a.copy() if isinstance(a, np.ndarray) else a for a in base]
            args[req["index"]] = row.copy()
            if req.get("seed") is not None:
                args.append(np.random.default_rng(req["seed"]))
            try:
                outs.append(enc.piece(func(*args, **kwargs)[0]))
            except SystemExit:
                raise
            except BaseException as exc:
                return {"exc": describe_exception(exc, self.path)}
        return {"ok": outs}

    def serve(self, requests) -> None:
        while True:
            header, blob = read_frame(requests)
            op = header.get("op")
            if op == "bye":
                return
            try:
                enc = Encoder(self.handles)
                answer = getattr(self, op)(header, Decoder(blob, self.handles), enc)
                write_frame(self.reply, answer, enc.blobs)
            except SystemExit as exc:      # sys.exit in the student's code: say where, then go
                code = exc.code if isinstance(exc.code, (int, type(None))) else str(exc.code)[:100]
                write_frame(self.reply, {"exit": f"sys.exit({code!r})",
                                         "where": student_where(exc, self.path)}, [])
                return
            except (EOFError, BrokenPipeError):
                raise
            except Exception as exc:       # the worker's own trouble (say, a function deleted)
                write_frame(self.reply, {"internal": f"{type(exc).__name__}: {exc}"[:500]}, [])


def source_module(name: str, path):
    """A new, empty module for the Python file ``path``, and the loader that runs it into it.

    The source loader is named outright: a file saved as gelu.txt or gelu.py.txt is Python all the same.
    """
    loader = SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    return importlib.util.module_from_spec(spec), loader


def _can_change(obj) -> bool:
    # what a call can change in place; a generator's state is not sent back (the checks never reuse one)
    return isinstance(obj, (np.ndarray, list, dict, tuple))


def _snapshot(obj):
    if isinstance(obj, np.ndarray):
        return obj.copy()
    if isinstance(obj, tuple):           # a cache: the tuple cannot change, the arrays in it can
        return tuple(_snapshot(x) if _can_change(x) else None for x in obj)
    if type(obj) is list and all(type(x) in _SCALARS for x in obj):
        return list(obj)                 # token ids: a shallow copy is a full one, and far faster
    try:
        return copy.deepcopy(obj)
    except Exception:
        return None


def _changed(obj, snap) -> bool:
    """Whether ``obj`` differs from its snapshot; when that cannot be told, it did (it is sent back)."""
    try:
        if isinstance(obj, np.ndarray):
            return not (obj.shape == snap.shape and obj.dtype == snap.dtype
                        and np.array_equal(obj, snap, equal_nan=obj.dtype.kind in "fc"))
        if isinstance(obj, tuple):
            return any(s is not None and _changed(x, s) for x, s in zip(obj, snap))
        return snap is None or not bool(obj == snap)
    except Exception:
        return True


def _parameters(func):
    try:
        return list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return None


def _limit(megabytes, seconds, confined=False) -> None:
    """Cap the worker's address space, CPU time, file size and open files, where the platform can
    (all of them on Linux; macOS keeps no address-space limit, Windows none), soft and hard alike,
    so that the student's code cannot raise them again.  In a sandbox (``confine.py``), processes
    too: they are counted for the sandbox's own user, so a fork bomb ends there.  The checker
    enforces the time itself; the CPU limit only ends a worker whose checker is gone."""
    try:
        import resource
    except ImportError:
        return
    cpu = int(seconds) + 15
    limits = [(resource.RLIMIT_AS, int(megabytes) << 20, int(megabytes) << 20),
              (resource.RLIMIT_CPU, cpu, cpu + 5),           # SIGXCPU at the soft one, SIGKILL at the hard
              (resource.RLIMIT_FSIZE, FILE_BYTES, FILE_BYTES),
              (resource.RLIMIT_NOFILE, OPEN_FILES, OPEN_FILES)]
    if confined:
        limits.append((resource.RLIMIT_NPROC, PROCESSES, PROCESSES))
    for which, soft, hard in limits:
        try:
            _, old_hard = resource.getrlimit(which)
            if old_hard != resource.RLIM_INFINITY:
                soft, hard = min(soft, old_hard), min(hard, old_hard)
            resource.setrlimit(which, (soft, hard))
        except (ValueError, OSError, TypeError):
            pass


def _watch(trace_path: str, timeout: float) -> None:
    """Leave the student's line in ``trace_path`` when the worker crashes, runs out of time or exits.

    faulthandler writes the Python stack from C (a signal handler, a watchdog
    thread), so it works in an endless loop and in a segmentation fault alike.
    The checker kills the worker when its time is up; the stack is written a
    moment before, so that the report can say which line was running.
    """
    trace = open(trace_path, "w")                     # noqa: SIM115 (open for the process's life)
    faulthandler.enable(file=trace, all_threads=False)
    faulthandler.dump_traceback_later(max(float(timeout) - 0.3, 0.1), exit=False, file=trace)

    def _exit(code):
        # os._exit skips every handler: leave the line it came from before going
        trace.write(f"os._exit({code!r})\n")
        trace.flush()
        faulthandler.dump_traceback(file=trace, all_threads=False)
        _REAL_EXIT(code)
    os._exit = _exit

    # and the worker ends itself when its checker is gone (killed, interrupted) or long after its
    # time: a student's endless loop must not outlive the grading run
    parent, end = os.getppid(), time.monotonic() + float(timeout) + 10

    def guard():
        while time.monotonic() < end and os.getppid() == parent:
            time.sleep(0.25)
        _REAL_EXIT(70)
    threading.Thread(target=guard, daemon=True).start()


def main() -> None:
    # the protocol keeps the pipes of stdin and stdout; the student's prints go to stderr,
    # and input() reads an empty stdin rather than the checker's requests
    requests = os.fdopen(os.dup(0), "rb")
    reply = os.fdopen(os.dup(1), "wb")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    warnings.simplefilter("ignore")       # as in-process: the checks ignore NumPy's warnings
    np.seterr(all="ignore")
    worker = _Worker(reply)
    try:
        worker.serve(requests)
    except (EOFError, BrokenPipeError):
        pass
    _REAL_EXIT(0)
