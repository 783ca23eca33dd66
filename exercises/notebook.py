"""The exercises inside the notebooks: write a piece where it is taught, and check it in the next cell.

    from exercises.notebook import check, hint
    check("layernorm", layernorm_forward=layernorm_forward, layernorm_backward=layernorm_backward)
    hint("layernorm")        # the idea; hint("layernorm", 2) the shapes, 3 the formula

``check`` runs exercise NAME's own checker (``exercises/checks/``), the one
``python -m exercises check NAME`` runs, on the functions the cell wrote, and
prints its verdict: one line when they pass, the whole report with the first
FAIL line's hint when they do not.  A cell may write only some of an
exercise's functions: then only the checks of those run (the checker's parts,
``checks/__init__.py``).  A forward and its backward share a cache whose
layout is yours, so they are checked together.

The functions run in this process (a notebook is a self-check, not a grade:
``python -m exercises grade`` runs a class's files in worker processes).
``graded_check`` is ``check`` for nbgrader's test cells (``nbgrader_export.py``):
the same report, and an exception when it does not pass.
"""
from __future__ import annotations

import contextlib
import sys
from types import SimpleNamespace

from . import CAPSTONE, CHECKABLE, QUESTIONS
from .calls import no_exit
from .hints import HINTS, LEVELS, QUESTION_LEVELS

def check(name: str, **functions) -> bool:
    """Check ``functions`` (name=function, as the exercise's stub names them) with exercise ``name``'s checker.

    Prints the verdict; returns True when every check passes.  Never raises for
    the student's code: an exception inside it is a FAIL line with its hint.
    """
    from .cases import TABLES
    from .checks import parts_for, run_check
    from .checks.bert import FUNCTIONS, MODEL_FUNCTIONS

    if not isinstance(name, str):
        raise ValueError(f"check's first argument is an exercise's name, a string as in "
                         f"check(\"gelu\", gelu_forward=gelu_forward), not {name!r}")
    if name not in CHECKABLE:
        raise ValueError(f"no exercise {name!r}; the exercises are: {', '.join(CHECKABLE)}")
    names = FUNCTIONS if name in CAPSTONE else (name,) if name in QUESTIONS else TABLES[name].functions
    unknown = sorted(set(functions) - set(names))
    if not functions or unknown:
        raise ValueError(f"exercise {name!r} checks the functions {', '.join(names)}; "
                         f"pass yours by name, e.g. check({name!r}, {names[0]}={names[0]})"
                         + (f" (not one of them: {', '.join(unknown)})" if unknown else ""))
    for key, func in functions.items():
        if not callable(func):
            raise TypeError(f"{key} should be the function you wrote, got a {type(func).__name__}")
    if name not in QUESTIONS and not (set(functions) >= set(MODEL_FUNCTIONS) if name in CAPSTONE
                                      else parts_for(name, functions)):
        raise ValueError(f"exercise {name!r} checks {', '.join(functions)} together with "
                         f"{', '.join(n for n in names if n not in functions)}: a forward and its backward share "
                         f"a cache; pass them all, e.g. check({name!r}, "
                         + ", ".join(f"{n}={n}" for n in names) + ")")
    module = SimpleNamespace(**{k: no_exit(f) for k, f in functions.items()})
    module.__name__ = f"{name} (your {', '.join(functions)})"
    report = run_check(name, module, functions)
    if report.passed and name in QUESTIONS:
        print(f"[PASS] {name}: your answer is right.")
    elif report.passed:
        print(f"[PASS] {name}: your {', '.join(functions)} passed all {report.n_ok} checks.")
    else:
        print(report.render())
        if report.status == "fail":
            print(f"  (more help: hint({name!r}) in a cell, or python -m exercises hint {name})")
    return report.passed


class NotPassed(Exception):
    """An exercise's check did not pass: nbgrader gives its test cell no points."""


def graded_check(name: str, **functions) -> None:
    """``check`` in a test cell that nbgrader grades: raises ``NotPassed`` when the check does not pass.

    nbgrader gives a test cell its points when the cell shows no error and writes nothing to stderr, so
    the check's warnings and stderr are printed to stdout: the verdict alone decides."""
    with contextlib.redirect_stderr(sys.stdout):           # warnings too: they are written to sys.stderr
        passed = check(name, **functions)
    if not passed:
        raise NotPassed(f"{name} does not pass yet: the report above gives the first failing check and its hint")


def hint(name: str, level: int = 1, out=None) -> None:
    """Print exercise ``name``'s hint of ``level``: 1 the idea, 2 the shapes, 3 the formula."""
    out = out or sys.stdout
    if not isinstance(name, str) or name not in HINTS:
        raise ValueError(f"no hints for {name!r}; exercises with hints: {', '.join(HINTS)}")
    tiers, levels = HINTS[name], QUESTION_LEVELS if name in QUESTIONS else LEVELS
    if isinstance(level, str) and level.strip().isdigit():
        level = int(level)                 # hint("gelu", "2"), as typed on a command line
    if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= len(tiers):
        raise ValueError(f"{name} has hints 1 to {len(tiers)} ({', '.join(levels[:len(tiers)])}), not {level!r}")
    print(f"{name}, hint {level} of {len(tiers)} ({levels[level - 1]}):", file=out)
    print(tiers[level - 1], file=out)
    if level < len(tiers):
        print(f"(next: hint({name!r}, {level + 1}))", file=out)
