"""``python -m exercises``: list the exercises, check them, make the student copy.

    python -m exercises list
    python -m exercises check layernorm              your file exercises/stubs/layernorm.py
    python -m exercises check all                    every exercise
    python -m exercises check gelu --path my_gelu.py a file of your own
    python -m exercises check all --path DIR         DIR/<name>.py for each exercise
    python -m exercises check all --solutions        the instructor solutions
    python -m exercises make-student DIR             copy the exercises without solutions

The exit status is 0 when every exercise checked passes, 1 otherwise.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import shutil
import sys
import traceback
from pathlib import Path

from . import EXERCISES

HERE = Path(__file__).resolve().parent
# what the student copy leaves out: the solutions and the planted mistakes built from them
INSTRUCTOR_ONLY = ("solutions", "mistakes.py")


class LoadError(Exception):
    def __init__(self, message, hint="fix the file so that Python can import it, then run the check again"):
        super().__init__(message)
        self.hint = hint


def load_module(name: str, source: str = "stubs"):
    """The module to check for exercise ``name``.

    source: "stubs" (exercises/stubs/NAME.py), "solutions", a .py file, or a
    directory holding NAME.py.  Raises ``LoadError`` with a readable message
    when it cannot be imported (a syntax error, a missing file...).
    """
    if source in ("stubs", "solutions"):
        if source == "solutions" and not (HERE / "solutions").is_dir():
            raise LoadError("this copy of the exercises has no solutions (the student version)",
                            hint="check your own files: python -m exercises check NAME")
        try:
            return importlib.import_module(f"exercises.{source}.{name}")
        except Exception as exc:
            raise LoadError(_import_message(exc, HERE / source / f"{name}.py")) from None
    path = Path(source)
    if path.is_dir():
        path = path / f"{name}.py"
        if not path.is_file():
            raise LoadError(f"no such file: {path}",
                            hint=f"--path DIR reads DIR/{name}.py: name your file {name}.py, "
                                 "or give --path the file itself")
    if not path.is_file():
        raise LoadError(f"no such file: {path}",
                        hint="the file does not exist: check the path (a relative path starts from "
                             "the folder you run the command in)")
    spec = importlib.util.spec_from_file_location(f"_exercise_{name}_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise LoadError(_import_message(exc, path)) from None
    return module


def _import_message(exc: Exception, path: Path) -> str:
    if isinstance(exc, SyntaxError):
        return (f"{path.name} does not compile: {exc.msg} (line {exc.lineno}): "
                f"{(exc.text or '').strip()}")
    # an exception while the file runs (a NameError at module level, a failing import...):
    # name the line of the file it came from, as for an exception in a checked function
    where = ""
    target = path.resolve()
    mine = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == target]
    if mine:
        code = f": {mine[-1].line.strip()}" if mine[-1].line else ""
        where = f" (at {path.name} line {mine[-1].lineno}{code})"
    return f"could not import {path.name}: {type(exc).__name__}: {exc}{where}"


def check(names, source="stubs", out=sys.stdout) -> bool:
    """Check the named exercises, print a verdict for each, return True when all pass."""
    try:
        from .checks import run_check
        from .harness import Report
    except ImportError as exc:   # the checkers compare with minibert: it must be installed
        print(f"cannot run the checkers: {exc}. They compare your code with minibert's, so install "
              "minibert first (pip install <path to the minibert repository>).", file=out)
        return False

    results = []
    for name in names:
        try:
            module = load_module(name, source)
            report = run_check(name, module)
        except LoadError as exc:
            report = Report(name)
            report.fail(str(exc), exc.hint)
        print(report.render(), file=out)
        print(file=out)
        results.append(report)
    if len(results) > 1:
        passed = sum(r.passed for r in results)
        print(f"{passed} of {len(results)} exercises pass: " +
              ", ".join(f"{r.name} {'PASS' if r.passed else r.status.upper()}" for r in results), file=out)
    return all(r.passed for r in results)


def make_student(target: Path, force: bool = False, out=sys.stdout) -> None:
    """Copy the exercises package to ``target/exercises`` without the instructor files."""
    dest = target / "exercises"
    if dest.exists():
        if not force:
            raise SystemExit(f"{dest} exists already; pass --force to replace it")
        shutil.rmtree(dest)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", *INSTRUCTOR_ONLY)
    shutil.copytree(HERE, dest, ignore=ignore)
    print(f"student version written to {dest}", file=out)
    print(f"  (left out: {', '.join(INSTRUCTOR_ONLY)})", file=out)
    print(f"students run, from {target}:  python -m exercises check all", file=out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m exercises",
                                     description="minibert's exercises: write BERT's pieces by hand.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the exercises")
    p_check = sub.add_parser("check", help="check exercises")
    p_check.add_argument("names", nargs="+", metavar="NAME", help="exercise names, or 'all'")
    group = p_check.add_mutually_exclusive_group()
    group.add_argument("--solutions", action="store_true", help="check the instructor solutions")
    group.add_argument("--path", help="a .py file (one exercise) or a directory of NAME.py files")
    p_make = sub.add_parser("make-student", help="copy the exercises without the solutions")
    p_make.add_argument("dir", type=Path)
    p_make.add_argument("--force", action="store_true", help="replace DIR/exercises if it exists")
    args = parser.parse_args(argv)

    if args.command == "list":
        width = max(map(len, EXERCISES))
        for name, what in EXERCISES.items():
            print(f"  {name:<{width}}  {what}")
        print("\ncheck one with:  python -m exercises check NAME")
        return 0
    if args.command == "make-student":
        make_student(args.dir, args.force)
        return 0

    names = list(EXERCISES) if args.names == ["all"] else args.names
    unknown = [n for n in names if n not in EXERCISES]
    if unknown:
        parser.error(f"unknown exercise(s) {', '.join(unknown)}; choose from: all, {', '.join(EXERCISES)}")
    source = "solutions" if args.solutions else (args.path or "stubs")
    if args.path and Path(args.path).is_file() and len(names) > 1:
        parser.error("--path FILE checks one exercise; give a directory to check several")
    return 0 if check(names, source) else 1
