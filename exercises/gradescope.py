"""``python -m exercises gradescope-bundle OUT.zip``: the exercises as a Gradescope autograder.

The zip holds what Gradescope's autograder specification asks for, at its root:

    setup.sh          run once, as root, when Gradescope builds the image: bubblewrap (the sandbox), a
                      Python 3.11-3.13, and a virtual environment /autograder/venv with minibert's
                      dependencies at the versions of the machine that made the bundle (requirements.txt)
                      and minibert itself, from the bundle
    run_autograder    run for each submission: ``python -m exercises.gradescope``, below
    minibert/, pyproject.toml, README.md    the package, to install
    exercises/        the student copy (no solutions): the checkers, the sandbox and the grader
    gradescope.json   the exercises graded, their points (--points) and the time limit (--timeout)

For each submission, ``autograde`` grades /autograder/submission as ``grade --single`` does (NAME.py
files, or the course's notebooks as handed out: ``notebook_files.py``), each file in the sandbox where
bubblewrap runs (a Docker container may not let it: then unconfined, as every output says; each
submission has a container of its own), and writes /autograder/results/results.json.  Whatever the
student's code does, a results.json is written: the grader's, or, where the grader itself did not
finish, one that gives each exercise 0 and says why.  ``MINIBERT_AUTOGRADER`` (a folder laid out as
/autograder) and ``MINIBERT_AUTOGRADER_PYTHON`` move it elsewhere, for a trial run.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

from .student_copy import HERE, write_student_exercises

REPO = HERE.parent
SETTINGS = "gradescope.json"
PACKAGE = ("pyproject.toml", "README.md", "minibert")
GRADER_SLACK = 120.0          # s the grader may take beyond its checks' time limits before it is stopped

SETUP = r"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (minibert's exercises/gradescope.py)
set -euo pipefail
SOURCE="$(cd "$(dirname "$0")" && pwd)"          # /autograder/source
ROOT="$(dirname "$SOURCE")"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq || echo "apt-get update failed: installing from the lists the image has"
apt-get install -y -qq bubblewrap || echo "no bubblewrap: each submission is graded without the sandbox"
find_python() {
    for p in python3.13 python3.12 python3.11 python3; do
        if command -v "$p" >/dev/null && "$p" -c 'import sys, venv; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))' 2>/dev/null; then
            command -v "$p"; return 0
        fi
    done
    return 1
}
PYTHON="$(find_python)" || {
    apt-get install -y -qq python3.11 python3.11-venv || {
        apt-get install -y -qq software-properties-common && add-apt-repository -y ppa:deadsnakes/ppa &&
        apt-get update -qq && apt-get install -y -qq python3.11 python3.11-venv; }
    PYTHON="$(find_python)"; }
"$PYTHON" -m venv "$ROOT/venv"
"$ROOT/venv/bin/python" -m pip install --quiet --upgrade pip
"$ROOT/venv/bin/python" -m pip install --quiet -r "$SOURCE/requirements.txt"
"$ROOT/venv/bin/python" -m pip install --quiet --no-deps "$SOURCE"
"$ROOT/venv/bin/python" -c "import minibert, numpy; print('minibert installed, NumPy', numpy.__version__)"
"""

RUN = r"""#!/usr/bin/env bash
# Gradescope runs this for each submission (its copy, /autograder/run_autograder): it grades
# /autograder/submission into /autograder/results/results.json (minibert's exercises/gradescope.py)
ROOT="${MINIBERT_AUTOGRADER:-/autograder}"
cd "$ROOT/source" && exec "${MINIBERT_AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}" -m exercises.gradescope "$ROOT"
"""


def requirements() -> str:
    """minibert's dependencies (pyproject.toml), each at the version installed here where it is."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    lines = []
    for spec in deps:
        name = re.match(r"[A-Za-z0-9_.\-]+", spec).group(0)
        try:
            lines.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            lines.append(spec)
    return "\n".join(lines) + "\n"


def build(out: Path, names: list[str], points: dict, timeout: float | None) -> list[str]:
    """Write the bundle to ``out`` (whole, or not at all); return the names it holds."""
    with tempfile.TemporaryDirectory(prefix="minibert-gradescope-") as tmp:
        write_student_exercises(Path(tmp) / "exercises")
        files = {"setup.sh": SETUP, "run_autograder": RUN, "requirements.txt": requirements(),
                 SETTINGS: json.dumps({"exercises": names, "points": points, "timeout": timeout}, indent=1) + "\n"}
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_name(f".{out.name}.part")
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
            for name, text in files.items():
                info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
                info.external_attr = (0o100755 if name in ("setup.sh", "run_autograder") else 0o100644) << 16
                z.writestr(info, text)
            for top, base in [*((REPO / p, REPO) for p in PACKAGE), (Path(tmp) / "exercises", Path(tmp))]:
                for path in sorted([top] if top.is_file() else top.rglob("*")):
                    if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                        z.write(path, path.relative_to(base).as_posix())
        os.replace(part, out)
        return sorted(zipfile.ZipFile(out).namelist())


def add_parser(sub) -> None:
    p = sub.add_parser("gradescope-bundle", help="write the exercises as a Gradescope autograder (a zip)")
    p.add_argument("out", type=Path, help="the zip to write, e.g. autograder.zip")
    p.add_argument("--exercises", default="all",
                   help="comma-separated exercise and question names (default all: every piece and question)")
    p.add_argument("--points", type=Path, default=None,
                   help="a CSV table of lines exercise,points, as grade reads it (default: 1 point each)")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="seconds each exercise may take (default: grade's)")


def run(args, parser) -> int:
    from .grade import exercise_names
    from .points import read_points

    names = exercise_names(args.exercises, parser)
    if args.timeout is not None and not 0 < args.timeout < float("inf"):
        parser.error(f"--timeout must be a positive number of seconds, not {args.timeout}")
    if args.out.suffix != ".zip" or args.out.is_dir():
        parser.error(f"{args.out}: name the zip to write, e.g. autograder.zip")
    try:
        points = read_points(args.points, names)
    except ValueError as exc:
        parser.error(f"--points: {exc}")
    try:
        held = build(args.out, names, points, args.timeout)
    except OSError as exc:
        print(f"python -m exercises gradescope-bundle: cannot write {args.out}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    print(f"Gradescope autograder written to {args.out}: {len(held)} files, {len(names)} exercises worth "
          f"{sum(points.values()):g} points; upload it as the assignment's autograder (zip file)")
    return 0


def failed_results(names: list[str], points: dict, why: str, seconds: float) -> dict:
    """results.json where the grader did not finish: each exercise 0 of its points, and why."""
    tests = [{"name": n, "score": 0.0, "max_score": float(points.get(n, 1.0)), "status": "failed",
              "output": f"not graded: {why}", "visibility": "visible"} for n in names]
    return {"score": 0.0, "execution_time": round(seconds), "output": f"the autograder could not grade this "
            f"submission: {why}", "stdout_visibility": "hidden", "tests": tests}


def autograde(root: Path) -> int:
    """Grade ``root``/submission into ``root``/results/results.json (the module's docstring)."""
    start = time.monotonic()
    settings = json.loads((root / "source" / SETTINGS).read_text(encoding="utf-8"))
    names, points = settings["exercises"], settings["points"]
    results = root / "results" / "results.json"
    results.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="minibert-grades-") as tmp:
        command = [sys.executable, "-m", "exercises", "grade", str(root / "submission"), "--single",
                   "--out", str(Path(tmp) / "grades"), "--exercises", ",".join(names)]
        table = Path(tmp) / "points.csv"
        table.write_text("".join(f"{n},{p!r}\n" for n, p in points.items()), encoding="utf-8")
        command += ["--points", str(table)] + _sandbox_flag()
        limit = settings["timeout"]
        if limit:
            command += ["--timeout", str(limit)]
        why = _run(command, len(names) * (limit or 30.0) + GRADER_SLACK)
        produced = Path(tmp) / "grades" / "results.json"
        try:
            data = json.loads(produced.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = failed_results(names, points, why or "the grader wrote no results", time.monotonic() - start)
        part = results.with_name(".results.json.part")
        part.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(part, results)
    print(f"results.json: {data['score']:g} points", flush=True)
    return 0


def _sandbox_flag() -> list[str]:
    from .confine import Confinement, Unavailable

    try:
        Confinement.find()
        return []
    except Unavailable as exc:
        print(f"no sandbox ({exc}): grading unconfined, in this submission's own container", flush=True)
        return ["--no-sandbox"]


def _run(command: list[str], timeout: float) -> str:
    """Run the grader; its output goes to Gradescope's stdout (the instructor's).  What went wrong, or ''."""
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"the grader took longer than {timeout:g} s"
    text = done.stdout.decode("utf-8", "replace")
    print(text[-20000:], flush=True)
    last = text.strip().splitlines()[-1:] or [""]
    return "" if done.returncode in (0, 1) else f"the grader stopped (exit status {done.returncode}): {last[0][:300]}"


if __name__ == "__main__":
    sys.exit(autograde(Path(sys.argv[1])))
