"""The machinery the checkers share: calling student code safely, comparing arrays, reporting.

A checker never lets an exception from the student's code escape.  A
``NotImplementedError`` becomes a "not implemented yet" verdict; any other
exception becomes a failure that names the exception, the line of the
student's file it came from, and a hint.
"""
from __future__ import annotations

import traceback
from pathlib import Path

import numpy as np

from minibert.gradcheck import max_rel_error, numerical_gradient

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
        self.status = "pass"          # "pass", "fail" or "todo"
        self.n_ok = 0

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
        if hint:
            self.hint(hint)

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
        return "\n".join(out)


def _short(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# ---------------------------------------------------------------------- student calls
def call(report: Report, func_name: str, *args, hint: str | None = None, **kwargs):
    """Call ``module.func_name(*args, **kwargs)``; turn any exception into a report line and Abort."""
    func = getattr(report.module, func_name, None)
    if func is None:
        report.fail(f"the module has no function {func_name}",
                    "keep the function names and signatures of the stub file")
        raise Abort
    try:
        return func(*args, **kwargs)
    except NotImplementedError:
        report.todo(func_name)
        raise Abort
    except Exception as exc:  # the student's bug, reported, never re-raised
        report.fail(f"{func_name} raised {type(exc).__name__}: {exc}{_where(exc, report.module)}",
                    hint or _generic_hint(exc))
        raise Abort


def _where(exc: BaseException, module) -> str:
    """' (at layernorm.py line 42: <code>)' for the deepest frame in the student's file."""
    target = getattr(module, "__file__", None)
    frames = traceback.extract_tb(exc.__traceback__)
    if target:
        target = str(Path(target).resolve())
        mine = [f for f in frames if str(Path(f.filename).resolve()) == target]
        if mine:
            f = mine[-1]
            code = f" : {f.line.strip()}" if f.line else ""
            return f"  (at {Path(f.filename).name} line {f.lineno}{code})"
    return ""


def _generic_hint(exc: Exception) -> str:
    msg = str(exc)
    if isinstance(exc, ValueError) and any(w in msg for w in ("broadcast", "shapes", "aligned", "mismatch")):
        return ("a shape mismatch: write the shape of every array next to each line "
                "(the stub's docstring lists them) and check the transposes")
    if isinstance(exc, IndexError):
        return "an index out of range: check which axis you index and the values you index with"
    if isinstance(exc, TypeError):
        return "check the arguments and what the function returns (a tuple where the stub says so)"
    return "read the error message and the line it points to"


# ---------------------------------------------------------------------- arrays
def as_array(report: Report, what: str, value, shape, hint: str | None = None) -> np.ndarray:
    """The student's result as a float64 array of the expected shape, or a FAIL and Abort."""
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
    if not np.isfinite(arr).all():
        report.fail(f"{what} contains inf or NaN", hint)
        raise Abort
    return arr


def compare(report: Report, what: str, got, want, tol: float = TOL, hint: str | None = None,
            known: list | tuple = ()) -> bool:
    """Record max_rel_error(got, want) against ``tol``.

    ``known``: (wrong_value, hint) pairs, the results of usual mistakes.  When
    the student's value matches one of them, that mistake's hint is given
    instead of ``hint``.
    """
    err = max_rel_error(got, want)
    line = f"{what:<44s} {MEASURE} {err:.1e}"
    if err < tol:
        report.ok(f"{line} (< {tol:.0e})")
        return True
    report.fail(f"{line} (must be < {tol:.0e})", diagnose(got, known) or hint)
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
               hint: str | None = None, known=(), zero_rows=None) -> bool:
    """Compare an analytic gradient with central differences of the student's own forward.

    forward_out: function of no arguments returning the forward output (reads ``x``).
    zero_rows: rows of the numerical gradient that are 0 by design (the [PAD] embedding).
    """
    try:
        num = numerical_gradient(forward_out, x, dout)
    except Exception as exc:
        report.fail(f"{what}: the forward pass failed during the gradient check "
                    f"({type(exc).__name__}: {exc})")
        raise Abort
    if zero_rows is not None:
        num[zero_rows] = 0.0
    return compare(report, f"{what} vs numerical gradient", analytic, num, TOL, hint, known)
