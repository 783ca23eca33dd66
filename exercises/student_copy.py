"""What the student copy of the course is made of: the exercises package without the instructor's files,
and the files the notebooks read from beside their folder.  ``make-student`` writes it as a folder,
``export-nbgrader`` into an nbgrader assignment, ``gradescope-bundle`` into the autograder's zip."""
from __future__ import annotations

import shutil
from pathlib import Path

from .cases.recorded import write_student_cases

HERE = Path(__file__).resolve().parent
# what the student copy leaves out: the solutions, and the usual mistakes as code (cases/ is built from
# the right answers, and holds right answers written otherwise); it gets them as recorded data instead
# (cases/recorded.py), from which the checkers give the same hints.
INSTRUCTOR_ONLY = ("solutions",)
NOTEBOOKS = HERE.parent / "notebooks"      # the course, whose exercise cells the student copy turns into stubs
# what the notebooks read from beside their folder (07 and 11: what a GPU measured), copied with them
NOTEBOOK_DATA = (HERE.parent / "benchmarks" / "results",)


def write_student_exercises(dest: Path) -> None:
    """The exercises package as students get it, written to the new folder ``dest``."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", *INSTRUCTOR_ONLY, "cases")
    shutil.copytree(HERE, dest, ignore=ignore)
    write_student_cases(dest / "cases")         # the usual mistakes as data, no code
