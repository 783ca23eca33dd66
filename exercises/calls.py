"""Calling the student's functions: never an exception that escapes, never an argument changed unseen.

A ``NotImplementedError`` becomes a "not implemented yet" verdict; any other
exception becomes a failure that names the exception, the line of the
student's file it came from, and a hint.  ``call_watched`` also fails a
function that changes its arguments in place.  ``report.module`` is the
student's module imported into this process, or, for a grade
(``sandbox.py``), a ``RemoteModule`` whose functions run in a worker process
and come back as data; with a worker, ``call_each`` sends a loop's calls in
one message.
"""
from __future__ import annotations

import functools
import inspect
import re

import numpy as np

from .report import Abort, Report
from .worker import student_where


HINT_EXIT = "return the result instead, or raise an exception that says what went wrong"


class ExitCalled(Exception):
    """sys.exit() (or exit(), quit()) called by the student's function, in this process (a notebook's check)."""


def no_exit(func):
    """``func``, with a ``sys.exit()`` inside it turned into an exception the check reports as a
    FAIL line: a SystemExit would leave ``check`` and stop the notebook's cell."""
    @functools.wraps(func)
    def guarded(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except SystemExit as exc:
            raise ExitCalled(f"sys.exit({exc.code!r}) was called: {HINT_EXIT}") from None
    return guarded


def call(report: Report, func_name: str, *args, hint=None, **kwargs):
    """Call ``module.func_name(*args, **kwargs)``; turn any exception into a report line and Abort.

    hint: the hint for an exception: a string, or a function of the exception
    that returns a string, or None when the exception is not the one it knows
    (then a generic hint for the kind of exception is given).
    """
    func = _function(report, func_name)
    return _guarded(report, func_name, lambda: func(*args, **kwargs), hint)


def call_each(report: Report, func_name: str, calls: list, hint=None):
    """``call`` for each (args, kwargs) of ``calls``, in order: yields the results one by one.

    A function run in a worker process gets all the calls in one message (the
    data exercises make thousands); their results, and an exception, are read
    in order as if each call had just been made, so a check loop over them
    reports exactly what it would with one call at a time.
    """
    func = _function(report, func_name)
    batch = getattr(func, "call_each", None)
    if batch is None:
        outcomes = ((lambda a=args, k=kwargs: func(*a, **k)) for args, kwargs in calls)
    else:
        outcomes = batch(calls)
    for outcome in outcomes:
        yield _guarded(report, func_name, outcome, hint)


def _function(report: Report, func_name: str):
    func = getattr(report.module, func_name, None)
    if func is None:
        report.fail(f"the module has no function {func_name}",
                    "keep the function names and signatures of the stub file")
        raise Abort
    return func


def _guarded(report: Report, func_name: str, run, hint):
    try:
        return run()
    except NotImplementedError:
        report.todo(func_name)
        raise Abort
    except Exception as exc:  # the student's bug, reported, never re-raised
        text = hint(exc) if callable(hint) else hint
        report.fail(f"{func_name} raised {type(exc).__name__}: {exc}{_where(exc, report.module)}",
                    text or _generic_hint(exc))
        raise Abort


def try_call(module, func_name: str, *args, **kwargs):
    """``module.func_name(*args, **kwargs)``, or None if it raises: for a diagnosis, never reported."""
    try:
        return getattr(module, func_name)(*args, **kwargs)
    except Exception:
        return None


def _where(exc: BaseException, module) -> str:
    """' (at layernorm.py line 42 : <code>)' for the deepest frame in the student's file."""
    if getattr(exc, "student_where", None) is not None:     # raised in a worker, which named the line
        return exc.student_where
    target = getattr(module, "__file__", None)
    return student_where(exc, target) if target else ""


# What an argument is, and why changing it in place is a bug, by the argument's role.
ROLES = {
    "input": ("an input", "a forward pass must not change its inputs: the caller still uses them (a residual "
              "connection adds x to the sublayer's output, and the gradient check calls the forward pass "
              "again on x). Write new arrays (z = x - m, not x -= m)"),
    "upstream": ("the upstream gradient", "a backward pass must not change its upstream gradient: one "
                 "gradient can feed two branches (a residual connection hands the same dy to the sublayer "
                 "and to the skip path), and the other branch would then get wrong values. Write new "
                 "arrays (dx = dy * s, not dy *= s) and return them"),
    "cache": ("an array of the cache", "a backward pass must not change its cache: the cache can be used "
              "again (a second backward pass through the same forward pass), and would then give a wrong "
              "gradient. Write intermediate results into new arrays, not into the cached ones"),
}


def call_watched(report: Report, func_name: str, *args, roles: list, **kwargs):
    """``call``, then a FAIL for each array argument that the call changed in place.

    roles: for each positional argument, its role in ``ROLES`` ("input",
    "upstream", "cache"), or None for an argument not watched.  Arrays inside
    tuples, lists and dicts (a cache) are watched too.  Pass copies of the
    checker's own arrays: each watched array is compared after the call with
    a copy taken before it.  A changed argument is reported but does not stop
    the check, since the returned values may still be right.
    """
    names = _parameter_names(report.module, func_name, len(args))
    watched = [(names[i] + sub, a, a.copy(), role)
               for i, (arg, role) in enumerate(zip(args, roles)) if role
               for sub, a in _arrays(arg)]
    result = call(report, func_name, *args, **kwargs)
    for what, a, before, role in watched:
        if not _same(a, before):
            desc, why = ROLES[role]
            line = f"{func_name} changed {what} ({desc}) in place"
            if f"  FAIL  {line}" not in report.lines:       # once, though the check calls it again
                report.fail(line, f"{what} was changed in place. {why}. A second name for the same array "
                                  f"(d = {what}) is not a copy: d -= ... or d[...] = ... change {what} too; "
                                  f"start from {what}.copy()")
    return result


def _parameter_names(module, func_name: str, n: int) -> list[str]:
    """The names of the first n parameters, as the student's function spells them."""
    func = getattr(module, func_name, None)
    params = getattr(func, "parameter_names", None)       # a function run in a worker says them
    if params is None:
        try:
            params = list(inspect.signature(func).parameters)
        except (TypeError, ValueError, AttributeError):
            params = []
    return [params[i] if i < len(params) else f"argument {i + 1}" for i in range(n)]


def _arrays(obj, path: str = "", depth: int = 0):
    """(path, array) for each NumPy array in obj, looking inside tuples, lists and dicts."""
    if isinstance(obj, np.ndarray):
        yield path, obj
    elif depth < 4 and isinstance(obj, (tuple, list)):
        for i, item in enumerate(obj):
            yield from _arrays(item, f"{path}[{i}]", depth + 1)
    elif depth < 4 and isinstance(obj, dict):
        for key, item in obj.items():
            yield from _arrays(item, f"{path}[{key!r}]", depth + 1)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    try:
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    except TypeError:                       # arrays of objects: compare what can be compared
        return bool(np.array_equal(a, b))


def _generic_hint(exc: Exception) -> str:
    msg = str(exc)
    lost = _lost_axis(msg) if isinstance(exc, ValueError) else None
    if lost:
        return (f"shapes {lost[0]} and {lost[1]} do not broadcast: a sum or mean lost the axis it ran over. "
                "Pass keepdims=True, so that the result keeps a 1 in its place and broadcasts")
    if isinstance(exc, ValueError) and any(w in msg for w in ("broadcast", "shapes", "aligned", "mismatch")):
        return ("a shape mismatch: write the shape of every array next to each line "
                "(the stub's docstring lists them) and check the transposes")
    if isinstance(exc, IndexError):
        return "an index out of range: check which axis you index and the values you index with"
    if isinstance(exc, TypeError):
        return "check the arguments and what the function returns (a tuple where the stub says so)"
    return "read the error message and the line it points to"


def _lost_axis(msg: str):
    """The two shapes of a broadcasting error where one is the other without its last axis, or None."""
    if "broadcast" not in msg:
        return None
    shapes = [tuple(int(n) for n in m.split(",") if n.strip())
              for m in re.findall(r"\(([\d,\s]*)\)", msg)]
    for a in shapes:
        for b in shapes:
            if len(a) >= 2 and b == a[:-1]:
                return a, b
    return None
