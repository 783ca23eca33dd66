"""The student's module as the checks see it when it runs in a worker process.

``RemoteModule`` stands for the student's module: its functions are
``RemoteFunction`` objects, whose calls the worker runs (``sandbox.Worker``).
What comes back is rebuilt here as data: results, the student's exceptions
(``rebuild_exception``: the same name and text, and the built-in classes they
derive from, never the student's own class), and the changes a call made to
its arguments, written into the checker's own objects (``merge``), so that a
check sees a function that changes its inputs in place as it would in-process.
"""
from __future__ import annotations

import builtins
from pathlib import Path

import numpy as np

from .codec import MAX_DEPTH

MAX_MESSAGE = 2000            # characters of an exception message kept


class WorkerGone(BaseException):
    """The worker stopped answering: it ran out of time, exited, crashed or sent nonsense.

    A BaseException, so that the checkers' own ``except Exception`` (around a
    diagnosis, say) lets it through: nothing more can be asked of the worker.
    """

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message, self.hint = message, hint


class RemoteFunction:
    """A student function as the checks call it: each call runs in the worker."""

    def __init__(self, worker, name: str, parameters):
        self.worker, self.__name__ = worker, name
        ok = isinstance(parameters, list) and all(isinstance(p, str) for p in parameters)
        self.parameter_names = parameters if ok else None

    def __call__(self, *args, **kwargs):
        return self.worker.call_each(self.__name__, [(args, kwargs)])[0]()

    def call_each(self, calls: list) -> list:
        return self.worker.call_each(self.__name__, calls)

    def map_outputs(self, args, kwargs, index, variants, seed=None):
        return self.worker.map(self.__name__, args, kwargs, index, variants, seed)


class RemoteModule:
    """The student's module as the checks see it: its functions, run in the worker."""

    def __init__(self, worker, path: Path, functions: dict):
        self.__file__ = str(path)
        self.__name__ = path.stem
        self._worker = worker
        self._functions = {str(n): RemoteFunction(worker, str(n), p) for n, p in functions.items()}

    def swap(self, pieces) -> None:
        """From now on the worker's functions call minibert's ``pieces`` in place of the student's
        (none: the student's own again); the capstone's diagnosis."""
        self._worker.swap(pieces)

    def __getattr__(self, name):
        functions = self.__dict__.get("_functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(name)


_EXCEPTIONS: dict = {}


def rebuild_exception(info) -> Exception:
    """The student's exception, rebuilt from its description: the same name and text, and an
    instance of the built-in classes it derived from (a hint can ask ``isinstance(exc, TypeError)``)."""
    info = info if isinstance(info, dict) else {}
    name = str(info.get("type", "Exception"))[:80] or "Exception"
    bases = []
    for base in info.get("bases", []) if isinstance(info.get("bases"), list) else []:
        cls = getattr(builtins, str(base), None)
        if isinstance(cls, type) and issubclass(cls, Exception) and not any(issubclass(b, cls) for b in bases):
            bases.append(cls)
    key = (name, tuple(bases))
    if key not in _EXCEPTIONS:
        body = {"__init__": lambda self, text: BaseException.__init__(self, text),
                "__str__": lambda self: self.args[0], "__module__": "student"}
        try:
            _EXCEPTIONS[key] = type(name, tuple(bases) or (Exception,), body)
        except TypeError:                       # bases that cannot be combined: the first one
            _EXCEPTIONS[key] = type(name, (bases[0],), body)
    exc = _EXCEPTIONS[key](str(info.get("message", ""))[:MAX_MESSAGE])
    exc.student_where = str(info.get("where", ""))[:500]
    return exc


def merge(old, new, depth: int = 0) -> None:
    """Make the checker's ``old`` hold what ``new`` (the worker's copy after the call) holds, in place:
    the checks see an argument the student's function changed, as they would in-process."""
    if depth > MAX_DEPTH or _equal(old, new):
        return
    if isinstance(old, np.ndarray) and isinstance(new, np.ndarray):
        if old.shape == new.shape and old.flags.writeable:
            try:
                np.copyto(old, new, casting="unsafe")
            except (TypeError, ValueError):
                pass
    elif isinstance(old, tuple) and isinstance(new, tuple) and len(old) == len(new):
        for o, n in zip(old, new):             # a tuple cannot change, the arrays inside it can
            merge(o, n, depth + 1)
    elif isinstance(old, list) and isinstance(new, list):
        for i, n in enumerate(new[:len(old)]):
            if _same_kind(old[i], n):
                merge(old[i], n, depth + 1)
            else:
                old[i] = n
        del old[len(new):]
        old.extend(new[len(old):])
    elif isinstance(old, dict) and isinstance(new, dict):
        for k in [k for k in old if k not in new]:
            del old[k]
        for k, n in new.items():
            if k in old and _same_kind(old[k], n):
                merge(old[k], n, depth + 1)
            else:
                old[k] = n
    elif isinstance(old, np.random.Generator) and isinstance(new, np.random.Generator):
        try:
            old.bit_generator.state = new.bit_generator.state
        except (TypeError, ValueError):
            pass


def _equal(old, new) -> bool:
    """Whether a list or dict came back as it went (the usual case, and quick to see)."""
    if not isinstance(old, (list, dict)):
        return False
    try:
        return bool(old == new)
    except Exception:                        # arrays inside: compared one by one by merge
        return False


def _same_kind(old, new) -> bool:
    kinds = (np.ndarray, list, dict, tuple, np.random.Generator)
    return any(isinstance(old, k) and isinstance(new, k) for k in kinds) and (
        not isinstance(old, np.ndarray) or old.shape == new.shape)


class Outcome:
    """One call's outcome, read in order: its changes to the arguments, then its result or exception."""

    def __init__(self, args, kwargs, changes, result, error):
        self.args, self.kwargs, self.changes, self.result, self.error = args, kwargs, changes, result, error

    def __call__(self):
        for key, new in self.changes:
            if type(key) is int and 0 <= key < len(self.args):
                merge(self.args[key], new)
            elif isinstance(key, str) and key in self.kwargs:
                merge(self.kwargs[key], new)
        if self.error is not None:
            raise self.error
        return self.result
