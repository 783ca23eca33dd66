"""The course notebooks as committed: executed top to bottom, with outputs, without errors.

nbval (``make test``) re-runs every notebook and compares its outputs with the
committed ones.  These checks are about the committed files themselves, and take
no kernel: a notebook saved half-run, with an error in it, with a warning on
stderr or with a temporary path in an output would read badly on a web viewer
even where nbval's comparison is lenient (cells marked ``# NBVAL_IGNORE_OUTPUT``).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
MAX_BYTES = 1_500_000            # outputs are committed; keep the repository light


def cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def code_cells(path):
    return [c for c in cells(path) if c["cell_type"] == "code"]


def text_of(output) -> str:
    if output["output_type"] == "stream":
        text = output["text"]
    else:
        text = output.get("data", {}).get("text/plain", "")
    return "".join(text) if isinstance(text, list) else text


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_name_and_kernel(path):
    assert re.fullmatch(r"\d\d[a-z]?_[a-z0-9_]+\.ipynb", path.name), \
        f"{path.name}: name notebooks NN_lowercase_words.ipynb (NNa_, NNb_ for the parts of one)"
    meta = json.loads(path.read_text(encoding="utf-8"))["metadata"]
    assert meta.get("kernelspec", {}).get("name") == "python3", \
        f"{path.name}: the kernel must be 'python3' (nbval starts that kernel)"


def test_numbers_are_unique():
    """Each number is one notebook, or the parts a, b, ... of one, and the numbers run from 01 without a gap."""
    prefixes = [p.name.split("_")[0] for p in NOTEBOOKS]
    assert len(prefixes) == len(set(prefixes)), f"two notebooks share a number: {prefixes}"
    numbers = sorted({int(prefix[:2]) for prefix in prefixes})
    assert numbers == list(range(1, len(numbers) + 1)), f"the numbers have a gap: {numbers}"
    for n in numbers:
        parts = sorted(prefix[2:] for prefix in prefixes if int(prefix[:2]) == n)
        assert parts == [""] or parts == [chr(ord("a") + k) for k in range(len(parts))] and len(parts) > 1, \
            f"notebook {n:02d}: either one notebook or parts a, b, ...: {parts}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_executed_in_order(path):
    counts = [c["execution_count"] for c in code_cells(path) if c["source"]]
    assert None not in counts, f"{path.name}: some code cells were never run; execute the whole notebook"
    assert counts == list(range(1, len(counts) + 1)), \
        f"{path.name}: cells were run out of order ({counts}); restart the kernel and run all cells"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_outputs_are_clean(path):
    for i, cell in enumerate(code_cells(path)):
        for output in cell.get("outputs", []):
            where = f"{path.name}, code cell {i + 1}"
            assert output["output_type"] != "error", f"{where}: the committed output is an error"
            if output["output_type"] == "stream":
                assert output["name"] != "stderr", \
                    f"{where}: something was written to stderr (a warning?):\n{text_of(output)[:500]}"
            text = text_of(output)
            assert not re.search(r"(/tmp/|/var/folders/|\\Temp\\)", text), \
                f"{where}: an output shows a temporary path, which changes from run to run"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_has_prose_and_figures_are_light(path):
    kinds = [c["cell_type"] for c in cells(path)]
    assert kinds and kinds[0] == "markdown", f"{path.name}: start with a Markdown cell that says what it is about"
    assert path.stat().st_size < MAX_BYTES, \
        f"{path.name} is {path.stat().st_size:,} bytes; make its figures smaller (dpi, size)"


NBVAL_MARKERS = {"NBVAL_IGNORE_OUTPUT", "NBVAL_CHECK_OUTPUT", "NBVAL_RAISES_EXCEPTION", "NBVAL_SKIP"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_nbval_markers_are_exact(path):
    # nbval acts on a comment line that holds the marker and nothing else:
    # "# NBVAL_IGNORE_OUTPUT (because ...)" is silently not a marker
    for i, cell in enumerate(code_cells(path)):
        for line in "".join(cell["source"]).splitlines():
            comment = line.strip()
            if comment.startswith("#") and "NBVAL_" in comment:
                assert comment.lstrip("#").strip() in NBVAL_MARKERS, \
                    f"{path.name}, code cell {i + 1}: {comment!r} is not an nbval marker; put the reason on the next line"
