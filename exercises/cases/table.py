"""A table of usual mistakes, one per exercise: each case written once, to plant it and to recognise it.

A ``Case`` is a wrong answer: the function(s) a student might write in place
of the right ones, and the hint that explains the mistake.  ``case.module``
is the exercise's right functions with the wrong ones in their place, so the
same case serves twice:

* planted: the tests run the checker on ``case.module`` and require the
  case's hint under the first FAIL line;
* recognised: a check asks ``Table.each(compute)`` what every case's module
  gives for ``compute`` (the check's own call, on its own inputs), and
  ``known``, ``raised`` and ``matching`` turn that into the hint of the case
  whose result is the student's.  A check that recognises a mistake by a
  sign instead (the statistics of a random output) gives the hint of the
  case it names, ``case.hint``: the text is written in the case alone.

The right functions of a table are plain NumPy (or ``minibert``), never the
instructor's solutions.  Still they are right answers, so the student copy
holds none: there a table is ``recorded.py``'s, the hints and what each case
gave on each check's inputs, recorded when the copy was made (``recording``),
and ``each`` reads them instead of running code.
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from minibert.gradcheck import max_rel_error

from .fingerprint import Unkeyable, key

SAME = 1e-6        # a student's value this close to a case's is that case (as harness.diagnose)


@dataclass(frozen=True)
class Case:
    exercise: str
    name: str
    hint: str
    wrong: dict = field(repr=False)          # {function name: the wrong function (None in a student copy)}
    right: dict = field(repr=False)          # the exercise's right functions
    mutant: bool = False                     # made by ``mutation.py``, not written by hand

    @property
    def module(self):
        """The exercise's functions, right but for this case's."""
        ns = SimpleNamespace(**{**self.right, **self.wrong})
        ns.__name__ = f"{self.exercise} ({self.name})"
        ns.is_mutant = self.mutant       # a check may give a mutant the solution's own cache (attention_dropout)
        return ns

    def text(self, fields: dict) -> str:
        return self.hint.format(**fields) if fields and not self.mutant else self.hint


@dataclass(frozen=True)
class Raised:
    """An exception a case's computation raised: its type's name and its message."""
    name: str
    message: str


@dataclass(frozen=True)
class Outcome:
    """What one case gave for a check's computation: a ``value``, or ``raised`` an exception.
    ``like_right``: the value is the right answer's (finite, same shape, within SAME), so no
    check on these inputs can tell this case from the right answer."""
    case: Case
    value: object
    raised: Raised | None
    like_right: bool


class Table:
    """The cases of one exercise, in the order a check tries them (the first that matches wins)."""

    def __init__(self, exercise: str, **right):
        self.exercise = exercise
        self.right = right
        self.functions = tuple(right)
        self.cases: list[Case] = []
        self.variants: list[tuple[str, object]] = []
        self.recorded: dict | None = None     # {key: rows}, in a student copy (recorded.py)
        self._mutants: list[Case] | None = None
        self.mutate = None                    # table -> its mutants (``mutation.mutant_cases``, set by TABLES)

    @property
    def mutants(self) -> list[Case]:
        """The cases made by mutating the solution (``mutation.py``), after the hand-written ones; made
        at the first use (none where there is no solution; a student copy's are read from its file)."""
        if self._mutants is None:
            self._mutants = self.mutate(self) if self.mutate is not None else []
        return self._mutants

    @property
    def every(self) -> list[Case]:
        return self.cases + self.mutants

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

    # ------------------------------------------------------------------ what the cases give
    def each(self, compute, of=None, mutants=False, only=None, same=None):
        """An ``Outcome`` for each case, in order: what ``compute(case.module)`` gives.

        ``of``: a function name, to see only the cases that change it (a
        gradient check looks for the backward pass's mistakes, not for what a
        wrong forward would give); ``mutants``: the mutants too, after the
        hand-written cases; ``only``: a set of case names, the others not
        computed (nor given); ``same(value, right)``: when a case's value is the
        right one's (a statistic, say), in place of "within SAME".  Lazy where the
        code runs, so that the cases run only when a check fails and looks for the reason.
        """
        if self.recorded is not None:              # a student copy: what was recorded, or nothing
            try:
                rows = self.recorded.get(key(self.exercise, compute), ())
            except Unkeyable:
                rows = ()
        elif _RECORDING is not None:
            rows = _RECORDING.rows(self, compute, same)
        else:
            rows = self._rows(compute, of, mutants, only, same)
        for case, (value, raised, like_right) in zip(self.every, rows):
            if (of is None or of in case.wrong) and (mutants or not case.mutant) and (only is None or case.name in only):
                yield Outcome(case, value, raised, like_right)

    def _rows(self, compute, of=None, mutants=True, only=None, same=None):
        """(value, raised, like_right) for each case, computed now, one by one; a case that does not
        change function ``of``, or a mutant when ``mutants`` is false, is not computed (``each`` leaves
        it out)."""
        # the right value, computed at the first case that needs it: the table's right functions' for a
        # hand-written case, the solution's for a mutant (a random rule's draws may differ between them)
        right: dict = {}

        def like_right(value, case):
            if case.mutant not in right:
                module = SimpleNamespace(**case.right, is_mutant=True) if case.mutant else self.module
                try:
                    right[case.mutant] = compute(module)
                except Exception:
                    right[case.mutant] = _FAILED
            want = right[case.mutant]
            if want is _FAILED:
                return False
            if same is not None:
                return same(value, want)
            try:
                value, want = np.asarray(value, dtype=np.float64), np.asarray(want, dtype=np.float64)
            except (TypeError, ValueError):       # not numbers (a list of strings): the same, or not
                return _equal(value, want)
            return (value.shape == want.shape and bool(np.isfinite(value).all())
                    and max_rel_error(value, want) < SAME)
        for case in self.every:
            if (of is not None and of not in case.wrong) or (case.mutant and not mutants) or \
                    (only is not None and case.name not in only):
                yield None, None, True
                continue
            try:
                value = compute(case.module)
            except Exception as exc:
                yield None, Raised(type(exc).__name__, _message(exc)), False
                continue
            yield value, None, like_right(value, case)

    def known(self, compute, of=None, **fields) -> "Known":
        """(value, hint) of each case whose ``compute(module)`` differs from the right one's: for ``compare``.

        ``fields`` fill the ``{names}`` of a hint (a size the check chose,
        say).  A case that raises is left out here: ``raised`` recognises it.
        The hand-written cases come first, then ``LATER`` (``compare`` asks
        its ``explain`` there), then the mutants, those that give the same
        value here as one, their hints joined.  The mutants' hint is made when asked
        (``diagnose``): those that a probe the student passed sees as wrong are left out of it.
        """
        return Known(self, compute, of, fields)

    def _known(self, compute, of, fields):
        groups: list = []                           # [value, [cases]] of the mutants
        for o in self.each(compute, of, mutants=True):
            if o.raised is not None or o.like_right:
                continue
            try:
                value = np.asarray(o.value, dtype=np.float64)
            except Exception:
                continue
            if not o.case.mutant:
                yield value, o.case.text(fields)
                continue
            same = next((g for g in groups if g[0].shape == value.shape and _same(g[0], value)), None)
            if same is None:
                groups.append([value, [o.case]])
            else:
                same[1].append(o.case)
        yield LATER
        for value, group in groups:
            yield value, lambda group=group: self._still(group)

    def _still(self, group) -> tuple:
        """(the joined hints of the mutants of ``group`` that every probe the student passed (``PASSED``) sees
        as right, or None when none is left; the joined hints of all of them)."""
        left = {c.name for c in group}
        for table, compute, of in PASSED:
            if table is self and left:
                left -= {o.case.name for o in self.each(compute, of, mutants=True, only=left)
                         if o.raised is not None or not o.like_right}
        hints = list(dict.fromkeys(c.hint for c in group if c.name in left))
        return (joined(hints) if hints else None), joined(list(dict.fromkeys(c.hint for c in group)))

    def raised(self, compute, **fields):
        """The hint for a student's exception: that of the first case that raises the same one, or None.

        For ``call``'s ``hint``: ``compute(module)`` makes the call the check
        made, on the same inputs, so the same mistake raises the same error.
        """
        def hint(exc):
            # by name: an exception raised in a worker comes back as a class of the same name
            mine = Raised(type(exc).__name__, _message(exc))
            return next((o.case.text(fields) for o in self.each(compute) if o.raised == mine), None)
        return hint

    def matching(self, compute, got, **fields):
        """The hint of the first case whose value is ``got``'s, NaN and inf where ``got`` has them; or None.

        For a result that is not finite, which ``known`` leaves out: an
        overflow shows where it happens, and that pattern names the mistake.
        """
        got = np.asarray(got, dtype=np.float64)
        for o in self.each(compute, mutants=True):
            if o.raised is not None:
                continue
            try:
                value = np.asarray(o.value, dtype=np.float64)
            except Exception:
                continue
            if value.shape == got.shape and np.allclose(value, got, rtol=SAME, atol=0.0, equal_nan=True):
                return o.case.text(fields)
        return None


_FAILED = object()                                # the right functions raised: nothing is like them


def _equal(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


LATER = "the hand-written cases end here"       # in ``known``: the mutants follow
PASSED: list = []     # (table, compute, of) of each comparison the student passed in the check running now
MOST = 3                                           # hints named at most, of mutants that give the same value


class Known:
    """``Table.known``'s (value, hint) pairs: iterable, and it remembers what it computes."""

    def __init__(self, table, compute, of, fields):
        self.table, self.compute, self.of, self.fields = table, compute, of, fields

    def __iter__(self):
        return self.table._known(self.compute, self.of, self.fields)

    def passed(self) -> None:
        """The student's result was right here: a mutant that is not clears no later diagnosis."""
        PASSED.append((self.table, self.compute, self.of))


def joined(hints: list) -> str:
    """One hint for mutants whose results agree on a check's inputs: the first, or the few that fit."""
    if len(hints) == 1:
        return hints[0]
    more = f" (and {len(hints) - MOST} more)" if len(hints) > MOST else ""
    return ("one of these slips, which give the same numbers here: " + "; or ".join(hints[:MOST]) + more)


def _same(a, b) -> bool:
    return bool(np.isfinite(a).all() and np.isfinite(b).all()) and max_rel_error(a, b) < SAME


class Recording:
    """What every case gives for every computation the checks ask about, while they run: the
    student copy's tables (``recorded.py``).  ``unkeyable``: computations that could not be
    named (their inputs hold an object ``fingerprint.key`` does not know), so not recorded."""

    def __init__(self):
        self.entries: dict = {}          # {exercise: {key: rows}}
        self.unkeyable: list = []

    def rows(self, table: Table, compute, same=None):
        try:
            k = key(table.exercise, compute)
        except Unkeyable as exc:
            self.unkeyable.append(f"{table.exercise}: {exc}")
            return list(table._rows(compute, same=same))
        found = self.entries.setdefault(table.exercise, {})
        if k not in found:
            found[k] = list(table._rows(compute, same=same))
        return found[k]


_RECORDING: Recording | None = None


def recording_now() -> bool:
    return _RECORDING is not None


@contextlib.contextmanager
def recording(into: Recording):
    """Record every ``Table.each`` into ``into`` while the block runs."""
    global _RECORDING
    before, _RECORDING = _RECORDING, into
    try:
        yield into
    finally:
        _RECORDING = before


def _message(exc) -> str:
    """An exception's text without the name of the function it names first (``f() missing 1 ...``):
    a case's function is not defined where the student's is, so their qualified names differ."""
    return re.sub(r"^[\w.<>]+\(\) ", "() ", str(exc))
