"""``python -m exercises export-nbgrader DIR``: the course as an nbgrader source assignment.

    DIR/source/ASSIGNMENT/   the course's notebooks, solved and marked for nbgrader; the files they
                             read (_style.py, pretrained/, figures/, benchmarks/results/); the student
                             copy of the exercises package (no solutions), which their checks import
    DIR/nbgrader_config.py   the settings below and a cell's time limit (the capstone's check trains a
                             BERT), written where DIR has no config of its own (else printed, to add)

An exercise's solution cell becomes an nbgrader solution cell: the body of each function it defines,
after the docstring, lies between nbgrader's delimiters, and the stub nbgrader puts in its place is the
student copy's line, so ``nbgrader generate_assignment`` writes the student copy's cell
(``student_notebooks.stub_of``).  Its check cell becomes a locked test cell worth the exercise's points
(``--points``, read as ``grade`` reads them; split evenly when an exercise has several check cells),
calling ``graded_check``: the checker's report, and an exception when it does not pass, which nbgrader
scores 0.  Here a notebook's files lie in its own folder, not beside notebooks/: the lines that say
where are rewritten.  The capstone (13) imports the student's own pieces from exercises/stubs/, as the
student copy does: a student hands those files in with it and autograde keeps them
(``Autograde.exclude_overwriting``); every other file autograde takes from the source, not the student.

nbgrader runs the student's code in the kernel that runs the test cells, so the code can reach the
checker there; ``python -m exercises grade`` on the same notebooks runs each in the sandbox.
"""
from __future__ import annotations

import ast
import json
import os
import shutil
import tempfile
from pathlib import Path

from .notebook_files import check_call
from .points import read_points
from .sandbox import TIMEOUTS
from .student_copy import NOTEBOOK_DATA, NOTEBOOKS, write_student_exercises
from .student_notebooks import CHECK, OWN_PIECES, SOLUTION, TODO, function_bodies, source, tags

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
MARKER = ".minibert-nbgrader"          # in each assignment this command wrote: --force replaces only those
CONFIG = "nbgrader_config.py"
CONFIG_HEAD = "# nbgrader's settings for minibert's course, written by python -m exercises export-nbgrader\n"
# where the course's notebooks find their files, and where they are in an assignment's folder
MOVED = {'sys.path.insert(0, "..")          # the exercises folder sits beside notebooks/':
         'sys.path.insert(0, ".")           # the exercises folder sits beside this notebook',
         '"../benchmarks/results': '"benchmarks/results',
         # and the test cells call graded_check
         "from exercises.notebook import check, hint": "from exercises.notebook import check, graded_check, hint"}
STUBS = "exercises/stubs"


def marked_solution(text: str) -> str:
    """A solution cell's text with the body of each top-level function, after its docstring, between
    nbgrader's delimiters (each at the body's indentation, where nbgrader puts its stub)."""
    lines, out, done = text.splitlines(), [], 0
    for start, end, indent in function_bodies(text):
        out += lines[done:start] + [indent + BEGIN] + lines[start:end] + [indent + END]
        done = end
    return "\n".join(out + lines[done:]).rstrip() + "\n"


def graded_source(text: str) -> tuple[str, list[str]]:
    """A check cell's text with each top-level ``check(...)`` a ``graded_check(...)``; with the exercises
    it checks."""
    lines, names = text.splitlines(), []
    for node in reversed(ast.parse(text).body):
        call = check_call(node)
        if call is not None and isinstance(node.value.func, ast.Name):
            names.insert(0, call[0])
            line, col = node.value.func.lineno - 1, node.value.func.col_offset
            lines[line] = lines[line][:col] + "graded_check" + lines[line][col + len("check"):]
    return "\n".join(lines).rstrip() + "\n", names


def local(text: str, where: str) -> str:
    """A code cell's text reading its files from the notebook's own folder (and importing graded_check);
    ValueError for one that reads beside it in a way not known here."""
    for old, new in MOVED.items():
        text = text.replace(old, new)
    if '"../' in text or "'../" in text:
        raise ValueError(f"{where} reads a file beside the notebooks' folder: export-nbgrader knows only "
                         f"{', '.join(MOVED)}")
    return text


def _meta(kind: str, grade_id: str, points: float | None = None) -> dict:
    meta = {"grade": kind == "test", "grade_id": grade_id, "locked": kind == "test", "schema_version": 3,
            "solution": kind == "solution", "task": False}
    return {**meta, "points": points} if points is not None else meta


def exported(nb: dict, stem: str, points: dict) -> dict:
    """Notebook ``nb`` as nbgrader's source: solution and test cells marked, paths made local; ``points``
    holds what each of its check cells is worth, {exercise: points per cell}."""
    nb, ids = json.loads(json.dumps(nb)), {}

    def grade_id(kind, name):
        ids[kind, name] = ids.get((kind, name), 0) + 1
        return f"{name}-{kind}" + (f"-{ids[kind, name]}" if ids[kind, name] > 1 else "")

    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        text, where = local(source(cell), f"{stem}.ipynb, cell {i}"), tags(cell)
        if CHECK in where:
            text, names = graded_source(text)
            if len(names) != 1:
                raise ValueError(f"{stem}.ipynb, cell {i}: a check cell calls check once, not {len(names)} times")
            cell["metadata"]["nbgrader"] = _meta("test", grade_id("check", names[0]), points[names[0]])
        elif SOLUTION in where:
            text = marked_solution(text)
            cell["metadata"]["nbgrader"] = _meta("solution", grade_id("solution", stem.split("_")[0]))
        elif OWN_PIECES in where:
            text = text.replace("exercises.solutions.", "exercises.stubs.")
        cell["source"], cell["outputs"], cell["execution_count"] = text, [], None
        if CHECK in where and not any(MOVED["from exercises.notebook import check, hint"] in source(c)
                                      for c in nb["cells"][:i + 1] if c["cell_type"] == "code"):
            raise ValueError(f"{stem}.ipynb, cell {i}: no cell before this check cell imports check and hint "
                             "as 'from exercises.notebook import check, hint'")
    return nb


def course(selection: list[str] | None) -> list[Path]:
    """The course's notebooks named in ``selection`` (each by its number, 02 or 06b, or its file's stem),
    all of them for None; ValueError naming one the course does not have."""
    found = sorted(NOTEBOOKS.glob("*.ipynb"))
    if selection is None:
        return found
    chosen = []
    for name in selection:
        match = [p for p in found if name in (p.stem, p.stem.split("_")[0], p.name)]
        if not match:
            raise ValueError(f"no notebook {name!r} in the course; its notebooks: "
                             + ", ".join(p.stem.split("_")[0] for p in found))
        chosen += [p for p in match if p not in chosen]
    return chosen


def cell_points(notebooks: dict, points_file: Path | None) -> dict:
    """{exercise: points per check cell}: each exercise's points (``read_points``) split over its cells."""
    cells = {}
    for nb in notebooks.values():
        for cell in nb["cells"]:
            if CHECK in tags(cell):
                for node in ast.parse(source(cell)).body:
                    call = check_call(node)
                    if call is not None:
                        cells[call[0]] = cells.get(call[0], 0) + 1
    table = read_points(points_file, list(cells))
    return {name: table[name] / n for name, n in cells.items()}


class Refused(Exception):
    """export-nbgrader will not do it; the message says why, in one line."""


def export(course_dir: Path, assignment: str, selection=None, points_file=None, force=False, out=None) -> Path:
    """Write the assignment (the module's docstring) and return its folder; ``Refused`` for a name
    nbgrader cannot take, a folder in the way, or a notebook that cannot be exported."""
    if not assignment.replace("-", "").replace("_", "").isalnum() or not assignment[0].isalnum():
        raise Refused(f"{assignment!r} cannot name an nbgrader assignment: letters, digits, - and _ only")
    repo, root = NOTEBOOKS.parent.resolve(), course_dir.resolve()
    if root == repo or repo in root.parents or root in repo.parents:
        raise Refused(f"{course_dir} {'lies inside' if repo in root.parents else 'is or holds'} the repository "
                      f"{repo}, whose solutions it would copy beside: write the course to a folder of its own")
    dest = root / "source" / assignment
    if dest.is_symlink() or (dest.exists() and not (force and (dest / MARKER).is_file())):
        raise Refused(f"{dest} exists already" + ("; pass --force to replace one made by export-nbgrader"
                                                  if not force else f" and holds no {MARKER} file: --force "
                                                  "replaces only an assignment this command wrote"))
    try:
        paths = course(selection)
        notebooks = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in paths}
        per_cell = cell_points(notebooks, points_file)
        made = {stem: exported(nb, stem, per_cell) for stem, nb in notebooks.items()}
    except ValueError as exc:
        raise Refused(str(exc)) from None
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        new = Path(tempfile.mkdtemp(prefix=f".{assignment}-", dir=dest.parent))
    except OSError as exc:
        raise Refused(f"cannot write to {course_dir}: {exc.strerror or exc}") from None
    try:
        _write(new, made)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(new, dest)
        _configure(root, out)
    except OSError as exc:
        raise Refused(f"cannot write the assignment to {dest}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(new, ignore_errors=True)
    return dest


def _write(folder: Path, notebooks: dict) -> None:
    """The assignment's files in ``folder``: the notebooks, what they read, the student copy of exercises."""
    shutil.copytree(NOTEBOOKS, folder, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("*.ipynb", "__pycache__", "*.pyc", ".ipynb_checkpoints",
                                                  "sanitize.cfg"))
    for data in NOTEBOOK_DATA:
        if data.is_dir():
            shutil.copytree(data, folder / data.relative_to(NOTEBOOKS.parent))
    write_student_exercises(folder / "exercises")
    for stem, nb in notebooks.items():
        (folder / f"{stem}.ipynb").write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n",
                                              encoding="utf-8")
    (folder / MARKER).write_text("made by python -m exercises export-nbgrader; --force replaces it\n")


def config_text(root: Path) -> str:
    """nbgrader's settings for the assignments this command wrote under ``root``/source."""
    kept = {}
    for marker in sorted((root / "source").glob(f"*/{MARKER}")):
        stubs = sorted(p for p in marker.parent.glob(f"{STUBS}/*.py") if p.name != "__init__.py")
        kept[marker.parent.name] = [p.relative_to(marker.parent).as_posix() for p in stubs]
    return (CONFIG_HEAD + "c = get_config()  # noqa: F821 (nbgrader defines get_config for its config files)\n"
            "# where a solution was, the release holds the student copy's line\n"
            f"c.ClearSolutions.code_stub = {{'python': {TODO!r}}}\n"
            "# the capstone imports the student's own pieces from exercises/stubs/: autograde keeps those\n"
            "# handed in, and takes every other file from the source\n"
            f"c.Autograde.exclude_overwriting = {json.dumps(kept, indent=4)}\n"
            "# seconds a cell may run (nbgrader's default is 30): the capstone's check trains a BERT\n"
            f"c.Execute.timeout = {max(TIMEOUTS.values()):g}\n")


def _configure(root: Path, out) -> None:
    path, text = root / CONFIG, config_text(root)
    if path.is_file() and not path.read_text(encoding="utf-8", errors="replace").startswith(CONFIG_HEAD):
        print(f"{path} is your own: add these settings to it (or the assignments' solutions are cleared "
              f"with nbgrader's own stub, and the capstone's files are not kept):\n\n{text}", file=out)
        return
    tmp = path.with_name(f".{CONFIG}.new")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def add_parser(sub) -> None:
    p = sub.add_parser("export-nbgrader", help="write the course as an nbgrader source assignment")
    p.add_argument("dir", type=Path, help="the nbgrader course folder (its source/ gets the assignment)")
    p.add_argument("--assignment", default="minibert", help="the assignment's name (default minibert)")
    p.add_argument("--notebooks", default=None,
                   help="comma-separated notebooks, by number (02,06b) or name (default: all of the course)")
    p.add_argument("--points", type=Path, default=None,
                   help="a CSV table of lines exercise,points, as grade reads it (default: 1 point each)")
    p.add_argument("--force", action="store_true", help="replace an assignment written here before")


def run(args, parser=None, out=None) -> int:
    import sys

    out = out or sys.stdout
    selection = None if args.notebooks is None else [n.strip() for n in args.notebooks.split(",") if n.strip()]
    if selection == []:
        print(f"python -m exercises export-nbgrader: --notebooks {args.notebooks!r} names no notebook: give their "
              "names, comma-separated, or leave --notebooks out for every notebook", file=sys.stderr)
        return 2
    try:
        dest = export(args.dir, args.assignment, selection, args.points, args.force, out)
    except Refused as exc:
        print(f"python -m exercises export-nbgrader: {exc}", file=sys.stderr)
        return 2
    cells = [c for p in sorted(dest.glob("*.ipynb"))
             for c in json.loads(p.read_text(encoding="utf-8"))["cells"]]
    tests = [c["metadata"]["nbgrader"] for c in cells if c["metadata"].get("nbgrader", {}).get("grade")]
    solutions = sum(c["metadata"].get("nbgrader", {}).get("solution", False) for c in cells)
    n = len(list(dest.glob("*.ipynb")))
    print(f"nbgrader source assignment written to {dest}: {n} notebook{'s' * (n != 1)}, "
          f"{solutions} solution cells, {len(tests)} test cells worth {sum(t['points'] for t in tests):g} "
          f"points", file=out)
    print(f"then, in {args.dir}:  nbgrader generate_assignment {args.assignment}", file=out)
    return 0
