"""The student copy's tables of usual mistakes: hints and recorded values, no code.

A table's cases are functions, and they are built from the exercise's right
functions, so the student copy cannot hold them.  ``record`` runs every
exercise's checker on the right module, on each case's and on each right
variant's, while ``table.recording`` notes what every case gave for every
computation a check asked about (``Table.each``), under the computation's
``fingerprint.key``; ``save`` writes that, with each case's name, hint and the
functions it changes, to one file.  In the student copy ``exercise(name)``
builds the table from the file: ``each`` then reads instead of running, and
the checkers, unchanged, give the same hints (``tests/test_student_cases.py``).
What the file holds are the values the mistakes give on the checks' inputs:
never a function, never a right answer.
"""
from __future__ import annotations

import contextlib
import gzip
import importlib
import os
import sys
import tempfile
from pathlib import Path

from ..codec import Decoder, Encoder
from ..protocol import read_frame, write_frame
from .table import Case, Raised, Recording, Table, recording

HERE = Path(__file__).parent
FILE = HERE / "recorded.data"                    # in the student copy
STUDENT_FILES = ("table.py", "fingerprint.py", "recorded.py", "layer_names.py")   # code without answers
FORMAT = "minibert-exercises-recorded-cases 1"
_PLAIN = (str, int, float, bool)


def record(tables: dict) -> Recording:
    """Run each checker on every module of its table (right, cases, variants), recording."""
    from ..checks import run_check

    rec = Recording()
    with recording(rec):
        for name, table in tables.items():
            modules = [table.module, *(case.module for case in table.cases), *(m for _, m in table.variants)]
            for module in modules:
                run_check(name, module)
    return rec


def save(rec: Recording, tables: dict, modules: dict, path: Path = FILE) -> None:
    """Write ``rec`` with each table's cases (name, hint, functions changed) and the named constants
    of each exercise's cases module that the checkers read (``modules``: {exercise: module})."""
    enc = Encoder()
    exercises = {}
    for name, table in tables.items():
        entries = {}
        for k, rows in rec.entries.get(name, {}).items():
            entries[k] = [_row(enc, value, raised, like) for value, raised, like in rows]
        exercises[name] = {
            "functions": list(table.functions),
            "cases": [[c.name, c.hint, sorted(c.wrong)] for c in table.cases],
            "mutants": [[c.name, c.hint, sorted(c.wrong)] for c in table.mutants],
            "named": _named(modules[name], table),
            "entries": entries}
    with gzip.open(path, "wb", compresslevel=6) as f:
        write_frame(f, {"format": FORMAT, "exercises": exercises, "unkeyable": sorted(set(rec.unkeyable))},
                    enc.blobs)


def _row(enc: Encoder, value, raised, like_right):
    if raised is not None:
        return {"raised": [raised.name, raised.message]}
    try:
        return {"value": enc.piece(value), "like_right": bool(like_right)}
    except TypeError:                 # not plain data: this case is not recorded here
        return {}


def _named(module, table: Table) -> dict:
    """The module's constants a checker reads: a case (by its name), a hint text, a number, names."""
    out = {}
    for attr, value in vars(module).items():
        if attr.startswith("_") or attr == "TABLE":
            continue
        if isinstance(value, Case):
            out[attr] = {"case": value.name}
        elif type(value) in _PLAIN or (type(value) is tuple and all(type(v) in _PLAIN for v in value)):
            out[attr] = {"value": list(value) if type(value) is tuple else value, "tuple": type(value) is tuple}
    return out


def recorded_data(out=sys.stderr) -> bytes:
    """The recording of the current exercises (the file's bytes), made now or found in minibert's cache folder.

    Keyed by the code it comes from (every file of ``exercises/`` and ``minibert/``) and NumPy's
    version, so a changed checker or case is recorded again; recording takes about a minute."""
    import minibert
    from minibert.paths import code_digest, default_cache_dir

    folder = default_cache_dir() / "exercises"
    path = folder / f"recorded-{code_digest(HERE.parent, Path(minibert.__file__).parent)[:24]}.data"
    if not path.is_file():
        with _lock(folder):           # another make-student (a test process) may be recording it now
            if not path.is_file():
                return _record_into(path, folder, out)
    return path.read_bytes()


@contextlib.contextmanager
def _lock(folder: Path):
    try:
        import fcntl
        folder.mkdir(parents=True, exist_ok=True)
        f = open(folder / ".recording.lock", "w")
    except (ImportError, OSError):    # no locks here (Windows) or no folder: record without one
        yield
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _record_into(path: Path, folder: Path, out) -> bytes:
    from . import TABLES

    print("recording what each usual mistake gives on the checks' inputs (once for this version of the "
          "exercises, about a minute) ...", file=out, flush=True)
    rec = record(TABLES)
    modules = {name: importlib.import_module(f"{__package__}.{name}") for name in TABLES}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".recorded-", dir=folder)
        os.close(fd)
        cached = True
    except OSError:                      # no cache folder to write: recorded again next time
        fd, tmp = tempfile.mkstemp(prefix="minibert-recorded-")
        os.close(fd)
        cached = False
    try:
        save(rec, TABLES, modules, Path(tmp))
        data = Path(tmp).read_bytes()
        if cached:
            os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return data


def write_student_cases(dest: Path, out=sys.stderr) -> None:
    """The student copy's ``cases/`` in the new folder ``dest``: the table's code, the recording, and
    for each exercise a module that reads its table from the recording."""
    from . import TABLES

    dest.mkdir()
    for name in STUDENT_FILES:
        (dest / name).write_bytes((HERE / name).read_bytes())
    (dest / FILE.name).write_bytes(recorded_data(out))
    (dest / "__init__.py").write_text(STUDENT_INIT)
    for name in TABLES:
        (dest / f"{name}.py").write_text(STUDENT_MODULE.format(name=name))


STUDENT_INIT = '''"""The usual mistakes of every exercise, as recorded data (``recorded.py``): each mistake's hint, and
what it gives on the checks' own inputs.  ``TABLES[exercise]`` is that exercise's ``Table``."""
from .. import EXERCISES
from .recorded import exercise

TABLES = {name: exercise(name)[0] for name in EXERCISES}
'''

STUDENT_MODULE = '''"""The usual mistakes of the {name} exercise, as recorded data (``recorded.py``)."""
from .recorded import exercise

TABLE, _named = exercise("{name}")
globals().update(_named)
'''


# ------------------------------------------------------------------ in the student copy
_FILES: dict = {}             # {path: (the file's header's exercises, its decoder)}
_TABLES: dict = {}            # {(path, exercise): (table, named constants)}


def unkeyable(path: Path = FILE) -> list:
    """The computations the recording could not name (so gives no hint for): none, when all is well."""
    with gzip.open(path, "rb") as f:
        return read_frame(f)[0].get("unkeyable", [])


def exercise(name: str, path: Path = FILE):
    """(the exercise's table, {constant name: value}) from the recorded file."""
    if (path, name) in _TABLES:
        return _TABLES[path, name]
    if path not in _FILES:
        with gzip.open(path, "rb") as f:
            header, blob = read_frame(f)
        if header.get("format") != FORMAT:
            raise RuntimeError(f"{path} is not a table of recorded cases of this version "
                               f"(remake the student copy with python -m exercises make-student)")
        _FILES[path] = header["exercises"], Decoder(blob)
    everything, dec = _FILES[path]
    data = everything[name]
    table = Table(name)
    table.functions = tuple(data["functions"])
    for case_name, hint, changes in data["cases"]:
        table.cases.append(Case(name, case_name, hint, {f: None for f in changes}, {}))
    table._mutants = [Case(name, case_name, hint, {f: None for f in changes}, {}, mutant=True)
                      for case_name, hint, changes in data.get("mutants", ())]
    table.recorded = {k: [_unrow(dec, row) for row in rows] for k, rows in data["entries"].items()}
    by_name = {c.name: c for c in table.cases}
    named = {attr: by_name[v["case"]] if "case" in v else tuple(v["value"]) if v["tuple"] else v["value"]
             for attr, v in data["named"].items()}
    _TABLES[path, name] = table, named
    return table, named


def _unrow(dec: Decoder, row: dict):
    if "raised" in row:
        return None, Raised(*row["raised"]), False
    if "value" in row:
        return dec.piece(row["value"]), None, row["like_right"]
    return None, Raised("", ""), True      # not recorded: matches nothing
