"""`python -m exercises grade` as a security boundary: one student's code can neither see, change nor
sink another's grade, the lecturer's files or the grader itself.

One class is graded with a hostile submission per attack beside innocent students; each test then
checks one attack: the attacker's own row, every innocent row, the grader's exit status and its
outputs, whole and unchanged after the grader is gone.  The attacks are the ones a student who wants
a better grade, or a classmate's work, would try: forge the outputs after the grader exits, overwrite
a classmate's file, stop or kill the other workers, the grader and its pool, read classmates' files,
the solutions and the grader's environment, import the solutions or the case tables, submit
symbolic links, and a folder whose name is not UTF-8.
"""
import csv
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from exercises.confine import Confinement, Unavailable  # noqa: E402

SOLUTIONS = ROOT / "exercises" / "solutions"
GELU, SOFTMAX = (SOLUTIONS / "gelu.py").read_text(), (SOLUTIONS / "softmax.py").read_text()
# the innocent students, graded before and after the attackers (a class is graded in name order)
INNOCENT = [f"{'a' if i < 4 else 'z'}_innocent_{i}" for i in range(8)]
SECRET = "tok-3f9a1c77e2"                     # an access token the lecturer has exported
MARK = "mbforge"                              # what the forger calls its processes (/proc/PID/comm)

try:
    Confinement.find()
    NO_SANDBOX = None
except Unavailable as exc:
    NO_SANDBOX = str(exc)
# where the sandbox cannot be made (no bubblewrap, not Linux), these tests say why and skip; CI
# installs bubblewrap (.ci/run), so there they run, and fail if it cannot be made
needs_sandbox = pytest.mark.skipif(NO_SANDBOX is not None and not os.environ.get("CI"),
                                   reason=f"{NO_SANDBOX}")

# ------------------------------------------------------------------ the attacks, as a student writes them
FIND_GRADER = '''
import os, signal, time

def _processes():
    """(pid, argv) of every process this code can see."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    found.append((int(d), f.read().split(b"\\0")))
            except OSError:
                pass
    return found

def _graders():
    return [(p, a) for p, a in _processes() if b"grade" in a and b"--out" in a]

def _workers():
    return [p for p, a in _processes() if any(b"exercises.worker" in x for x in a)]
'''

FORGER = FIND_GRADER + '''
def _forge():
    # twice forked, in a session of its own: the grader's killpg cannot reach it
    if os.fork():
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    import ctypes
    ctypes.CDLL(None).prctl(15, b"''' + MARK + '''", 0, 0, 0)        # PR_SET_NAME: the test finds it so
    end = time.time() + 60
    while time.time() < end and not _graders():
        time.sleep(0.05)
    for pid, argv in _graders():
        out = argv[argv.index(b"--out") + 1].decode()
        cwd = os.readlink(f"/proc/{pid}/cwd")
        out = os.path.join(cwd, out)
        while os.path.exists(f"/proc/{pid}"):          # wait for the grader to finish and exit
            time.sleep(0.05)
        time.sleep(0.3)
        path = os.path.join(out, "grades.csv")
        text = open(path).read()
        text = text.replace("forger,gelu,fail", "forger,gelu,pass").replace("a_innocent_0,gelu,pass", "a_innocent_0,gelu,fail")
        open(path, "w").write(text)
        for name, score in (("forger", 2.0), ("a_innocent_0", 0.0)):
            with open(os.path.join(out, "gradescope", name, "results.json"), "w") as f:
                f.write('{"score": %s, "tests": []}' % score)
    os._exit(0)

_forge()
def gelu_forward(x):
    raise NotImplementedError
'''

WRITER = '''
import os
_here = os.path.dirname(os.path.abspath(__file__))
for _victim in ("a_innocent_1", "a_innocent_2"):
    try:
        with open(os.path.join(_here, "..", _victim, "softmax.py"), "w") as f:
            f.write("def softmax_forward(x):\\n    raise NotImplementedError\\n")
    except OSError:
        pass
''' + GELU

SIGNALLER = FIND_GRADER + '''
def _strike(sig):
    # for 3 s, every worker that appears: the one checking a classmate, the spare started for the next
    end = time.time() + 3
    while time.time() < end:
        for pid in _workers():
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        time.sleep(0.02)
''' + GELU

PARENT = '''
import os, signal
os.kill(os.getppid(), signal.SIG@SIG@)
''' + GELU

GRADER_KILLER = FIND_GRADER + '''
for _pid, _ in _graders():
    try:
        os.kill(_pid, signal.SIG@SIG@)
    except OSError:
        pass
for _pid in _workers():          # the grader's pool processes and their workers
    try:
        os.kill(_pid, signal.SIG@SIG@)
    except OSError:
        pass
''' + GELU

SNOOP = '''
import os
# what a snoop finds, summed up on the first line of its prints (the feedback shows the first lines)
_files, _secrets = [], []
_top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))      # the class's folder
for _dir, _dirs, _names in os.walk(_top):
    _dirs[:] = [d for d in _dirs if d not in ("proc", "usr", "sys", "dev")]
    _files += [os.path.join(_dir, n) for n in _names if n.endswith(".py") and n in ("gelu.py", "softmax.py")]
    if len(_files) > 200:
        break
_classmates = [f for f in _files if f != os.path.abspath(__file__) and "site-packages" not in f
               and "/lib/python3" not in f]
for _path in (@SOLUTIONS@, "/proc/1/environ", "/proc/1/cmdline", "/proc/self/environ", *_classmates):
    try:
        _secrets.append(open(_path, "rb").read().decode("utf-8", "replace").replace("\\0", " "))
    except OSError:
        pass
_seen = " ".join(_secrets) + repr(dict(os.environ))
print("SNOOP classmates=%d solution=%s token=%s" % (len(_classmates), "def softmax_forward" in _seen,
                                                      "LECTURER_TOKEN" in _seen or "@SECRET@" in _seen))
print(_seen[:2000])
''' + GELU

FORKS = '''
import os, time
_made = 0
for _ in range(300):                      # bounded, and each child ends by itself
    try:
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        _made += 1
    except OSError:
        break
print("FORKS %d" % _made)
''' + GELU

FILLER = '''
import os
for _where in ("/tmp/fill", "fill", "/fill", "/dev/shm/fill"):
    _written = 0
    try:
        with open(_where, "wb") as f:
            for _ in range(256):
                f.write(b"x" * (1 << 20))
                _written += 1
    except OSError as exc:
        print("FILL stopped at %d MB in %s: %s" % (_written, _where, type(exc).__name__))
''' + GELU

COPY_CLASSMATE = '''
import os
_here = os.path.dirname(os.path.abspath(__file__))
exec(open(os.path.join(_here, "..", "a_innocent_3", "gelu.py")).read())
'''
COPY_SOLUTION = "exec(open(@PATH@).read())\n"
IMPORT_SOLUTION = "from exercises.solutions.gelu import *\n"
IMPORT_TABLE = "from exercises.cases.@NAME@ import TABLE\nglobals().update(TABLE.right)\n"


def _class(root: Path) -> dict:
    """The class: {student: {exercise: text}} written under ``root``; innocent_* are right answers."""
    students = {name: {"gelu": GELU, "softmax": SOFTMAX} for name in INNOCENT}
    students.update({
        "forger": {"gelu": FORGER},
        "writer": {"gelu": WRITER},
        "stopper": {"gelu": SIGNALLER + "\n_strike(signal.SIGSTOP)\n"},
        "killer": {"gelu": SIGNALLER + "\n_strike(signal.SIGKILL)\n"},
        "parent_killer": {"gelu": PARENT.replace("@SIG@", "KILL")},
        "parent_stopper": {"gelu": PARENT.replace("@SIG@", "STOP")},
        "grader_killer": {"gelu": GRADER_KILLER.replace("@SIG@", "KILL")},
        "grader_stopper": {"gelu": GRADER_KILLER.replace("@SIG@", "STOP")},
        "snoop": {"gelu": SNOOP.replace("@SOLUTIONS@", repr(str(SOLUTIONS / "softmax.py"))).replace("@SECRET@", SECRET)},
        "copier": {"gelu": COPY_CLASSMATE},
        "solution_reader": {"gelu": COPY_SOLUTION.replace("@PATH@", repr(str(SOLUTIONS / "gelu.py")))},
        "solution_importer": {"gelu": IMPORT_SOLUTION},
        "table_importer": {"softmax": IMPORT_TABLE.replace("@NAME@", "softmax")},
        "fork_bomb": {"gelu": FORKS},
        "disk_filler": {"gelu": FILLER},
    })
    for student, files in students.items():
        (root / student).mkdir(parents=True)
        for name, text in files.items():
            (root / student / f"{name}.py").write_text(text)
    # symbolic links: to a classmate's file, to the solutions, and a student folder that is one
    (root / "linker").mkdir()
    (root / "linker" / "gelu.py").symlink_to(root / "z_innocent_4" / "gelu.py")
    (root / "linker" / "softmax.py").symlink_to(SOLUTIONS / "softmax.py")
    (root / "folder_linker").symlink_to(root / "z_innocent_5")
    # a folder whose name is not UTF-8, and a folder where a file belongs
    odd = os.path.join(os.fsencode(root / "odd_name"), b"sub\xff")
    os.makedirs(odd)
    with open(os.path.join(odd, b"gelu.py"), "w") as f:
        f.write(GELU)
    (root / "odd_name" / "softmax.py").write_text(SOFTMAX)
    (root / "folder_for_file" / "gelu.py").mkdir(parents=True)
    return students


def _host_processes(mark: str) -> list[int]:
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if Path(f"/proc/{d}/comm").read_text().strip() == mark:
                    found.append(int(d))
            except OSError:
                pass
    return found


def _digest(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class graded once, with the lecturer's token in the environment; the outputs read 4 s
    after the grader exited, while any process it left behind would have had time to act."""
    tmp = tmp_path_factory.mktemp("grader")
    root, out = tmp / "class", tmp / "grades"
    students = _class(root)
    before = _digest(root)
    env = dict(os.environ, LECTURER_TOKEN=SECRET)
    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "exercises", "grade", str(root), "--out", str(out),
                          "--exercises", "gelu,softmax", "--timeout", "10", "--jobs", "2"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    wall = time.perf_counter() - start
    at_exit = _digest(out) if out.is_dir() else {}
    time.sleep(4)
    leftovers = _host_processes(MARK)
    for pid in leftovers:                         # do not leave them to the rest of the suite
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    rows = {}
    if (out / "grades.csv").is_file():
        with open(out / "grades.csv", newline="", encoding="utf-8") as f:
            rows = {(r["student"], r["exercise"]): r for r in csv.DictReader(f)}
    data = json.loads((out / "grades.json").read_text()) if (out / "grades.json").is_file() else {}
    reports = {(r["student"], r["exercise"]): r["report"] for r in data.get("rows", [])}
    return dict(res=res, rows=rows, reports=reports, out=out, root=root, students=students, wall=wall,
                at_exit=at_exit, after=_digest(out) if out.is_dir() else {}, before=before,
                files_after=_digest(root), leftovers=leftovers)


def _innocent_rows_right(g):
    for student in INNOCENT:
        for name in ("gelu", "softmax"):
            row = g["rows"].get((student, name))
            assert row is not None and row["verdict"] == "pass", (student, name, row)


def _whole(g):
    """The grader exited 0, and its outputs were whole at exit and unchanged since."""
    assert g["res"].returncode == 0, g["res"].stdout + g["res"].stderr
    assert "Traceback" not in g["res"].stdout + g["res"].stderr, g["res"].stderr
    assert len(g["rows"]) == 2 * (len(g["students"]) + 4)   # + linker, folder_linker, odd_name, folder_for_file
    assert g["at_exit"] and g["after"] == g["at_exit"]
    results = g["out"] / "gradescope"
    assert {p.name for p in results.iterdir()} == {s for s, _ in g["rows"]}
    for folder in results.iterdir():
        assert json.loads((folder / "results.json").read_text())["tests"]


pytestmark = [needs_sandbox, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's /proc")]


def test_the_class_is_graded_whole_with_every_attacker_in_it(graded):
    _whole(graded)
    _innocent_rows_right(graded)
    assert graded["files_after"] == graded["before"]        # no student's file changed
    print(f"\n{len(graded['students']) + 4} students x 2 exercises in {graded['wall']:.1f} s")


def test_a_forger_waiting_for_the_grader_to_exit_changes_nothing(graded):
    assert graded["leftovers"] == [], "a student's process outlived the check"
    assert graded["rows"]["forger", "gelu"]["verdict"] == "todo"
    assert graded["rows"]["a_innocent_0", "gelu"]["verdict"] == "pass"
    assert graded["after"] == graded["at_exit"]
    results = json.loads((graded["out"] / "gradescope" / "forger" / "results.json").read_text())
    assert results["score"] == 0.0


def test_a_writer_cannot_change_a_classmates_file(graded):
    assert graded["files_after"] == graded["before"]
    for victim in ("a_innocent_1", "a_innocent_2"):
        assert graded["rows"][victim, "softmax"]["verdict"] == "pass"
    assert graded["rows"]["writer", "gelu"]["verdict"] == "pass"          # its own code is right


@pytest.mark.parametrize("student", ["stopper", "killer", "parent_killer", "parent_stopper",
                                     "grader_killer", "grader_stopper"])
def test_signals_reach_no_other_process(graded, student):
    """SIGSTOP and SIGKILL to every worker, to the parent, to the grader and its pool: each reaches
    nothing outside the sandbox; the attacker's own (right) code passes, every innocent row is right."""
    _whole(graded)
    _innocent_rows_right(graded)
    assert graded["rows"][student, "gelu"]["verdict"] == "pass", graded["rows"][student, "gelu"]


def test_a_snoop_sees_no_classmate_no_solution_no_environment(graded):
    report = graded["reports"]["snoop", "gelu"]
    assert graded["rows"]["snoop", "gelu"]["verdict"] == "pass"
    assert "| SNOOP classmates=0 solution=False token=False" in report, report
    printed = report.split("your code printed", 1)[1]
    for secret in (SECRET, str(graded["out"]), str(graded["root"]), "innocent_", "LECTURER_TOKEN",
                   str(ROOT / "exercises")):
        assert secret not in printed, secret
    assert not any(SECRET in text for text in graded["reports"].values())


@pytest.mark.parametrize("student,name", [("copier", "gelu"), ("solution_reader", "gelu"),
                                          ("solution_importer", "gelu"), ("table_importer", "softmax")])
def test_no_classmate_solution_or_case_table_can_be_used(graded, student, name):
    row = graded["rows"][student, name]
    assert row["verdict"] == "fail", row
    assert "could not import" in row["first_fail"], row


def test_symbolic_links_are_refused_rows(graded):
    rows = graded["rows"]
    for student, name in (("linker", "gelu"), ("linker", "softmax")):
        assert rows[student, name]["verdict"] == "fail"
        assert "is a symbolic link, not a file" in rows[student, name]["first_fail"]
    for name in ("gelu", "softmax"):
        assert rows["folder_linker", name]["verdict"] == "fail"
        assert "folder folder_linker is a symbolic link" in rows["folder_linker", name]["first_fail"]
    assert rows["folder_for_file", "gelu"]["verdict"] == "fail"
    assert "gelu.py is a folder, not a file" in rows["folder_for_file", "gelu"]["first_fail"]


def test_a_name_that_is_not_utf8_is_its_own_row(graded):
    rows = graded["rows"]
    assert rows["odd_name", "gelu"]["verdict"] == "fail"
    assert "sub\\xff/gelu.py holds a name that is not UTF-8" in rows["odd_name", "gelu"]["first_fail"]
    assert rows["odd_name", "softmax"]["verdict"] == "pass"
    _whole(graded)
    assert (graded["out"] / "summary.txt").read_text().startswith("gelu: ")


def test_processes_and_files_are_limited(graded):
    """A bounded fork bomb stops at the sandbox's process limit; a file grows no larger than the file
    size limit (and /tmp is a small tmpfs of its own, the submission's folder read-only)."""
    report = graded["reports"]["fork_bomb", "gelu"]
    made = int(report.split("| FORKS ")[1].split()[0])
    assert made < 64, report
    assert graded["rows"]["fork_bomb", "gelu"]["verdict"] == "pass"
    report = graded["reports"]["disk_filler", "gelu"]
    assert "| FILL stopped at 16 MB in /tmp/fill" in report, report
    for where in ("fill", "/fill", "/dev/shm/fill"):      # read-only: no tmpfs to fill but /tmp's 16 MB
        assert f"| FILL stopped at 0 MB in {where}: OSError" in report, report


# ------------------------------------------------------------------ the grader's own edges
def _grade(root, out, *extra, env=None):
    return subprocess.run([sys.executable, "-m", "exercises", "grade", str(root), "--out", str(out),
                           "--exercises", "gelu", "--jobs", "2", *extra], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=env)


def test_a_second_run_does_not_grade_its_own_output_and_leaves_no_temporary_file(tmp_path):
    root = tmp_path / "class"
    for student in ("ann", "ben"):
        (root / student).mkdir(parents=True)
        (root / student / "gelu.py").write_text(GELU)
    temp = tmp_path / "temp"
    temp.mkdir()
    env = dict(os.environ, TMPDIR=str(temp))
    for _ in range(2):                               # the output folder inside the class's folder
        res = _grade(root, root / "grades", env=env)
        assert res.returncode == 0, res.stderr
    with open(root / "grades" / "grades.csv", newline="", encoding="utf-8") as f:
        assert sorted(r["student"] for r in csv.DictReader(f)) == ["ann", "ben"]
    assert list(temp.iterdir()) == [], "the grader left files in the temporary folder"
    assert not [p for p in root.iterdir() if p.name.startswith(".grades-")]


@pytest.mark.parametrize("flag,value", [("--timeout", "0"), ("--timeout", "-3"), ("--timeout", "inf"),
                                        ("--memory-mb", "nan"), ("--memory-mb", "lots"), ("--jobs", "0"),
                                        ("--exercises", "gelu,,softmax")])
def test_a_limit_that_is_not_a_positive_number_is_one_line(tmp_path, flag, value):
    (tmp_path / "class" / "ann").mkdir(parents=True)
    res = _grade(tmp_path / "class", tmp_path / "out", flag, value)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip().splitlines()[-1].startswith("python -m exercises"), res.stderr
    assert not (tmp_path / "out").exists()


def test_without_a_sandbox_it_refuses_or_says_so_in_every_output(tmp_path):
    """No bwrap on the PATH: one line and exit 2; with --no-sandbox every output says how it was made."""
    (tmp_path / "class" / "ann").mkdir(parents=True)
    (tmp_path / "class" / "ann" / "gelu.py").write_text(GELU)
    bare = tmp_path / "bin"
    bare.mkdir()
    env = dict(os.environ, PATH=str(bare))
    res = _grade(tmp_path / "class", tmp_path / "out", env=env)
    assert res.returncode == 2 and "bubblewrap (bwrap) is not installed" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
    res = _grade(tmp_path / "class", tmp_path / "out", "--no-sandbox", env=env)
    assert res.returncode == 0, res.stderr
    out = tmp_path / "out"
    assert "WITHOUT isolation" in (out / "summary.txt").read_text().splitlines()[0]
    assert "WITHOUT isolation" in json.loads((out / "grades.json").read_text())["isolation"]
    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        assert [r["isolation"] for r in csv.DictReader(f)] == ["none"]
    assert "WITHOUT isolation" in json.loads((out / "gradescope" / "ann" / "results.json").read_text())["output"]


def test_in_the_student_copy_the_case_tables_and_solutions_are_out_of_reach(tmp_path):
    """Graded from a student copy (no solutions/, but cases/ ships with it): a file that takes its
    answers from the case tables, or from the solutions, is not graded PASS."""
    copy = tmp_path / "copy"
    res = subprocess.run([sys.executable, "-m", "exercises", "make-student", str(copy)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    root = tmp_path / "class"
    for student, text in (("tables", IMPORT_TABLE.replace("@NAME@", "layernorm")),
                          ("solutions", "from exercises.solutions.layernorm import *\n"),
                          ("copy_path", f"exec(open({str(copy / 'exercises' / 'cases' / 'layernorm.py')!r}).read())\n"
                                        "globals().update(TABLE.right)\n")):
        (root / student).mkdir(parents=True)
        (root / student / "layernorm.py").write_text(text)
    env = dict(os.environ, PYTHONPATH=str(ROOT))        # minibert importable, the copy's exercises first
    res = subprocess.run([sys.executable, "-m", "exercises", "grade", str(root), "--out", str(tmp_path / "out"),
                          "--exercises", "layernorm", "--jobs", "2"], cwd=copy, capture_output=True, text=True,
                         timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    with open(tmp_path / "out" / "grades.csv", newline="", encoding="utf-8") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    for student in ("tables", "solutions", "copy_path"):
        assert rows[student]["verdict"] == "fail", rows[student]
        assert "could not import" in rows[student]["first_fail"], rows[student]


SURVIVOR = '''
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]

class Regs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulonglong) for n in ("r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi "
                                                   "orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs").split()]

def _clear_pdeathsig(pid):
    # make the sandbox's init (bwrap, pid 1) call prctl(PR_SET_PDEATHSIG, 0): it then outlives its parent
    if libc.ptrace(16, pid, None, None) != 0:                          # PTRACE_ATTACH
        return
    os.waitpid(pid, 0x40000000)
    saved = Regs()
    libc.ptrace(12, pid, None, ctypes.byref(saved))                    # GETREGS
    new = Regs.from_buffer_copy(saved)
    new.rip, new.rax, new.rdi, new.rsi, new.orig_rax = saved.rip - 2, 157, 1, 0, 2 ** 64 - 1
    libc.ptrace(13, pid, None, ctypes.byref(new))                      # SETREGS
    libc.ptrace(9, pid, None, None)                                    # SINGLESTEP over the syscall
    os.waitpid(pid, 0x40000000)
    libc.ptrace(13, pid, None, ctypes.byref(saved))
    libc.ptrace(17, pid, None, None)                                   # DETACH

_clear_pdeathsig(1)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        libc.prctl(15, b"@MARK@", 0, 0, 0)
        end = time.time() + 30
        while time.time() < end:
            time.sleep(0.1)
    os._exit(0)
os.wait()
''' + GELU


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the attack writes x86-64 registers")
def test_a_student_who_ptraces_the_sandboxs_init_does_not_outlive_the_grading(tmp_path):
    """The sandbox's init, made by ptrace to forget --die-with-parent, is killed with the check all
    the same (by its pidfd, from bwrap's --info-fd): a PID namespace ends with its init."""
    mark = "mbsurvive"
    root = tmp_path / "class"
    for student, text in (("a_innocent", GELU), ("survivor", SURVIVOR.replace("@MARK@", mark)),
                          ("z_innocent", GELU)):
        (root / student).mkdir(parents=True)
        (root / student / "gelu.py").write_text(text)
    res = _grade(root, tmp_path / "out", "--timeout", "10")
    assert res.returncode == 0, res.stderr
    time.sleep(3)
    left = _host_processes(mark)
    for pid in left:
        os.kill(pid, 9)
    assert left == [], "the survivor outlived the grading"
    with open(tmp_path / "out" / "grades.csv", newline="", encoding="utf-8") as f:
        assert {r["student"]: r["verdict"] for r in csv.DictReader(f)} == dict.fromkeys(
            ("a_innocent", "survivor", "z_innocent"), "pass")


def test_a_file_swapped_for_a_link_while_graded_is_not_followed(tmp_path):
    """The grader opens a submission one name at a time without following links: a folder or file
    made a link after the class was listed is refused, never read through."""
    from exercises.submissions import read_below
    top = tmp_path / "class"
    (top / "eve" / "sub").mkdir(parents=True)
    (top / "eve" / "sub" / "gelu.py").write_text(GELU)
    assert read_below(top, top / "eve" / "sub" / "gelu.py", 1 << 20) == GELU.encode()
    secret = tmp_path / "secret"
    (secret / "sub").mkdir(parents=True)
    (secret / "sub" / "gelu.py").write_text("the lecturer's file")
    (top / "eve" / "sub" / "gelu.py").unlink()
    (top / "eve" / "sub" / "gelu.py").symlink_to(secret / "sub" / "gelu.py")
    with pytest.raises(OSError):
        read_below(top, top / "eve" / "sub" / "gelu.py", 1 << 20)
    shutil.rmtree(top / "eve" / "sub")
    (top / "eve" / "sub").symlink_to(secret / "sub")
    with pytest.raises(OSError):
        read_below(top, top / "eve" / "sub" / "gelu.py", 1 << 20)
    (top / "eve" / "big.py").write_bytes(b"#" * 2000)
    with pytest.raises(ValueError, match="over the limit"):
        read_below(top, top / "eve" / "big.py", 1000)


def test_csv_cells_never_start_a_formula(tmp_path):
    root = tmp_path / "class"
    (root / '=HYPERLINK("http:').mkdir(parents=True)
    (root / '=HYPERLINK("http:' / "gelu.py").write_text("def gelu_forward(x):\n    raise ValueError('=1+1\\nx')\n")
    res = _grade(root, tmp_path / "out")
    assert res.returncode == 0, res.stderr
    with open(tmp_path / "out" / "grades.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows[0]["student"] == "'" + '=HYPERLINK("http:'
    assert all(not v.startswith(("=", "+", "-", "@")) for r in rows for v in r.values())
    assert "\n" not in rows[0]["first_fail"]


def _children(pid: int) -> list[int]:
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return found


def test_the_grader_killed_leaves_no_process_behind(tmp_path):
    """SIGKILL to `grade` itself (by the lecturer; a student cannot reach it): its pool processes end
    themselves, and with them every sandbox, a student's endless loop included."""
    mark = "mbhang"
    root = tmp_path / "class"
    for student in ("ann", "ben", "cid"):
        (root / student).mkdir(parents=True)
        (root / student / "gelu.py").write_text(
            f"import ctypes\nctypes.CDLL(None).prctl(15, b'{mark}', 0, 0, 0)\nwhile True:\n    pass\n")
    proc = subprocess.Popen([sys.executable, "-m", "exercises", "grade", str(root), "--out", str(tmp_path / "out"),
                             "--exercises", "gelu", "--jobs", "2", "--timeout", "60"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.time() + 60
    while time.time() < end and not _host_processes(mark):
        time.sleep(0.1)
    pool = _children(proc.pid)
    assert pool and _host_processes(mark), "the students' loops never started"
    proc.kill()
    proc.wait()
    end = time.time() + 10
    while time.time() < end and (_host_processes(mark) or any(Path(f"/proc/{p}").exists() for p in pool)):
        time.sleep(0.1)
    left = _host_processes(mark) + [p for p in pool if Path(f"/proc/{p}").exists()]
    for pid in left:
        os.kill(pid, 9)
    assert left == [], "processes outlived the grader"
    assert not (tmp_path / "out").exists()


def test_two_files_of_one_exercise_at_the_same_depth_are_a_refused_row(tmp_path):
    """alice/a/gelu.py and alice/b/gelu.py: which one is meant is not the grader's to guess; a
    shallower one is still chosen over deeper ones."""
    from exercises.submissions import Refused, find_submissions
    for sub in ("alice/a", "alice/b", "bob/x", "bob/x/deeper"):
        (tmp_path / sub).mkdir(parents=True)
    for sub in ("alice/a", "alice/b", "bob/x", "bob/x/deeper"):
        (tmp_path / sub / "gelu.py").write_text("x = 1\n")
    found = find_submissions(tmp_path, ["gelu"])
    assert isinstance(found["alice"]["gelu"], Refused)
    assert "2 files gelu.py at the same depth (a/gelu.py, b/gelu.py)" in found["alice"]["gelu"]
    assert found["bob"]["gelu"] == tmp_path / "bob" / "x" / "gelu.py"
