"""``python -m exercises grade SUBMISSIONS``: grade a class, every file in a worker process of its own.

SUBMISSIONS holds one folder per student (NAME.py is looked for at any depth
inside it, the shallowest first, and for an exercise without one, the
notebooks in it: the functions its check cells pass, ``notebook_files.py``), or
loose files named STUDENT_NAME.py (or STUDENT-NAME.py, as course sites export
them; STUDENT_02_building_blocks.ipynb for a notebook), or both.  With ``--single``
it is one student's folder, as Gradescope hands it over
(/autograder/submission); ``submissions.py`` finds the files.  A missing,
broken, hanging or hostile file costs its own row and nothing else: each
check runs as ``check`` does (``sandbox.check_isolated``), in the sandbox of
``confine.py``, several at a time over the cores.

Written to --out (default ./grades):

    grades.csv     one row per student and exercise: verdict, the first FAIL line, its hint, seconds, file
    grades.json    the same rows with each full report, and the summary
    summary.txt    per exercise: how many pass, and the most frequent first hints
    gradescope/STUDENT/results.json   in Gradescope's results.json format (OUT/results.json with --single)
"""
from __future__ import annotations

import atexit
import csv
import json
import multiprocessing
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from . import EXERCISES, QUESTIONS, file_of
from .points import award, read_points
from .preflight import limits_problem, out_problem
from .submissions import MAX_BYTES, NotebookPiece, NotebookRefused, Refused, find_submissions, read_below, shown

# what grade checks: the pieces and the graded questions (the capstone, whose file must hold its pieces too, is
# checked with `check bert`)
GRADABLE = {**EXERCISES, **QUESTIONS}
COLUMNS = ("student", "exercise", "verdict", "points", "max_points", "first_fail", "hint", "seconds", "file")


# ------------------------------------------------------------------------------ grading
_SPARE = None          # in each pool process: a worker started ahead, for the next task


def grade_one(student: str, name: str, path, timeout: float, memory_mb: float, confine=None,
              top: Path | None = None) -> dict:
    """One row: the verdict of ``path`` for exercise ``name``.  Runs in a pool process.

    confine: the sandbox to run the student's code in (``confine.Confinement``), None for none;
    top: the submissions' folder, from which the file is opened a name at a time, no link followed."""
    global _SPARE
    from .sandbox import Worker, check_isolated

    row = {"student": student, "exercise": name, "file": shown(path or "")}
    if path is None:
        return {**row, "verdict": "missing", "first_fail": f"no {file_of(name)}.py in the submission, nor a notebook "
                                                           f"whose cells check {name}", "hint": "",
                "seconds": 0.0, "report": f"[MISSING] {name}: no {file_of(name)}.py in the submission"}
    if isinstance(path, NotebookRefused):
        return _not_checked(row, name, str(path), "not checked: open the notebook in Jupyter, mend it until "
                                                  "Restart and run all runs its cells, and hand it in again")
    if isinstance(path, Refused):
        return _not_checked(row, name, str(path), f"not checked: submit your code as a plain file named {file_of(name)}.py")
    data, parts, made = None, None, None
    if isinstance(path, NotebookPiece):     # NAME.py made from the notebook's cells, checked as a file
        made = tempfile.TemporaryDirectory(prefix="minibert-notebook-")
        data, parts = path.text.encode(), _parts(name, path.functions)
        path = Path(made.name) / f"{file_of(name)}.py"
        path.write_bytes(data)
    elif top is not None:
        try:
            data = read_below(top, path, MAX_BYTES)
        except (OSError, ValueError) as exc:
            return _not_checked(row, name, f"{shown(os.path.relpath(path, top))} could not be read as a plain "
                                           f"file ({exc}): it changed while the class was graded?", "")
    start = time.perf_counter()
    try:
        worker, _SPARE = (_SPARE or Worker(memory_mb, confine)), Worker(memory_mb, confine)
        report = check_isolated(name, str(path), timeout, memory_mb, worker=worker, data=data, parts=parts)
    except Exception as exc:      # a bug of the checker's: this row says so, the others go on
        return {**row, "verdict": "error", "first_fail": f"the checker failed: {type(exc).__name__}: {exc}",
                "hint": "", "seconds": round(time.perf_counter() - start, 3), "report": ""}
    finally:
        if made is not None:
            made.cleanup()
    first, hint = report.first_failure or ("", None)
    if report.status == "todo":
        first = next((line.strip()[6:] for line in report.lines if line.startswith("  TODO")), first)
    first = " ".join(first.split())          # one line: a student's message may hold line breaks
    return {**row, "verdict": report.status, "first_fail": first, "hint": hint or "",
            "seconds": round(time.perf_counter() - start, 3),
            "report": report.render() if made is None else report.render().replace(str(path), row["file"])}


def _parts(name: str, functions) -> tuple | None:
    """The functions a notebook's check cells pass, when they make whole parts of the exercise (a
    notebook may check only some of its functions); None (every part) otherwise."""
    from .checks import parts_for

    return tuple(functions) if name in EXERCISES and parts_for(name, functions) else None


def _not_checked(row: dict, name: str, why: str, hint: str) -> dict:
    """The row of a file that was not checked, and why."""
    return {**row, "file": "", "verdict": "fail", "first_fail": why, "hint": hint, "seconds": 0.0,
            "report": f"[FAIL] {name}: {why}"}


def _close_spare() -> None:
    if _SPARE is not None:
        _SPARE.close()


def _pool_process() -> None:
    """Each pool process ends itself when the grader is gone (killed, say): its worker, and the
    sandbox with it, goes too, and nothing of the run is left behind.  Its spare worker is closed
    when it exits."""
    atexit.register(_close_spare)
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(70)
    threading.Thread(target=watch, daemon=True).start()


def grade_all(submissions: dict, names, jobs: int, timeout: float, memory_mb: float, confine=None,
              top: Path | None = None) -> list[dict]:
    """Every row, in the order student by student, exercise by exercise; ``jobs`` checks at a time."""
    tasks = [(s, n, files[n], timeout, memory_mb, confine, top) for s, files in submissions.items() for n in names]
    # spawn: a fresh interpreter per pool process, the same on Linux, macOS and Windows
    with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=multiprocessing.get_context("spawn"),
                             initializer=_pool_process) as pool:
        futures = [pool.submit(grade_one, *t) for t in tasks]
        rows = []
        for task, future in zip(tasks, futures):
            try:
                rows.append(future.result())
            except Exception as exc:   # a pool process lost: its row says so
                rows.append({"student": task[0], "exercise": task[1], "file": shown(task[2] or ""),
                             "verdict": "error", "first_fail": f"the grading process failed: {exc}",
                             "hint": "", "seconds": 0.0, "report": ""})
    return rows


def summarize(rows: list[dict], names, top: int = 3) -> dict:
    """Per exercise: the count of each verdict, and the most frequent first hints (or FAIL lines)."""
    summary = {}
    for name in names:
        mine = [r for r in rows if r["exercise"] == name]
        counts = Counter(r["verdict"] for r in mine)
        wrong = Counter(r["hint"] or _numbers_out(r["first_fail"]) for r in mine
                        if r["verdict"] in ("fail", "todo", "error") and (r["hint"] or r["first_fail"]))
        summary[name] = {"students": len(mine), "points": mine[0]["max_points"] if mine else 1.0,
                         **{v: counts.get(v, 0) for v in
                                                   ("pass", "fail", "todo", "missing", "error")},
                         "first_hints": [[text, n] for text, n in wrong.most_common(top)]}
    return summary


def _numbers_out(line: str) -> str:
    # "max_rel_error 2.1e-01" and "0.163 of the entries": one mistake reads the same for everyone
    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", line)


# ------------------------------------------------------------------------------ writing
NO_ISOLATION = ("graded WITHOUT isolation (--no-sandbox): each student's code ran as the grader's user, "
                "able to read and change other files, classmates' too")


def gradescope_results(rows: list[dict], isolation: str = "") -> dict:
    """One student's rows in Gradescope's results.json format: a test per exercise, its points."""
    tests = [{"name": r["exercise"], "score": float(r["points"]), "max_score": float(r["max_points"]),
              "status": "passed" if r["verdict"] == "pass" else "failed",
              "output": r["report"] or r["first_fail"], "visibility": "visible"} for r in rows]
    score = sum(t["score"] for t in tests)
    return {"score": score, "execution_time": round(sum(r["seconds"] for r in rows)),
            "output": f"{score:g} of {sum(t['max_score'] for t in tests):g} points: "
                      f"{sum(t['status'] == 'passed' for t in tests)} of {len(tests)} exercises pass"
                      + (f"; {isolation}" if isolation else ""),
            "stdout_visibility": "hidden", "tests": tests}


def write_outputs(rows: list[dict], summary: dict, out: Path, single: bool, isolated: bool = True) -> None:
    """Every output file, written in a folder beside ``out`` and then moved into it, each file whole."""
    note, isolation = ("", "sandbox") if isolated else (NO_ISOLATION, "none")
    out.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        with open(new / "grades.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS + ("isolation",), extrasaction="ignore")
            writer.writeheader()
            writer.writerows({**{k: _cell(v) for k, v in r.items()}, "isolation": isolation} for r in rows)
        (new / "grades.json").write_text(json.dumps({"isolation": note or isolation,
                                                     "rows": rows, "summary": summary}, indent=1),
                                         encoding="utf-8")
        (new / "summary.txt").write_text((f"{note}\n\n" if note else "") + render_summary(summary),
                                         encoding="utf-8")
        students = {}
        for r in rows:
            students.setdefault(r["student"], []).append(r)
        for student, mine in students.items():
            target = new / "results.json" if single else new / "gradescope" / student / "results.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(gradescope_results(mine, note), indent=1), encoding="utf-8")
        for entry in sorted(new.iterdir()):         # each in one rename; gradescope/ as a whole
            old = out / entry.name
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old)
            os.replace(entry, old)
    finally:
        shutil.rmtree(new, ignore_errors=True)


def _cell(value):
    """A CSV cell a spreadsheet shows as text: a leading = + - @ would start a formula (a student
    may name a folder =HYPERLINK(...)), so such text gets a leading apostrophe."""
    return "'" + value if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def render_summary(summary: dict) -> str:
    lines = []
    for name, s in summary.items():
        others = ", ".join(f"{s[v]} {v}" for v in ("fail", "todo", "missing", "error") if s[v])
        lines.append(f"{name}: {s['pass']} of {s['students']} pass" + (f" ({others})" if others else "")
                     + f"; {s['points']:g} point{'s' * (s['points'] != 1)} each")
        lines += [f"  {n:4d} x  {text}" for text, n in s["first_hints"]]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ command line
def add_grade_parser(sub, limits) -> None:
    p = sub.add_parser("grade", help="grade a folder of submissions, one folder or file set per student")
    p.add_argument("submissions", type=Path, help="a folder: one sub-folder (or STUDENT_NAME.py files) per student")
    p.add_argument("--out", type=Path, default=Path("grades"), help="where the results go (default ./grades)")
    p.add_argument("--exercises", default="all",
                   help="comma-separated exercise and question names (default all: every piece and question)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="checks at a time (default: the cores)")
    p.add_argument("--single", action="store_true",
                   help="SUBMISSIONS is one student's folder (Gradescope's /autograder/submission); "
                        "writes OUT/results.json")
    p.add_argument("--no-sandbox", action="store_true",
                   help="grade where no sandbox can be made (each student's code then runs as your user, "
                        "unconfined; every output says so)")
    p.add_argument("--points", type=Path, default=None,
                   help="a CSV table of lines exercise,points (default: 1 point each)")
    limits(p)


def run_grade(args, parser) -> int:
    from .confine import Confinement, Unavailable

    names = exercise_names(args.exercises, parser)
    if args.jobs < 1:
        parser.error(f"--jobs must be 1 or more, not {args.jobs}")
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder")
    points = _points(args, names, parser)
    confine = None
    if not args.no_sandbox:
        try:
            confine = Confinement.find()
        except Unavailable as exc:
            print(f"python -m exercises grade: {exc}. Grading runs every student's code; without a sandbox "
                  "it could read or change other students' files and grades. Install bubblewrap, or pass "
                  "--no-sandbox to grade unconfined.", file=sys.stderr)
            return 2
        if not confine.limits_processes:
            print("note: grading as root without a writable pids cgroup, the number of processes a "
                  "check may start is not limited (run the grader as an ordinary user)", file=sys.stderr)
    else:
        print(f"warning: {NO_ISOLATION}", file=sys.stderr)
    out = args.out.resolve()
    if problem := out_problem(args.out, args.submissions):
        parser.error(problem)
    found = find_submissions(args.submissions, list(dict.fromkeys(map(file_of, names))), args.single, skip=out,
                             exercises=names)
    # each exercise's file, or (a question without questions.py) the notebook that checks it
    submissions = {student: {n: files.get(file_of(n)) or files.get(n) for n in names}
                   for student, files in found.items()}
    if not submissions:
        parser.error(f"no submissions in {args.submissions}: one folder per student (alice/gelu.py), or "
                     "files named STUDENT_EXERCISE.py (alice_gelu.py)")
    if problem := limits_problem(names, args.timeout, args.memory_mb, confine, args.jobs, grade_all):
        parser.error(problem)
    start = time.perf_counter()
    try:
        rows = grade_all(submissions, names, args.jobs, args.timeout, args.memory_mb, confine,
                         top=Path(os.path.abspath(args.submissions)))
    except KeyboardInterrupt:           # the workers end themselves once their checker is gone
        print("interrupted: nothing written", file=sys.stderr)
        return 130
    award(rows, points)
    summary = summarize(rows, names)
    try:
        write_outputs(rows, summary, args.out, args.single, isolated=confine is not None)
    except OSError as exc:
        print(f"python -m exercises grade: cannot write the results to {args.out}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    print(render_summary(summary), end="")
    errors = sum(r["verdict"] == "error" for r in rows)
    print(f"{len(submissions)} students, {len(names)} exercises, {time.perf_counter() - start:.1f} s; "
          f"results in {args.out}/" + ("" if confine else " (WITHOUT a sandbox)"), file=sys.stderr)
    if errors:
        print(f"{errors} row{'s' * (errors != 1)} could not be graded (verdict 'error'): see grades.csv",
              file=sys.stderr)
    return 1 if errors else 0


def _points(args, names, parser) -> dict:
    try:
        return read_points(args.points, names)
    except ValueError as exc:
        parser.error(f"--points: {exc}")      # exits


def exercise_names(text: str, parser) -> list[str]:
    """The exercises named in ``text`` (comma-separated, or "all"); an unknown or empty one refused."""
    if text.strip() == "all":
        return list(GRADABLE)
    names = [n.strip() for n in text.split(",")]
    if "" in names:
        parser.error(f"--exercises {text!r} has an empty name: separate the names by single commas")
    refuse_unknown(names, parser)
    return list(dict.fromkeys(names))


def refuse_unknown(names: list[str], parser, known=GRADABLE) -> None:
    """A usage error naming each of ``names`` that is not one of ``known`` (``grade`` and ``check``)."""
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown exercise(s) {', '.join(unknown)}; choose from: all, {', '.join(known)}")
