"""``python -m exercises grade SUBMISSIONS``: grade a class, every file in a worker process of its own.

SUBMISSIONS holds one folder per student (NAME.py is looked for at any depth
inside it, the shallowest first), or loose files named STUDENT_NAME.py (or
STUDENT-NAME.py, as course sites export them), or both.  With ``--single``
it is one student's folder, as Gradescope hands it over
(/autograder/submission).  A missing, broken, hanging or hostile file costs
its own row and nothing else: each check runs as ``check`` does
(``sandbox.check_isolated``), several at a time over the cores.

Written to --out (default ./grades):

    grades.csv     one row per student and exercise: verdict, the first FAIL line, its hint, seconds, file
    grades.json    the same rows with each full report, and the summary
    summary.txt    per exercise: how many pass, and the most frequent first hints
    gradescope/STUDENT/results.json   in Gradescope's results.json format (OUT/results.json with --single)
"""
from __future__ import annotations

import csv
import json
import multiprocessing
import os
import re
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from . import EXERCISES

COLUMNS = ("student", "exercise", "verdict", "first_fail", "hint", "seconds", "file")
_SKIP = re.compile(r"^(\.|__pycache__$|__MACOSX$)")


# ------------------------------------------------------------------------------ finding the files
def find_submissions(root: Path, names: list[str], single: bool = False) -> dict[str, dict]:
    """{student: {exercise: the file to check, or None}}, in the students' order by name."""
    if single:
        return {root.resolve().name: _files_in(root, names)}
    found = {}
    for entry in sorted(root.iterdir()):
        if entry.is_dir() and not _SKIP.match(entry.name):
            found[entry.name] = _files_in(entry, names)
    loose = re.compile(rf"^(.+?)[ _.-]+({'|'.join(map(re.escape, names))})\.py$")
    for f in sorted(root.glob("*.py")):
        m = loose.match(f.name)
        if m:
            files = found.setdefault(m.group(1), dict.fromkeys(names))
            files[m.group(2)] = files[m.group(2)] or f
    return dict(sorted(found.items()))


def _files_in(folder: Path, names) -> dict:
    files = {}
    for name in names:
        hits = [p for p in folder.rglob(f"{name}.py")
                if p.is_file() and not any(_SKIP.match(part) for part in p.relative_to(folder).parts)]
        files[name] = min(hits, key=lambda p: (len(p.parts), str(p)), default=None)
    return files


# ------------------------------------------------------------------------------ grading
_SPARE = None          # in each pool process: a worker started ahead, for the next task


def grade_one(student: str, name: str, path, timeout: float, memory_mb: float) -> dict:
    """One row: the verdict of ``path`` for exercise ``name``.  Runs in a pool process."""
    global _SPARE
    from .sandbox import Worker, check_isolated

    row = {"student": student, "exercise": name, "file": str(path or "")}
    if path is None:
        return {**row, "verdict": "missing", "first_fail": f"no {name}.py in the submission", "hint": "",
                "seconds": 0.0, "report": f"[MISSING] {name}: no {name}.py in the submission"}
    start = time.perf_counter()
    try:
        worker, _SPARE = (_SPARE or Worker(memory_mb)), Worker(memory_mb)
        report = check_isolated(name, str(path), timeout, memory_mb, worker=worker)
    except Exception as exc:      # a bug of the checker's: this row says so, the others go on
        return {**row, "verdict": "error", "first_fail": f"the checker failed: {type(exc).__name__}: {exc}",
                "hint": "", "seconds": round(time.perf_counter() - start, 3), "report": ""}
    first, hint = report.first_failure or ("", None)
    if report.status == "todo":
        first = next((line.strip()[6:] for line in report.lines if line.startswith("  TODO")), first)
    return {**row, "verdict": report.status, "first_fail": first, "hint": hint or "",
            "seconds": round(time.perf_counter() - start, 3), "report": report.render()}


def grade_all(submissions: dict, names, jobs: int, timeout: float, memory_mb: float) -> list[dict]:
    """Every row, in the order student by student, exercise by exercise; ``jobs`` checks at a time."""
    tasks = [(s, n, files[n], timeout, memory_mb) for s, files in submissions.items() for n in names]
    # spawn: a fresh interpreter per pool process, the same on Linux, macOS and Windows
    with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(grade_one, *t) for t in tasks]
        rows = []
        for task, future in zip(tasks, futures):
            try:
                rows.append(future.result())
            except Exception as exc:   # a pool process lost: its row says so
                rows.append({"student": task[0], "exercise": task[1], "file": str(task[2] or ""),
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
        summary[name] = {"students": len(mine), **{v: counts.get(v, 0) for v in
                                                   ("pass", "fail", "todo", "missing", "error")},
                         "first_hints": [[text, n] for text, n in wrong.most_common(top)]}
    return summary


def _numbers_out(line: str) -> str:
    # "max_rel_error 2.1e-01" and "0.163 of the entries": one mistake reads the same for everyone
    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", line)


# ------------------------------------------------------------------------------ writing
def gradescope_results(rows: list[dict]) -> dict:
    """One student's rows in Gradescope's results.json format: a test per exercise, 1 point each."""
    tests = [{"name": r["exercise"], "score": float(r["verdict"] == "pass"), "max_score": 1.0,
              "status": "passed" if r["verdict"] == "pass" else "failed",
              "output": r["report"] or r["first_fail"], "visibility": "visible"} for r in rows]
    score = sum(t["score"] for t in tests)
    return {"score": score, "execution_time": round(sum(r["seconds"] for r in rows)),
            "output": f"{score:g} of {len(tests)} exercises pass", "stdout_visibility": "hidden",
            "tests": tests}


def write_outputs(rows: list[dict], summary: dict, out: Path, single: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "grades.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    (out / "grades.json").write_text(json.dumps({"rows": rows, "summary": summary}, indent=1), encoding="utf-8")
    (out / "summary.txt").write_text(render_summary(summary), encoding="utf-8")
    students = {}
    for r in rows:
        students.setdefault(r["student"], []).append(r)
    for student, mine in students.items():
        target = out / "results.json" if single else out / "gradescope" / student / "results.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(gradescope_results(mine), indent=1), encoding="utf-8")


def render_summary(summary: dict) -> str:
    lines = []
    for name, s in summary.items():
        others = ", ".join(f"{s[v]} {v}" for v in ("fail", "todo", "missing", "error") if s[v])
        lines.append(f"{name}: {s['pass']} of {s['students']} pass" + (f" ({others})" if others else ""))
        lines += [f"  {n:4d} x  {text}" for text, n in s["first_hints"]]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ command line
def add_grade_parser(sub, limits) -> None:
    p = sub.add_parser("grade", help="grade a folder of submissions, one folder or file set per student")
    p.add_argument("submissions", type=Path, help="a folder: one sub-folder (or STUDENT_NAME.py files) per student")
    p.add_argument("--out", type=Path, default=Path("grades"), help="where the results go (default ./grades)")
    p.add_argument("--exercises", default="all", help="comma-separated exercise names (default all)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="checks at a time (default: the cores)")
    p.add_argument("--single", action="store_true",
                   help="SUBMISSIONS is one student's folder (Gradescope's /autograder/submission); "
                        "writes OUT/results.json")
    limits(p)


def run_grade(args, parser) -> int:
    names = list(EXERCISES) if args.exercises == "all" else [n.strip() for n in args.exercises.split(",")]
    unknown = [n for n in names if n not in EXERCISES]
    if unknown:
        parser.error(f"unknown exercise(s) {', '.join(unknown)}; choose from: all, {', '.join(EXERCISES)}")
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder")
    submissions = find_submissions(args.submissions, names, args.single)
    if not submissions:
        parser.error(f"no submissions in {args.submissions}: one folder per student, or STUDENT_NAME.py files")
    start = time.perf_counter()
    try:
        rows = grade_all(submissions, names, args.jobs, args.timeout, args.memory_mb)
    except KeyboardInterrupt:           # the workers end themselves once their checker is gone
        print("interrupted: nothing written", file=sys.stderr)
        return 130
    summary = summarize(rows, names)
    write_outputs(rows, summary, args.out, args.single)
    print(render_summary(summary), end="")
    print(f"{len(submissions)} students, {len(names)} exercises, {time.perf_counter() - start:.1f} s; "
          f"results in {args.out}/", file=sys.stderr)
    return 0
