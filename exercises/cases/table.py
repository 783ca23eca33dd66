"""A table of usual mistakes, one per exercise: each case written once, to plant it and to recognise it.

A ``Case`` is a wrong answer: the function(s) a student might write in place
of the right ones, and the hint that explains the mistake.  ``case.module``
is the exercise's right functions with the wrong ones in their place, so the
same case serves twice:

* planted: the tests run the checker on ``case.module`` and require the
  case's hint under the first FAIL line;
* recognised: where a check compares the student's value with the right one,
  ``Table.known`` runs every case's module on the check's own inputs; a
  student's value that matches a case's (and not the right one) gets that
  case's hint.  A check that recognises a mistake by a sign instead (the
  statistics of a random output, an exception) gives the hint of the case it
  names, ``case.hint``: the text is written in the case alone.

The right functions of a table are plain NumPy (or ``minibert``), never the
instructor's solutions: the checker runs the cases in the student copy too.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from minibert.gradcheck import max_rel_error

SAME = 1e-6        # a student's value this close to a case's is that case (as harness.diagnose)


@dataclass(frozen=True)
class Case:
    exercise: str
    name: str
    hint: str
    wrong: dict = field(repr=False)          # {function name: the wrong function}
    right: dict = field(repr=False)          # the exercise's right functions

    @property
    def module(self):
        """The exercise's functions, right but for this case's."""
        ns = SimpleNamespace(**{**self.right, **self.wrong})
        ns.__name__ = f"{self.exercise} ({self.name})"
        return ns


class Table:
    """The cases of one exercise, in the order a check tries them (the first that matches wins)."""

    def __init__(self, exercise: str, **right):
        self.exercise = exercise
        self.right = right
        self.cases: list[Case] = []
        self.variants: list[tuple[str, object]] = []

    def case(self, name: str, hint: str, **wrong) -> Case:
        """Add a case: ``wrong`` maps function names to the functions that replace the right ones."""
        unknown = set(wrong) - set(self.right)
        assert not unknown, f"{self.exercise} has no function {unknown}"
        new = Case(self.exercise, name, hint, dict(wrong), self.right)
        self.cases.append(new)
        return new

    def variant(self, name: str, **functions) -> None:
        """A right answer written another way than the table's own, which the checker must pass."""
        self.variants.append((name, SimpleNamespace(**{**self.right, **functions})))

    @property
    def module(self):
        return SimpleNamespace(**self.right)

    def known(self, compute, of=None, **fields):
        """(value, hint) of each case whose ``compute(module)`` differs from the right one's: for ``compare``.

        A generator, so that the cases run only when a check fails and looks
        for the reason.  ``fields`` fill the ``{names}`` of a hint (a size the
        check chose, say).  A case that raises where the right answer does
        not is left out here: ``raised`` recognises it.  ``of``: a function
        name, to try only the cases that change it (a gradient check looks for
        the backward pass's mistakes, not for what a wrong forward would give).
        """
        right = np.asarray(compute(self.module), dtype=np.float64)
        for case in self.cases:
            if of is not None and of not in case.wrong:
                continue
            try:
                value = np.asarray(compute(case.module), dtype=np.float64)
            except Exception:
                continue
            if value.shape == right.shape and np.isfinite(value).all() and max_rel_error(value, right) < SAME:
                continue                      # this check cannot tell the case from the right answer
            yield value, case.hint.format(**fields) if fields else case.hint

    def raised(self, compute, **fields):
        """The hint for a student's exception: that of the first case that raises the same one, or None.

        For ``call``'s ``hint``: ``compute(module)`` makes the call the check
        made, on the same inputs, so the same mistake raises the same error.
        """
        def hint(exc):
            for case in self.cases:
                try:
                    compute(case.module)
                except Exception as mine:
                    # by name: an exception raised in a worker comes back as a class of the same name
                    if type(exc).__name__ == type(mine).__name__ and _message(exc) == _message(mine):
                        return case.hint.format(**fields) if fields else case.hint
            return None
        return hint

    def matching(self, compute, got, **fields):
        """The hint of the first case whose value is ``got``'s, NaN and inf where ``got`` has them; or None.

        For a result that is not finite, which ``known`` leaves out: an
        overflow shows where it happens, and that pattern names the mistake.
        """
        got = np.asarray(got, dtype=np.float64)
        for case in self.cases:
            try:
                value = np.asarray(compute(case.module), dtype=np.float64)
            except Exception:
                continue
            if value.shape == got.shape and np.allclose(value, got, rtol=SAME, atol=0.0, equal_nan=True):
                return case.hint.format(**fields) if fields else case.hint
        return None


def _message(exc) -> str:
    """An exception's text without the name of the function it names first (``f() missing 1 ...``):
    a case's function is not defined where the student's is, so their qualified names differ."""
    return re.sub(r"^[\w.<>]+\(\) ", "() ", str(exc))
