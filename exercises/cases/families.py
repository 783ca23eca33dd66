"""Each exercise's family of mutants, sorted by what the checks' inputs and an oracle see of them.

``family(exercise)`` runs the exercise's checker on the right answer while
the table records what every mutant gives for every computation a check
makes (its probes), and runs ``oracle.ORACLE`` on each mutant.  A mutant is

* ``seen``: some probe gives a value that is not the right one; mutants seen
  alike on every probe form a group, and the hint names the group;
* ``crashes``: no probe gives a value, some raise (the student sees the error) or give NaN or inf
  (which no hint matches);
* ``unseen``: every probe gives the right value.

A group whose members the oracle tells apart is a gap in the probes (two
different slips the checks cannot tell apart); an unseen mutant that the
oracle tells from the right answer is one the probes cannot diagnose.
``tests/test_mutation.py`` requires neither; ``tools/mutation_census.py``
prints the table.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from minibert.gradcheck import max_rel_error

from . import TABLES
from .oracle import ORACLE
from .table import SAME, Recording, recording


@dataclass
class Family:
    exercise: str
    size: int = 0
    probes: int = 0
    groups: list = field(default_factory=list)       # [[case, ...]], seen alike on every probe
    crashes: list = field(default_factory=list)
    unseen: list = field(default_factory=list)
    gaps: list = field(default_factory=list)         # [(case, case)]: alike on the probes, not on the oracle
    undiagnosed: list = field(default_factory=list)  # unseen, yet the oracle tells them from the right answer

    @property
    def told_apart(self) -> int:
        """Seen mutants whose group has no other member."""
        return sum(len(g) == 1 for g in self.groups)

    @property
    def equivalent(self) -> int:
        """Seen mutants in groups of more than one, equal on the oracle too."""
        return sum(len(g) for g in self.groups if len(g) > 1)


def family(exercise: str) -> Family:
    from ..checks import run_check

    table = TABLES[exercise]
    rec = Recording()
    with recording(rec):
        run_check(exercise, table.module)
    rows = list(rec.entries.get(exercise, {}).values())
    n = len(table.cases)
    fam = Family(exercise, len(table.mutants), len(rows))
    right = oracle_view(exercise, table.mutants[0].right) if table.mutants else None
    for j, case in enumerate(table.mutants):
        seen = [_view(r[n + j]) for r in rows]
        if not any(v[0] == "value" for v in seen):
            if any(v[0] == "raised" for v in seen):
                fam.crashes.append(case)
            else:
                fam.unseen.append(case)
                if not alike(oracle_view(exercise, case.module), right):
                    fam.undiagnosed.append(case)
            continue
        mine = (seen, oracle_view(exercise, case.module))
        for group in fam.groups:
            if all(_alike(a, b) for a, b in zip(group[0][1][0], seen)):
                other = next((c for c, (_, o) in group if not alike(o, mine[1])), None)
                if other is not None:
                    fam.gaps.append((other, case))
                group.append((case, mine))
                break
        else:
            fam.groups.append([(case, mine)])
    fam.groups = [[c for c, _ in g] for g in fam.groups]
    return fam


def _view(row):
    value, raised, like_right = row
    if raised is not None:
        return ("raised", raised.name, raised.message)
    if like_right:
        return ("right",)
    if not informative(value):          # NaN, inf or a call that raised inside: no hint can match it
        return ("raised", "not finite", "")
    return ("value", value)


def informative(value) -> bool:
    """A result a student's could be matched with: finite numbers, strings, no None (a call that raised)."""
    if value is None:
        return False
    if isinstance(value, str):
        return True
    if isinstance(value, (list, tuple)):
        return all(informative(v) for v in value)
    try:
        return bool(np.isfinite(np.asarray(value, dtype=np.float64)).all())
    except (TypeError, ValueError):
        return True


def _alike(a, b) -> bool:
    if a[0] != b[0]:
        return False
    return a == b if a[0] != "value" else alike(a[1], b[1])


def oracle_view(exercise: str, module):
    """What ``module`` gives on the oracle's inputs, or the exception it raises (its type's name)."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ORACLE[exercise](_Module(module), np.random.default_rng(12345))
    except Exception as exc:
        return ("raised", type(exc).__name__)


class _Module:
    def __init__(self, functions):
        self.f = functions if isinstance(functions, dict) else vars(functions)

    def __getattr__(self, name):
        return self.f[name]


def alike(a, b) -> bool:
    """The same numbers (to SAME), strings and structure, NaN where NaN."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(alike(x, y) for x, y in zip(a, b))
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    try:
        x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    except (TypeError, ValueError):
        try:
            return bool(a == b)
        except Exception:
            return False
    if x.shape != y.shape:
        return False
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        return bool(np.array_equal(x, y, equal_nan=True))
    return x.size == 0 or max_rel_error(x, y) < SAME
