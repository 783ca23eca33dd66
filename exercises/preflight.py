"""What ``grade`` checks before it grades anyone: where the results go, and whether the lecturer's limits leave
room for a right answer.

* ``--out`` is not the submissions' folder (its results, a folder among them, would be read as a student's
  by the next grading), nor a student's folder inside it (one that holds .py files).
* Limits set on the command line (``--timeout``, ``--memory-mb``) are tried on the reference solutions
  first, in the same sandbox: where a solution fails under them, every student would fail with it, a verdict
  that blames the students for the grader's setting; the command refuses the limits instead, saying what
  the solution ran into.  (With the default limits, and in a copy without solutions, nothing is tried.)
"""
from __future__ import annotations

from pathlib import Path

from . import file_of


def out_problem(out: Path, submissions: Path) -> str | None:
    """Why ``out`` cannot take the results of grading ``submissions`` (None where it can)."""
    given, out, root = out, out.resolve(), submissions.resolve()
    if out == root:
        return (f"--out {given} is the submissions' folder: the results (grades.csv, a gradescope folder) would "
                "be read as a student's by the next grading; write them elsewhere, e.g. beside it")
    if out.is_dir() and root in out.parents and any(out.rglob("*.py")):
        return (f"--out {given} lies in the submissions' folder and holds .py files: is it a student's folder? "
                "Write the results elsewhere")
    return None


def limits_problem(names, timeout, memory_mb, confine, jobs, grade_all) -> str | None:
    """Why the limits given cannot grade ``names`` (their reference solutions fail under them, graded by
    ``grade_all``, grade.py's), or None."""
    from .sandbox import DEFAULT_MEMORY_MB, HERE
    if timeout is None and memory_mb == DEFAULT_MEMORY_MB:
        return None
    solutions = {name: HERE / "solutions" / f"{file_of(name)}.py" for name in names}
    if not all(path.is_file() for path in solutions.values()):
        return None                         # a student's copy of the course: no reference to try
    rows = grade_all({"reference": solutions}, names, jobs, timeout, memory_mb, confine, top=HERE / "solutions")
    failed = [r for r in rows if r["verdict"] != "pass"]
    if not failed:
        return None
    given = ", ".join(f for f in (f"--timeout {timeout:g}" if timeout is not None else "",
                                  f"--memory-mb {memory_mb:g}" if memory_mb != DEFAULT_MEMORY_MB else "") if f)
    first = failed[0]
    return (f"{given}: the reference solution of {first['exercise']} does not pass under these limits "
            f"({first['first_fail']})" + (f", nor those of {len(failed) - 1} more" if len(failed) > 1 else "")
            + "; every student would fail with it: raise the limits (or leave them at their defaults)")
