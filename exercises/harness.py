"""The machinery the checkers share: calling student code safely, comparing arrays, reporting.

A checker never lets an exception from the student's code escape.  A
``NotImplementedError`` becomes a "not implemented yet" verdict; any other
exception becomes a failure that names the exception, the line of the
student's file it came from, and a hint.  ``call_watched`` also fails a
function that changes its arguments in place, and ``as_array`` a result that
is not float64.

Hints belong to checks: a hint is printed under the FAIL line of the check
that found the problem, and only when that check's result matches the mistake
the hint names (``known`` values, or an ``explain`` function that looks at the
result).  When a check fails in a way that leaves nothing for the later checks
to look at (an exception, a result of the wrong shape), the checker stops and
says so once, rather than printing failures that only repeat the first.

``report.module`` is the student's module imported into this process, or,
for a grade (``sandbox.py``), a ``RemoteModule`` whose functions run in a
worker process and come back as data; the checks read both alike.  With a
worker, ``call_each`` sends a loop's calls in one message and a gradient
check sends all its perturbed inputs in one (``Forward``).
"""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np

from minibert.gradcheck import max_rel_error, numerical_gradient

from .worker import student_where

TOL = 1e-7          # gradient checks and comparisons with minibert, float64
MEASURE = "max_rel_error"


class Abort(Exception):
    """Stops a checker early; the report already says why."""


class Report:
    """What one checker found: a list of lines and a verdict."""

    def __init__(self, name: str, module=None):
        self.name = name
        self.module = module
        self.lines: list[str] = []
        self.hints: list[str] = []
        self.failures: list[tuple[str, str | None]] = []   # (what failed, its hint), in order
        self.status = "pass"          # "pass", "fail" or "todo"
        self.n_ok = 0
        self.output: list[str] = []   # what the student's code printed, shown under the verdict

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    # ------------------------------------------------------------------ recording
    def ok(self, what: str) -> None:
        self.n_ok += 1
        self.lines.append(f"  ok    {what}")

    def fail(self, what: str, hint: str | None = None) -> None:
        if self.status != "todo":
            self.status = "fail"
        self.lines.append(f"  FAIL  {what}")
        self.failures.append((what, hint or None))
        if hint:
            self.hint(hint)

    @property
    def first_failure(self) -> tuple[str, str | None] | None:
        """The first FAIL line and its hint: what the student reads first."""
        return self.failures[0] if self.failures else None

    def stopped(self) -> None:
        """Say, once, that the checks after a structural failure were not run."""
        note = ("  ...   the checks after this one were not run: they need the result above "
                "(fix it first)")
        if self.status == "fail" and note not in self.lines:
            self.lines.append(note)

    def hint(self, text: str) -> None:
        if text not in self.hints:
            self.hints.append(text)
            self.lines.append(f"        hint: {text}")

    def todo(self, func: str) -> None:
        self.status = "todo"
        self.lines.append(f"  TODO  {func} is not implemented yet (it raises NotImplementedError)")

    def expect(self, condition: bool, what: str, hint: str | None = None) -> bool:
        if condition:
            self.ok(what)
        else:
            self.fail(what, hint)
        return bool(condition)

    def require(self, condition: bool, what: str, hint: str | None = None) -> None:
        """Like ``expect``, but stop checking when it fails (later checks would only repeat it)."""
        if not self.expect(condition, what, hint):
            raise Abort

    # ------------------------------------------------------------------ output
    def render(self) -> str:
        where = ""
        if self.module is not None and getattr(self.module, "__file__", None):
            where = f"  ({_short(self.module.__file__)})"
        head = {"pass": "PASS", "fail": "FAIL", "todo": "TODO"}[self.status]
        out = [f"[{head}] {self.name}{where}"]
        out += self.lines
        if self.status == "pass":
            out.append(f"  -> passed: all {self.n_ok} checks are right.")
        elif self.status == "todo":
            out.append("  -> not implemented yet: fill in the TODOs, then run the check again.")
        else:
            out.append("  -> failed: read the first FAIL line and its hint, fix it, run again.")
        return "\n".join(out + self.output)


def _short(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# ---------------------------------------------------------------------- student calls
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
                report.fail(line, why)
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


# ---------------------------------------------------------------------- arrays
def as_array(report: Report, what: str, value, shape, hint: str | None = None,
             finite: bool = True) -> np.ndarray:
    """The student's result as a float64 array of the expected shape, or a FAIL and Abort.

    finite=False lets NaN and inf through, for a check that looks at them itself.
    """
    # Look at the dtype before converting: a float32 result would be converted silently, and
    # float32's rounding error (about 6e-8) lies below TOL, so a float32 gradient would pass.
    try:
        dtype = np.dtype(getattr(value, "dtype", np.float64))
    except TypeError:                       # not a NumPy dtype: the conversion below decides
        dtype = np.dtype(np.float64)
    if np.issubdtype(dtype, np.inexact) and dtype != np.float64:
        report.fail(f"{what}: the check runs in float64; your code returned {dtype}",
                    f"keep every array in float64, as the inputs are: leave out .astype({dtype.name}) and "
                    f"dtype={dtype.name}. A lower precision rounds by about as much as the check's "
                    f"tolerance ({TOL:.0e}), so the check could not tell a right result from a wrong one")
        raise Abort
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        report.fail(f"{what} should be an array, got {type(value).__name__}",
                    hint or "return NumPy arrays (check that the function returns what the stub says)")
        raise Abort
    if arr.shape != tuple(shape):
        report.fail(f"{what} has shape {arr.shape}, expected {tuple(shape)}",
                    hint or "a gradient always has the shape of the thing it is the gradient of")
        raise Abort
    if finite and not np.isfinite(arr).all():
        report.fail(f"{what} contains inf or NaN", hint)
        raise Abort
    return arr


def compare(report: Report, what: str, got, want, tol: float = TOL, hint: str | None = None,
            known: list | tuple = (), explain=None) -> bool:
    """Record max_rel_error(got, want) against ``tol``.

    ``known``: (wrong_value, hint) pairs, the results of usual mistakes.  When
    the student's value matches one of them, that mistake's hint is given
    instead of ``hint``.  ``explain``: a function of the student's value that
    returns the hint of a mistake it recognises by some other sign, or None;
    asked when no known value matches.
    """
    err = max_rel_error(got, want)
    line = f"{what:<44s} {MEASURE} {err:.1e}"
    if err < tol:
        report.ok(f"{line} (< {tol:.0e})")
        return True
    text = diagnose(got, known)
    if text is None and explain is not None:
        try:
            text = explain(got)
        except Exception:       # a diagnosis that cannot run gives no hint, never a crash
            text = None
    report.fail(f"{line} (must be < {tol:.0e})", text or hint)
    return False


def diagnose(got, known) -> str | None:
    """The hint of the first known mistake whose result ``got`` reproduces."""
    for wrong, text in known:
        try:
            wrong = np.asarray(wrong, dtype=np.float64)
            if wrong.shape == np.shape(got) and np.isfinite(wrong).all() and max_rel_error(got, wrong) < 1e-6:
                return text
        except Exception:
            continue
    return None


def grad_check(report: Report, what: str, forward_out, x: np.ndarray, dout, analytic,
               hint: str | None = None, known=(), zero_rows=None, explain=None) -> bool:
    """Compare an analytic gradient with central differences of the student's own forward.

    forward_out: function of no arguments returning the forward output (reads ``x``).
    zero_rows: rows of the numerical gradient that are 0 by design (the [PAD] embedding).
    """
    try:
        num = _numerical_gradient(forward_out, x, dout)
    except Exception as exc:
        report.fail(f"{what}: the forward pass failed during the gradient check "
                    f"({type(exc).__name__}: {exc})")
        raise Abort
    if zero_rows is not None:
        num[zero_rows] = 0.0
    return compare(report, f"{what} vs numerical gradient", analytic, num, TOL, hint, known, explain)


class Forward:
    """What a gradient check differentiates: ``func(*args, **kwargs)[0]`` on fresh copies of ``args``.

    The gradient check changes one entry of an array in ``args`` at a time;
    a forward pass that changed its inputs would otherwise spoil the
    numerical gradient too, and the backward pass would get the blame.
    seed: when given, a new ``np.random.default_rng(seed)`` is passed after
    ``args`` at every call, so that a random forward (dropout) draws the same
    mask each time and is a fixed function of its input.
    """

    def __init__(self, module, func: str, args, kwargs, seed=None):
        self.func = getattr(module, func)
        self.args, self.kwargs, self.seed = args, kwargs, seed

    def __call__(self):
        rng = () if self.seed is None else (np.random.default_rng(self.seed),)
        return self.func(*[fresh(a) for a in self.args], *rng, **self.kwargs)[0]


def fresh(a):
    """A copy of an array argument (the caller keeps its own); anything else as it is."""
    return a.copy() if isinstance(a, np.ndarray) else a


def _numerical_gradient(forward, x: np.ndarray, df, h: float = 1e-5) -> np.ndarray:
    """minibert's central differences, with the 2 x.size calls sent to a worker in one message.

    The same arithmetic as ``minibert.gradcheck.numerical_gradient``, entry by
    entry, so a result is the same to the last bit in a worker and in-process.
    """
    batch = getattr(getattr(forward, "func", None), "map_outputs", None)
    index = next((i for i, a in enumerate(getattr(forward, "args", ())) if a is x), None)
    if batch is None or index is None:
        return numerical_gradient(forward, x, df, h)
    cells = list(np.ndindex(*x.shape))
    variants = np.repeat(x[None], 2 * len(cells), axis=0)
    for k, ix in enumerate(cells):
        old = x[ix]
        variants[2 * k][ix] = old + h
        variants[2 * k + 1][ix] = old - h
    outs = batch(forward.args, forward.kwargs, index, variants, forward.seed)
    grad = np.zeros_like(x)
    for k, ix in enumerate(cells):
        pos = np.asarray(outs[2 * k], dtype=np.float64)
        neg = np.asarray(outs[2 * k + 1], dtype=np.float64)
        diff = (pos - neg) if df is None else (pos - neg) * df
        grad[ix] = np.sum(diff) / (2 * h)
    return grad
