"""A class's submissions as ``grade`` finds them: each student's files, or why one is not read.

SUBMISSIONS holds one folder per student (NAME.py is looked for at any depth inside it, the
shallowest first), or loose files named STUDENT_NAME.py (or STUDENT-NAME.py, as course sites
export them), or both.  An exercise without its file is looked for in the student's notebooks
(in the folder, or loose: STUDENT_02_building_blocks.ipynb), ``notebook_files.py``.  A symbolic
link (to anything), a folder where a file belongs, a name that is not UTF-8, a file that is not
plain or is over ``MAX_BYTES``: a ``Refused`` reason in the file's place, a row of its own.  ``read_below`` reads a file that was found, a name at a time, no link
followed: one put in place while the class is graded is refused too.
"""
from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from . import file_of

_SKIP = re.compile(r"^(\.|__pycache__$|__MACOSX$)")

MAX_BYTES = 1 << 20        # a larger "solution" is not one: refused with a reason, never read


class Refused(str):
    """A submitted path that is not checked, and why: a symbolic link, a folder, a name that is not
    UTF-8, a file too large or not a plain file.  It stands in the place of the path."""


class NotebookRefused(Refused):
    """A notebook's exercise that is not checked, and why: the notebook is not one, or the cell that
    defines the exercise's functions does not parse."""


def shown(text) -> str:
    """A path or name as the outputs write it: bytes that are not UTF-8 as \\xNN escapes, not a crash."""
    return str(text).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def find_submissions(root: Path, names: list[str], single: bool = False, skip: Path | None = None,
                     exercises=()) -> dict:
    """{student: {file name: the file to check, a ``Refused`` reason, or None}}, by student name; and
    for each of ``exercises`` that a student's folder holds in a notebook only, {exercise: its piece}.

    skip: a folder left out (the grader's own output folder, when it lies inside ``root``)."""
    if single:
        return {shown(root.resolve().name): _files_in(root, names, exercises)}
    found = {}
    for entry in sorted(root.iterdir()):
        if _SKIP.match(entry.name) or (skip is not None and entry.resolve() == skip):
            continue
        if entry.is_symlink() and entry.is_dir():
            found[shown(entry.name)] = dict.fromkeys(names, Refused(
                f"the student's folder {shown(entry.name)} is a symbolic link: submit files, not links"))
        elif entry.is_dir():
            found[shown(entry.name)] = _files_in(entry, names, exercises)
    loose = re.compile(rf"^(.+?)[ _.-]+({'|'.join(map(re.escape, names))})\.py$")
    for f in sorted(root.iterdir()):
        m = loose.match(f.name)
        if m and not f.is_dir() and not _SKIP.match(m.group(1)):
            files = found.setdefault(shown(m.group(1)), dict.fromkeys(names))
            files[m.group(2)] = files[m.group(2)] or _refusal(f, f.name) or f
    _loose_notebooks(root, found, names, exercises)
    return dict(sorted(found.items()))


@dataclass(frozen=True)
class NotebookPiece:
    """An exercise found in a handed-in notebook: the notebook, the text of NAME.py made from it
    (``notebook_files.py``) and the functions its check cells pass."""
    notebook: Path
    text: str
    functions: tuple

    def __str__(self) -> str:
        return str(self.notebook)


def _loose_notebooks(root: Path, found: dict, names, exercises) -> None:
    """Loose notebooks STUDENT_NN_NAME.ipynb (a course notebook's name after the student's): each fills the
    exercises of that student which no file gave."""
    from .notebook_files import course_names

    if not exercises or not course_names():
        return
    loose = re.compile(rf"^(.+?)[ _.-]+({'|'.join(map(re.escape, course_names()))})$")
    for f in sorted(root.iterdir()):
        m = loose.match(f.name)
        if m and not f.is_dir() and not _SKIP.match(m.group(1)):
            files = found.setdefault(shown(m.group(1)), dict.fromkeys(names))
            left = [n for n in exercises if files.get(file_of(n)) is None and files.get(n) is None]
            files.update(_notebook(root, f, left, course=m.group(2)) if left else {})


def _files_in(folder: Path, names, exercises=()) -> dict:
    """The shallowest NAME.py in ``folder`` for each name (symbolic links to folders not followed); for each
    of ``exercises`` without its file, the shallowest notebook that checks it (``NotebookPiece``), under
    the exercise's name."""
    hits = {name: [] for name in names}
    notebooks = []
    for top, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not _SKIP.match(d))
        for entry in (*files, *dirs):
            name = entry[:-3] if entry.endswith(".py") else None
            if name in hits:
                hits[name].append(Path(top) / entry)
            elif entry.endswith(".ipynb") and not _SKIP.match(entry):
                notebooks.append(Path(top) / entry)
    chosen = {}
    for name, paths in hits.items():
        path = min(paths, key=lambda p: (len(p.parts), str(p)), default=None)
        twins = sorted(shown(p.relative_to(folder)) for p in paths if len(p.parts) == len(path.parts)) if path else []
        if len(twins) > 1:             # which one the student meant is not ours to guess
            chosen[name] = Refused(f"{len(twins)} files {name}.py at the same depth ({', '.join(twins[:3])}"
                                   f"{', ...' if len(twins) > 3 else ''}): keep the one to be graded")
        else:
            chosen[name] = None if path is None else (_refusal(path, path.relative_to(folder)) or path)
    # an exercise whose file is not there (a question: whose questions.py), from the notebooks, by its own name
    left = [n for n in exercises if chosen.get(file_of(n)) is None]
    for nb in sorted(notebooks, key=lambda p: (len(p.parts), str(p))) if left else ():
        for name, piece in _notebook(folder, nb, left).items():
            chosen[name] = piece
        left = [n for n in left if chosen.get(n) is None]
    return chosen


def _notebook(folder: Path, path: Path, names, course: str | None = None) -> dict:
    """{name: a ``NotebookPiece`` or a ``Refused`` reason} for the exercises of ``names`` that the notebook
    ``path`` checks; a notebook that cannot be read, or is not one, for the exercises of the course's
    notebook of that name (``course``, else the file's; none when it is not a course notebook's)."""
    from .notebook_files import MAX_NOTEBOOK_BYTES, Unread, course_exercises, exercise_files

    what, found = shown(path.relative_to(folder)), None
    try:
        why = _refusal(path, path.relative_to(folder), MAX_NOTEBOOK_BYTES)
        found = exercise_files(read_below(folder, path, MAX_NOTEBOOK_BYTES), names) if why is None else None
    except (OSError, ValueError) as exc:
        why = f"{what}: {exc}"
    if found is None:
        return {n: NotebookRefused(why) for n in course_exercises(course or path.name) if n in names}
    return {n: (NotebookRefused(f"{what}: {piece}") if isinstance(piece, Unread) else
                NotebookPiece(path, piece.text, piece.functions)) for n, piece in found.items()}


def _refusal(path: Path, relative, limit: int = MAX_BYTES) -> Refused | None:
    """Why ``path`` is not checked, or None when it is a plain file that may be."""
    what = shown(relative)
    if what != str(relative):
        return Refused(f"the path {what} holds a name that is not UTF-8: rename it")
    try:
        st = os.lstat(path)
    except OSError as exc:
        return Refused(f"{what} cannot be read: {exc.strerror}")
    if stat.S_ISLNK(st.st_mode):
        return Refused(f"{what} is a symbolic link, not a file: submit the file itself")
    if stat.S_ISDIR(st.st_mode):
        return Refused(f"{what} is a folder, not a file: put the code in a file named {path.name}")
    if not stat.S_ISREG(st.st_mode):
        return Refused(f"{what} is not a plain file")
    if st.st_size > limit:
        whose = "one exercise's code" if limit == MAX_BYTES else "a notebook"
        return Refused(f"{what} is {st.st_size / 1e6:.1f} MB, over the limit of {limit / 1e6:.1f} MB for {whose}")
    return None


def read_below(top: Path, path: Path, limit: int) -> bytes:
    """The bytes of the plain file ``path`` under the folder ``top``, opened one name at a time
    without following a symbolic link (a link put in place while the class is graded is refused,
    not followed); OSError with a reason otherwise, ValueError for a file over ``limit`` bytes."""
    parts = Path(os.path.abspath(path)).relative_to(os.path.abspath(top)).parts
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            fd, old = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd), fd
            os.close(old)
        fd, old = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd), fd
        os.close(old)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{parts[-1]} is not a plain file")
        if st.st_size > limit:
            raise ValueError(f"{st.st_size / 1e6:.1f} MB, over the limit of {limit / 1e6:.1f} MB")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise ValueError(f"over the limit of {limit / 1e6:.1f} MB")
        return data
    finally:
        os.close(fd)
