"""``python -m exercises``: list the exercises, check them, make the student copy.

    python -m exercises list
    python -m exercises check layernorm              your file exercises/stubs/layernorm.py
    python -m exercises check all                    every exercise
    python -m exercises check gelu --path my_gelu.py a file of your own
    python -m exercises check all --path DIR         DIR/<name>.py for each exercise
    python -m exercises check all --solutions        the instructor solutions
    python -m exercises check gelu --timeout 10      another time limit (s per exercise)
    python -m exercises hint layernorm [LEVEL]       a hint: 1 the idea, 2 the shapes, 3 the formula
    python -m exercises make-student DIR             copy the exercises and notebooks without solutions
    python -m exercises grade SUBMISSIONS --out DIR  grade a class (see grade.py)
    python -m exercises export-nbgrader DIR          the course as an nbgrader assignment (nbgrader_export.py)
    python -m exercises gradescope-bundle OUT.zip    the exercises as a Gradescope autograder (gradescope.py)

The exit status of ``check`` is 0 when every exercise checked passes, 1 otherwise.
The student's code runs in a worker process, one per exercise (sandbox.py):
whatever it does, the verdict and the exit status are this process's.
"""
from __future__ import annotations

import argparse
import importlib
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

from . import CAPSTONE, CHECKABLE, EXERCISES, QUESTIONS, QUESTIONS_FILE, file_of
from . import gradescope, nbgrader_export
from .grade import add_grade_parser, refuse_unknown, run_grade
from .sandbox import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT, TIMEOUTS, LoadError, Worker, check_isolated, source_file
from .student_copy import INSTRUCTOR_ONLY, NOTEBOOK_DATA, NOTEBOOKS, write_student_exercises
from .student_notebooks import make_student_notebooks
from .worker import import_message, source_module

HERE = Path(__file__).resolve().parent


def load_module(name: str, source: str = "stubs"):
    """The module for exercise ``name``, imported into THIS process (for ``run_check`` in-process).

    source: "stubs" (exercises/stubs/NAME.py), "solutions", a .py file, or a
    directory holding NAME.py.  Raises ``LoadError`` with a readable message
    when it cannot be imported (a syntax error, a missing file...).  The
    command line does not use it: it runs the student's code in a worker
    process (``sandbox.check_isolated``); importing here is for self-checks
    (a notebook, the tests of the checkers), never for a grade.
    """
    path = source_file(name, source)
    if source in ("stubs", "solutions"):
        try:
            return importlib.import_module(f"exercises.{source}.{file_of(name)}")
        except Exception as exc:
            raise LoadError(import_message(exc, path)) from None
    module, loader = source_module(f"_exercise_{name}_{abs(hash(str(path)))}", path)
    try:
        loader.exec_module(module)
    except Exception as exc:
        raise LoadError(import_message(exc, path)) from None
    return module


def check(names, source="stubs", out=sys.stdout, timeout=None, memory_mb=DEFAULT_MEMORY_MB) -> bool:
    """Check the named exercises, each in its own worker process; print a verdict for each;
    return True when all pass."""
    results = []
    worker = Worker(memory_mb)     # it imports NumPy while this process imports the checkers
    try:
        try:
            from .checks import run_check  # noqa: F401
        except ImportError as exc:   # the checkers compare with minibert: it must be installed
            print(f"cannot run the checkers: {exc}. They compare your code with minibert's, so install "
                  "minibert first (pip install <path to the minibert repository>).", file=out)
            return False
        for i, name in enumerate(names):
            # the next exercise's worker starts while this one is checked
            current, worker = worker, (Worker(memory_mb) if i + 1 < len(names) else None)
            report = check_isolated(name, source, timeout, memory_mb, worker=current)
            print(report.render(), file=out)
            print(file=out)
            results.append(report)
    finally:
        if worker is not None:
            worker.close()
    if len(results) > 1:
        passed = sum(r.passed for r in results)
        print(f"{passed} of {len(results)} exercises pass: " +
              ", ".join(f"{r.name} {'PASS' if r.passed else r.status.upper()}" for r in results), file=out)
    return all(r.passed for r in results)


MARKER = ".minibert-student-copy"          # what a student copy holds, so that --force knows one it made


class Refusal(Exception):
    """make-student will not do it; the message says why, in one line."""


def make_student(target: Path, force: bool = False, out=sys.stdout) -> None:
    """Copy the exercises package to ``target/exercises`` without the instructor files, and the
    notebooks to ``target/notebooks`` with their exercise cells as stubs (``student_notebooks.py``).

    The copy is written in a folder beside and swapped in only when whole: a failure leaves what was
    there.  ``force`` replaces a previous student copy, known by its marker file, and nothing else;
    a ``target`` that is, holds or lies inside the repository is refused.  Raises ``Refusal``."""
    repo = HERE.parent.resolve()
    try:
        where = target.resolve()
    except (OSError, RuntimeError) as exc:
        raise Refusal(f"{target} cannot be used: {exc}") from None
    if where == repo or repo in where.parents or where in repo.parents:
        raise Refusal(f"{target} {'is' if where == repo else 'lies inside' if repo in where.parents else 'holds'} "
                      f"the repository {repo}: the student copy goes to a folder of its own, outside it")
    if where.exists() and not where.is_dir():
        raise Refusal(f"{target} is a file, not a folder")
    made = [where / "exercises", where / "notebooks",
            *(where / d.relative_to(HERE.parent) for d in NOTEBOOK_DATA if d.is_dir())]
    present = [p for p in made if p.exists() or p.is_symlink()]
    if present and not force:
        raise Refusal(f"{present[0]} exists already; pass --force to replace a student copy made here before")
    if present and not (where / MARKER).is_file():
        raise Refusal(f"{present[0]} exists, but {target} holds no student copy made by make-student "
                      f"(no {MARKER} file): --force replaces only such a copy; choose another folder")
    for path in present:
        if path.is_symlink():
            raise Refusal(f"{path} is a symbolic link: --force does not replace links; remove it yourself")
    try:
        where.mkdir(parents=True, exist_ok=True)
        new = Path(tempfile.mkdtemp(prefix=".student-copy-", dir=where))
    except OSError as exc:
        raise Refusal(f"cannot write to {target}: {exc.strerror or exc}") from None
    try:
        written, cells = _write_student_copy(new)
        # whole: swap it in, one folder at a time, each old one moved aside before it is deleted
        old = new / ".old"
        old.mkdir()
        for path in made:
            part = new / path.relative_to(where)
            if not part.exists():
                continue
            if path.exists():
                os.replace(path, old / path.name)
            path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(part, path)
        (where / MARKER).write_text("made by python -m exercises make-student; --force replaces it\n")
    except OSError as exc:
        raise Refusal(f"cannot write the student copy to {target}: {exc.strerror or exc}"
                      + (f" ({exc.filename})" if exc.filename else "")) from None
    finally:
        shutil.rmtree(new, ignore_errors=True)
    print(f"student version written to {where / 'exercises'}", file=out)
    print(f"  (left out: {', '.join(INSTRUCTOR_ONLY)}, and the usual mistakes' code: cases/ holds them as "
          "recorded data)", file=out)
    if written is not None:
        print(f"notebooks written to {where / 'notebooks'}: {len(written)} notebooks, {cells} exercise cells "
              "as stubs", file=out)
    print(f"students run, from {target}:  python -m exercises check all", file=out)


def _write_student_copy(dest: Path):
    """The student copy, written into the new folder ``dest``: (notebooks written or None, their cells)."""
    write_student_exercises(dest / "exercises")
    if not NOTEBOOKS.is_dir():
        return None, 0
    written, cells = make_student_notebooks(NOTEBOOKS, dest / "notebooks")
    for data in NOTEBOOK_DATA:
        if data.is_dir():
            shutil.copytree(data, dest / data.relative_to(HERE.parent))
    return written, cells


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m exercises",
                                     description="minibert's exercises: write BERT's pieces by hand.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the exercises")
    p_check = sub.add_parser("check", help="check exercises")
    p_check.add_argument("names", nargs="+", metavar="NAME", help="exercise names, or 'all'")
    group = p_check.add_mutually_exclusive_group()
    group.add_argument("--solutions", action="store_true", help="check the instructor solutions")
    group.add_argument("--path", help="a .py file (one exercise) or a directory of NAME.py files")
    _limits(p_check)
    p_hint = sub.add_parser("hint", help="a hint for an exercise: 1 the idea, 2 the shapes, 3 the formula")
    p_hint.add_argument("name", metavar="NAME")
    p_hint.add_argument("level", nargs="?", type=int, default=1, metavar="LEVEL", help="1, 2 or 3 (default 1)")
    p_make = sub.add_parser("make-student", help="copy the exercises without the solutions")
    p_make.add_argument("dir", type=Path)
    p_make.add_argument("--force", action="store_true",
                        help="replace a student copy made in DIR before (known by its marker file)")
    add_grade_parser(sub, _limits)
    nbgrader_export.add_parser(sub)
    gradescope.add_parser(sub)
    return parser


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)

    if args.command == "list":
        width = max(map(len, CHECKABLE))
        for name, what in EXERCISES.items():
            print(f"  {name:<{width}}  {what}")
        print(f"\nthe graded questions, each a function of {QUESTIONS_FILE}.py (NN: its notebook):")
        for name, what in QUESTIONS.items():
            print(f"  {name:<{width}}  {what}")
        print("\nthe capstone, once the pieces pass (notebook 13):")
        for name, what in CAPSTONE.items():
            print(f"  {name:<{width}}  {what}")
        print("\ncheck one with:  python -m exercises check NAME")
        return 0
    if args.command == "hint":
        from .notebook import hint
        try:
            hint(args.name, args.level)
        except ValueError as exc:
            parser.error(str(exc))
        return 0
    if args.command == "make-student":
        try:
            make_student(args.dir, args.force)
        except Refusal as exc:
            print(f"python -m exercises make-student: {exc}", file=sys.stderr)
            return 2
        return 0
    elsewhere = {"grade": run_grade, "gradescope-bundle": gradescope.run, "export-nbgrader": nbgrader_export.run}
    if args.command in elsewhere:
        return elsewhere[args.command](args, parser)

    names = list(CHECKABLE) if args.names == ["all"] else args.names
    refuse_unknown(names, parser, CHECKABLE)
    source = "solutions" if args.solutions else (args.path or "stubs")
    if args.path and Path(args.path).is_file() and len(names) > 1:
        parser.error("--path FILE checks one exercise; give a directory to check several")
    try:
        return 0 if check(names, source, timeout=args.timeout, memory_mb=args.memory_mb) else 1
    except KeyboardInterrupt:           # Ctrl-C here, at the keyboard: the workers are gone already
        print("interrupted", file=sys.stderr)
        return 130


def _limits(p) -> None:
    p.add_argument("--timeout", type=_positive, default=None, metavar="S",
                   help=f"seconds each exercise may take (default {DEFAULT_TIMEOUT:g}; "
                        f"{', '.join(f'{n} {t:g}' for n, t in TIMEOUTS.items())})")
    p.add_argument("--memory-mb", type=_positive, default=DEFAULT_MEMORY_MB, metavar="MB",
                   help=f"address space of the process that runs the student's code, where the platform "
                        f"can limit it (default {DEFAULT_MEMORY_MB})")


def _positive(text: str) -> float:
    """A limit on the command line: a positive, finite number, or a one-line usage error."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return value
