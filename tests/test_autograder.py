"""The exercises' checker as an autograder: the student's code runs in a worker process, one per
exercise, and whatever it does (rewrite the checker, exit, loop, crash, flood the output, patch
NumPy) the verdict and the exit status are the checker's own; `grade` marks a whole class."""
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:          # the exercises live next to the package, not inside it
    sys.path.insert(0, str(ROOT))

from exercises import EXERCISES  # noqa: E402
from exercises.checks import run_check  # noqa: E402
from exercises.cli import load_module  # noqa: E402
from exercises.sandbox import check_isolated  # noqa: E402
from exercises.confine import Confinement, Unavailable  # noqa: E402
from exercises.codec import Decoder, Encoder  # noqa: E402
from exercises.protocol import ProtocolError  # noqa: E402

SOLUTIONS = ROOT / "exercises" / "solutions"
STUBS = ROOT / "exercises" / "stubs"
GELU = (SOLUTIONS / "gelu.py").read_text()
HEADER = "def gelu_forward(x):\n"
POSIX = os.name == "posix"
try:                            # grading a class: in the sandbox where one can be made (test_grader_sandbox.py)
    Confinement.find()
    SANDBOX = []
except Unavailable:
    SANDBOX = ["--no-sandbox"]


def gelu_with(first_line: str, imports: str = "", source: str = GELU) -> str:
    """The gelu solution with ``first_line`` as the first line of gelu_forward: (source, its line number)."""
    assert source.count(HEADER) == 1
    text = imports + source.replace(HEADER, HEADER + f"    {first_line}\n")
    return text, text.splitlines().index(HEADER.strip()) + 2


def check_cli(tmp_path, text: str, *options, name="gelu", timeout=120):
    """`python -m exercises check NAME --path FILE` as a student runs it: (exit status, output)."""
    path = tmp_path / name / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    res = subprocess.run([sys.executable, "-m", "exercises", "check", name, "--path", str(path), *options],
                         cwd=ROOT, capture_output=True, timeout=timeout)
    return res.returncode, (res.stdout + res.stderr).decode("utf-8", "replace")


# ------------------------------------------------------------ the student cannot fake, end or silence it
def test_rewriting_the_checker_changes_nothing(tmp_path):
    """The untouched stub, with the checker's verdict rewritten to PASS from the student's file."""
    patch = ('import exercises.report as _h; _h.Report.passed = property(lambda self: True); '
             '_h.Report.render = lambda self: f"[PASS] {self.name}"\n')
    code, out = check_cli(tmp_path, patch + (STUBS / "gelu.py").read_text())
    assert code == 1 and "[TODO] gelu" in out and "[PASS]" not in out, out


def test_sys_exit_is_a_fail_that_names_its_line(tmp_path):
    text, line = gelu_with("sys.exit(0)", "import sys\n")
    code, out = check_cli(tmp_path, text)
    assert code == 1 and "[FAIL] gelu" in out, out
    assert f"ended the checker's worker process (sys.exit(0) at gelu.py line {line})" in out, out


def test_os_exit_is_a_fail_that_names_its_line(tmp_path):
    text, line = gelu_with("os._exit(0)", "import os\n")
    code, out = check_cli(tmp_path, text)
    assert code == 1 and "[FAIL] gelu" in out, out
    assert f"(os._exit(0) at gelu.py line {line})" in out, out


def test_an_endless_loop_is_stopped_at_its_line(tmp_path):
    text, line = gelu_with("while True: pass")
    start = time.perf_counter()
    code, out = check_cli(tmp_path, text, "--timeout", "2", timeout=60)
    assert time.perf_counter() - start < 30
    assert code == 1 and "gelu_forward did not return within 2 s (an endless loop?)" in out, out
    assert f"gelu.py line {line} : while True: pass" in out, out


def test_keyboard_interrupt_in_student_code_is_a_fail_not_a_traceback(tmp_path):
    text, line = gelu_with("raise KeyboardInterrupt")
    code, out = check_cli(tmp_path, text)
    assert code == 1 and "[FAIL] gelu" in out and "Traceback" not in out, out
    assert "gelu_forward raised KeyboardInterrupt" in out and f"line {line}" in out, out


def test_a_flood_of_prints_is_cut_and_the_verdict_stands(tmp_path):
    text, _ = gelu_with("print('x' * 10_000_000)")
    code, out = check_cli(tmp_path, text)
    assert code == 0 and "[PASS] gelu" in out, out[:2000]
    assert len(out) < 5000 and "your code printed" in out and "MB" in out, out[:2000]


def test_a_huge_allocation_is_a_fail_that_names_its_line(tmp_path):
    text, line = gelu_with("big = np.ones(149 * 2**30 // 8)")
    code, out = check_cli(tmp_path, text)
    assert code == 1 and "MemoryError" in out and f"gelu.py line {line}" in out, out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="an address-space limit is Linux's")
def test_the_worker_has_a_memory_limit(tmp_path):
    """2 GiB, which this machine has, fails under --memory-mb 1024: the limit is the worker's."""
    text, line = gelu_with("big = np.ones(2 * 2**30 // 8)")
    code, out = check_cli(tmp_path, text, "--memory-mb", "1024")
    assert code == 1 and "MemoryError" in out and f"gelu.py line {line}" in out, out


@pytest.mark.skipif(not POSIX, reason="signals are POSIX's")
def test_a_segmentation_fault_is_a_fail_that_names_its_line(tmp_path):
    text, line = gelu_with("ctypes.string_at(0)", "import ctypes\n")
    code, out = check_cli(tmp_path, text)
    assert code == 1 and "[FAIL] gelu" in out, out
    assert "crashed with a segmentation fault (signal 11)" in out and f"gelu.py line {line}" in out, out


def test_patching_numpy_and_minibert_does_not_reach_the_checker(tmp_path):
    """A wrong GELU (erf(x) for erf(x / sqrt 2)) whose file also patches what the checks compute with."""
    patches = ("import numpy as np\nimport minibert.gradcheck as g\nimport exercises.harness as h\n"
               "np.max = lambda *a, **k: 0.0\nnp.allclose = lambda *a, **k: True\n"
               "g.max_rel_error = h.max_rel_error = lambda a, b: 0.0\n")
    wrong = GELU.replace("erf(x / math.sqrt(2.0))", "erf(x)")
    assert wrong != GELU
    code, out = check_cli(tmp_path, patches + wrong)
    assert code == 1 and "[FAIL] gelu" in out and "erf's argument is x / sqrt(2), not x" in out, out


@pytest.mark.parametrize("text,expected", [
    ("def gelu_forward(x)\n    return x\n", "gelu.py does not compile: expected ':' (line 1)"),
    ("import numpy as np\nSCALE = undefined_name * 2\n", "NameError: name 'undefined_name' is not defined "
                                                          "(at gelu.py line 2: SCALE = undefined_name * 2)"),
    ("import sys\nsys.exit(3)\n", "(sys.exit(3) at gelu.py line 2) while the import of gelu.py ran"),
    ("while True:\n    pass\n", "the import of gelu.py did not return within 2 s (an endless loop?)"),
], ids=["syntax error", "exception", "sys.exit", "endless loop"])
def test_a_file_that_does_not_import_is_a_fail(tmp_path, text, expected):
    code, out = check_cli(tmp_path, text, "--timeout", "2")
    assert code == 1 and "[FAIL] gelu" in out and expected in out and "Traceback" not in out, out


def test_a_file_of_nul_bytes_is_a_fail_without_a_line_of_none(tmp_path):
    code, out = check_cli(tmp_path, "\0\0\0")
    assert code == 1 and "gelu.py does not compile: " in out and "line None" not in out, out


# ------------------------------------------------------------ the same verdicts as in-process
@pytest.mark.parametrize("name", list(EXERCISES))
def test_isolated_verdicts_are_the_in_process_ones(name):
    for source in ("solutions", "stubs"):
        assert check_isolated(name, source).render() == run_check(name, load_module(name, source)).render()


def _wrong_answers():
    from test_exercises import FLOAT32, HINTS, IN_PLACE   # the file-based mistakes of the checkers' tests
    return {**FLOAT32, **IN_PLACE, **HINTS}


@pytest.mark.parametrize("case", list(_wrong_answers()))
def test_isolated_reports_of_wrong_answers_are_the_in_process_ones(tmp_path, case):
    """Every line, hint and number of the report: float32 results, arguments changed in place (the
    worker sends back what each call changed), the hints of usual mistakes."""
    name, old, new = _wrong_answers()[case][:3]
    path = tmp_path / f"{name}.py"
    path.write_text((SOLUTIONS / f"{name}.py").read_text().replace(old, new))
    isolated = check_isolated(name, str(path))
    assert isolated.status == "fail"
    assert isolated.render() == run_check(name, load_module(name, str(path))).render()


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EXERCISES))
def test_isolated_reports_of_planted_mistakes_are_the_in_process_ones(tmp_path, name):
    """Every third case of the exercise's table of mistakes (all of them took 5.4 minutes of CPU, a
    worker each; the transport is the same for a case and its neighbours) and every right variant,
    each run in a worker from a file that rebuilds it there: every report line as in-process (a
    stand-in module has no file, so the headers differ)."""
    from exercises.cases import TABLES
    table = TABLES[name]
    modules = ([(f"TABLES[{name!r}].cases[{i}].module", case.module) for i, case in enumerate(table.cases)
                if i % 3 == 0]
               + [(f"TABLES[{name!r}].variants[{i}][1]", module) for i, (_, module) in enumerate(table.variants)])
    for i, (source, module) in enumerate(modules):
        path = tmp_path / f"case_{i}" / f"{name}.py"
        path.parent.mkdir()
        path.write_text(f"from exercises.cases import TABLES\n_m = {source}\n"
                        "globals().update({k: v for k, v in vars(_m).items() if not k.startswith('__')})\n")
        isolated = check_isolated(name, str(path)).render().splitlines()[1:]
        assert isolated == run_check(name, module).render().splitlines()[1:], source


# ------------------------------------------------------------ what comes back is data, read strictly
@pytest.mark.parametrize("node", [
    {"t": "nd", "dtype": "|O", "shape": [1], "o": 0, "n": 8},              # an object array
    {"t": "nd", "dtype": "i4,O", "shape": [1], "o": 0, "n": 12},           # objects in a record
    {"t": "nd", "dtype": "<f8", "shape": [4], "o": 0, "n": 8},             # bytes that do not fit
    {"t": "r", "n": 3},                                                     # a reference to nothing
    {"t": "rng", "bits": "os.system", "state": {}},                         # not one of NumPy's
    {"t": "pickle", "v": "gASVAAAAAAAAAAA="},                               # no such thing
])
def test_the_checker_reads_only_plain_data_from_the_worker(node):
    with pytest.raises(ProtocolError):
        Decoder(b"\0" * 8)(node)


def test_encoding_keeps_values_types_and_shared_arrays():
    a = np.arange(6.0).reshape(2, 3)
    value = (a, a, [1, [2, 3]], {"k": np.float32(1.5)}, np.int64(7), np.array(2.0), None, "s", 1 + 2j)
    enc = Encoder({})
    node = enc(value)
    back = Decoder(b"".join(enc.blobs))(json.loads(json.dumps(node)))
    assert back[0] is back[1] and np.array_equal(back[0], a) and back[2] == [1, [2, 3]]
    assert type(back[3]["k"]) is np.float32 and type(back[4]) is np.int64 and back[5].shape == ()
    assert back[6:] == (None, "s", 1 + 2j)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the pipe in /proc")
def test_bytes_written_into_the_checkers_pipe_are_a_fail(tmp_path):
    """The student's code writes junk into the worker's answer pipe: read, refused, reported."""
    forge = '''import os, struct

def _forge():
    junk = b'{"ok": [{"t": "pickle", "v": "gASVAAAAAAAAAAA="}]}'
    for f in os.listdir("/proc/self/fd"):
        if int(f) > 2 and os.readlink(f"/proc/self/fd/{f}").startswith("pipe:"):
            try:
                os.write(int(f), struct.pack("<QQ", len(junk), 0) + junk)
            except OSError:
                pass
'''
    text, _ = gelu_with("_forge()", forge)
    code, out = check_cli(tmp_path, text, "--timeout", "10")
    assert code == 1 and "[FAIL] gelu" in out and "Traceback" not in out, out


# ------------------------------------------------------------ grading a class
def _submissions(root: Path) -> dict:
    """36 students, each with gelu.py and softmax.py (or not): {student: (gelu, softmax)} expected verdicts."""
    gelu, softmax = GELU, (SOLUTIONS / "softmax.py").read_text()
    stub_gelu, stub_softmax = (STUBS / "gelu.py").read_text(), (STUBS / "softmax.py").read_text()
    tanh = GELU.replace("erf(x / math.sqrt(2.0))", "np.tanh(0.7978845608 * (x + 0.044715 * x ** 3))")
    no_sum = softmax.replace("return p * (dp - (dp * p).sum(axis=-1, keepdims=True))", "return p * dp")
    kinds = {
        "correct": (gelu, softmax, "pass", "pass"),
        "wrong gelu": (tanh, softmax, "fail", "pass"),
        "wrong softmax": (gelu, no_sum, "pass", "fail"),
        "hangs": (gelu_with("while True: pass")[0], softmax, "fail", "pass"),
        "segfault": (gelu_with("ctypes.string_at(0)", "import ctypes\n")[0], softmax, "fail", "pass"),
        "os._exit": (gelu_with("os._exit(0)", "import os\n")[0], no_sum, "fail", "fail"),
        "rewrites the verdict": ('import exercises.harness as h; h.Report.passed = property(lambda s: True)\n'
                                 + stub_gelu, stub_softmax, "todo" if SANDBOX else "fail", "todo"),
        "sys.exit(0)": (gelu_with("sys.exit(0)", "import sys\n")[0], softmax, "fail", "pass"),
        "patches numpy": ("import numpy as np\nnp.max = lambda *a, **k: 0.0\n" + tanh, softmax, "fail", "pass"),
        "stubs": (stub_gelu, stub_softmax, "todo", "todo"),
        "syntax error": ("def gelu_forward(x)\n", softmax, "fail", "pass"),
        "floods": (gelu_with("print('x' * 1_000_000)")[0], softmax, "pass", "pass"),
        "only gelu": (gelu, None, "pass", "missing"),
        "nothing": (None, None, "missing", "missing"),
    }
    counts = {"correct": 10, "wrong gelu": 3, "wrong softmax": 3, "stubs": 3, "only gelu": 2}
    expected = {}
    for kind, (g, s, vg, vs) in kinds.items():
        for i in range(counts.get(kind, 1)):
            student = f"{kind.replace(' ', '_')}_{i}"
            folder = root / student / ("nested" if i == 1 else "")
            folder.mkdir(parents=True, exist_ok=True)
            for name, text in (("gelu", g), ("softmax", s)):
                if text is not None:
                    (folder / f"{name}.py").write_text(text)
            expected[student] = {"gelu": vg, "softmax": vs}
    for i in range(2):                          # loose files, as a course site exports them
        (root / f"loose_{i}_gelu.py").write_text(gelu)
        (root / f"loose_{i}_softmax.py").write_text(no_sum)
        expected[f"loose_{i}"] = {"gelu": "pass", "softmax": "fail"}
    return expected


def test_grade_a_class(tmp_path):
    subs, out = tmp_path / "submissions", tmp_path / "grades"
    expected = _submissions(subs)
    assert len(expected) >= 30
    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "exercises", "grade", str(subs), "--out", str(out),
                          "--exercises", "gelu,softmax", "--timeout", "5", "--jobs", "2", *SANDBOX],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - start
    print(f"\ngrade: {len(expected)} students x 2 exercises in {wall:.1f} s with 2 jobs")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr

    with open(out / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * len(expected)
    assert set(rows[0]) == {"student", "exercise", "verdict", "points", "max_points", "first_fail", "hint", "seconds",
                            "file", "isolation"}
    assert all(float(r["points"]) == float(r["verdict"] == "pass") and float(r["max_points"]) == 1.0 for r in rows)
    assert {r["isolation"] for r in rows} == {"none" if SANDBOX else "sandbox"}
    got = {(r["student"], r["exercise"]): r for r in rows}
    for student, verdicts in expected.items():
        for name, verdict in verdicts.items():
            assert got[student, name]["verdict"] == verdict, got[student, name]
    assert "did not return within 5 s" in got["hangs_0", "gelu"]["first_fail"]
    assert "segmentation fault" in got["segfault_0", "gelu"]["first_fail"]
    assert "os._exit(0) at gelu.py" in got["os._exit_0", "gelu"]["first_fail"]
    assert "tanh approximation" in got["wrong_gelu_0", "gelu"]["hint"]
    assert "tanh approximation" in got["patches_numpy_0", "gelu"]["hint"]
    assert "does not compile" in got["syntax_error_0", "gelu"]["first_fail"]
    if not SANDBOX:           # in the sandbox the checker's modules are not there to patch
        assert "No module named 'exercises.harness'" in got["rewrites_the_verdict_0", "gelu"]["first_fail"]
    assert got["only_gelu_1", "gelu"]["file"].endswith(os.path.join("nested", "gelu.py"))

    data = json.loads((out / "grades.json").read_text())
    assert len(data["rows"]) == len(rows) and all(r["report"] for r in data["rows"] if r["verdict"] != "missing")
    softmax = data["summary"]["softmax"]
    assert softmax["students"] == len(expected)
    assert softmax["pass"] == sum(v["softmax"] == "pass" for v in expected.values())
    assert "missing the term that subtracts" in softmax["first_hints"][0][0]   # the class's usual mistake
    assert "\ngelu: " in "\n" + (out / "summary.txt").read_text()    # (under a first line: --no-sandbox)

    for student, verdicts in expected.items():   # Gradescope's results.json, one per student
        results = json.loads((out / "gradescope" / student / "results.json").read_text())
        assert results["score"] == sum(v == "pass" for v in verdicts.values())
        assert isinstance(results["execution_time"], int) and results["stdout_visibility"] == "hidden"
        assert [t["name"] for t in results["tests"]] == ["gelu", "softmax"]
        for test in results["tests"]:
            assert set(test) == {"name", "score", "max_score", "status", "output", "visibility"}
            assert test["max_score"] == 1.0 and test["visibility"] == "visible"
            assert test["status"] == ("passed" if verdicts[test["name"]] == "pass" else "failed")
            assert test["score"] == float(test["status"] == "passed") and test["output"]


def test_grade_one_submission_for_gradescope(tmp_path):
    """--single: the folder is one student's (Gradescope's /autograder/submission); results.json in --out."""
    sub = tmp_path / "submission"
    sub.mkdir()
    (sub / "gelu.py").write_text(GELU)
    res = subprocess.run([sys.executable, "-m", "exercises", "grade", str(sub), "--single", "--out",
                          str(tmp_path / "results"), "--exercises", "gelu,adamw", *SANDBOX],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    results = json.loads((tmp_path / "results" / "results.json").read_text())
    assert results["score"] == 1.0
    assert [(t["name"], t["status"]) for t in results["tests"]] == [("gelu", "passed"), ("adamw", "failed")]
