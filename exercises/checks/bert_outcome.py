"""What a stage of the capstone's check found, and the helpers that call the student's functions.

An ``Outcome`` holds a stage's lines (ok, or FAIL with a hint) without writing
them into the report: the diagnosis runs a stage again with minibert's pieces
swapped in and needs only to know whether it passed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..report import Abort, Report

WORD, DECODER = "bert.embeddings.word_embeddings.weight", "cls.predictions.decoder."


@dataclass
class Outcome:
    """What one stage found: its lines (ok or FAIL with a hint), and whether it stopped early."""
    lines: list = field(default_factory=list)         # (ok, what, hint)
    todo: str | None = None                           # the function that raised NotImplementedError

    @property
    def passed(self) -> bool:
        return self.todo is None and all(ok for ok, _, _ in self.lines)

    def expect(self, ok, what, hint=None) -> bool:
        self.lines.append((bool(ok), what, hint))
        return bool(ok)

    def measure(self, ok, what, hint=None) -> None:
        """An ok or FAIL line ``what`` (a comparison, printed either way); stop when it fails."""
        if not self.expect(ok, what, hint):
            raise Abort

    def require(self, ok, what, hint=None) -> None:
        """A FAIL line ``what`` and stop when not ``ok``; nothing when it is (a condition of form)."""
        if not ok:
            self.expect(False, what, hint)
            raise Abort

    def into(self, r: Report, hint: str | None = None, own_first: bool = False) -> None:
        """Write the lines into the report; ``hint`` (the swap's finding) under the first FAIL line, before
        the line's own hint, or after it when ``own_first`` (the own hint says more: where in bert.py)."""
        given = False
        for ok, what, own in self.lines:
            if ok:
                r.ok(what)
                continue
            first, second = (own, hint) if own_first else (hint, own)
            r.fail(what, (first or second) if not given else own)
            if not given and first and second:
                r.hint(second)
            given = True
        if self.todo is not None:
            r.todo(self.todo)
            if hint:
                r.hint(hint)


def _call(out: Outcome, name: str, func, *args, **kwargs):
    """The student's ``func``: its result, or the exception as a FAIL line (NotImplementedError: TODO)."""
    try:
        return func(*args, **kwargs)
    except NotImplementedError:
        out.todo = name
        raise Abort from None
    except Exception as exc:
        where = getattr(exc, "student_where", "")
        out.expect(False, f"{name} raised {type(exc).__name__}: {exc}{where}",
                   "read the message and the line it names; compare what the function returns with the stub")
        raise Abort from None


def _scalar(out: Outcome, what: str, value) -> float:
    try:
        v = float(np.asarray(value, dtype=np.float64).reshape(()))
    except (TypeError, ValueError):
        out.require(False, f"{what} should be one number, got {type(value).__name__} "
                           f"of shape {np.shape(value)}", "the loss is a scalar: the mean over the labelled "
                                                           "positions plus the mean over the pairs")
    out.require(math.isfinite(v), f"{what} is {v}", "the loss must be finite: look for a log of 0 or an overflow")
    return v


def _grads(out: Outcome, grads, params) -> dict:
    """The student's gradients, checked for form: a dict with exactly the parameters' names, float64
    arrays of their shapes."""
    out.require(isinstance(grads, dict), f"bert_backward should return a dict of gradients, got "
                                         f"{type(grads).__name__}", "one gradient per parameter, by its name")
    tied = [k for k in grads if str(k).startswith(DECODER)]
    missing = [k for k in params if k not in grads]
    extra = [k for k in grads if k not in params]
    if tied:
        out.require(False, f"bert_backward returned a gradient for {tied[0]}",
                    "the decoder has no weight of its own: it is tied to the word embeddings, so its gradient "
                    f"is added into {WORD}'s")
    out.require(not missing and not extra,
                f"bert_backward's keys: {len(missing)} missing ({', '.join(missing[:2])}{'...' if len(missing) > 2 else ''})"
                f", {len(extra)} not parameters ({', '.join(map(str, extra[:2]))})",
                "return one gradient for each key of params, by the same name")
    got = {}
    for k, want in params.items():
        g = grads[k]
        dtype = getattr(g, "dtype", None)
        out.require(dtype == np.float64, f"the gradient of {k} is {dtype}, not float64",
                    "keep every array in float64, as the parameters are")
        out.require(np.shape(g) == want.shape, f"the gradient of {k} has shape {np.shape(g)}, expected {want.shape}",
                    "a gradient has the shape of the parameter it is the gradient of")
        out.require(np.isfinite(g).all(), f"the gradient of {k} contains inf or NaN")
        got[k] = np.asarray(g)
    return got


def _line(what: str, measure: str) -> str:
    return f"{what:<52s} {measure}"


def _bound(err: float, tol: float) -> str:
    """"< tol" for an error within it, "must be < tol" for one that is not (a FAIL line)."""
    return f"< {tol:.0e}" if err < tol else f"must be < {tol:.0e}"


def _rel(got, want, floor) -> float:
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), floor))


def _pair(out: Outcome, value):
    out.require(isinstance(value, tuple) and len(value) == 2,
                f"bert_forward should return (loss, cache), got {type(value).__name__}",
                "return the loss and what bert_backward needs, as a tuple")
    return value


def _to(xp, value):
    """``value``'s arrays as ``xp``'s (CuPy's, for stage (c)); a dict's values one by one."""
    if isinstance(value, dict):
        return {k: _to(xp, v) for k, v in value.items()}
    return xp.asarray(value) if isinstance(value, np.ndarray) else value


def _host(value):
    """A device array back on the host (``get()``); anything else as it is."""
    return value.get() if hasattr(value, "get") and not isinstance(value, dict) else value
