"""Every number the course's prose states is printed, set or cited: none is a figure of memory.

A number in a notebook's Markdown passes when

* ``tests/test_notebooks_prose.py`` computes it from the outputs (its chosen sentences: a mean,
  a difference or a ratio of printed numbers);
* a code cell before it prints it or sets it, or the code cell right after it does (the cell the
  sentence introduces, or that a "Predict, then run" answer is about, after a graded question's
  answer and check cells): within the precision
  the prose gives (0.17 stands for 0.165 to 0.175), a share in percent for a fraction (62.6%
  for 0.626);
* or its sentence, or an earlier sentence of the notebook stating the same number, carries a
  citation: a paper (Author et al. with its year, or a table, section, figure or appendix), a
  link, or a file of this repository or another project (a path with its extension, a commit).

And the kinds it lets pass, listed here and nowhere else:

* small whole numbers, 0 to 12 (counts a sentence could spell out: "two heads", "3 seeds");
* years, and dates;
* names: notebook 8, cell 12, section 3, step 2, layer 1, head 2, seed 1, Python 3.11;
* numbers in mathematics or code: inside $...$ and `...` (a formula's constants and what it
  works out, a call's arguments), in link targets and headings, and a numbered list's numbers;
  a number the notebook's mathematics works out may be quoted after it.

``test_a_planted_number_fails`` plants a wrong number in a sentence of every notebook and
requires this test's rule to find it.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))

NUMBER = re.compile(r"(?<![\w.,\-/#§])[-−]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?(?:\s?%)?(?![\w/])")
CITATION = re.compile(r"et al\.|\b(?:Table|Figure|Appendix|Section|§)\s?[A-Z]?\d|\]\(https?:|\bcommit\b"
                      r"|\.(?:py|md|jsonl|json|txt|tsv|cfg|ipynb)\b")
NAMED = re.compile(r"(?:notebooks?|cells?|§|[Ss]teps?|[Ss]ections?|[Ll]ayers?|[Hh]eads?|[Ee]xercises?|[Pp]arts?"
                   r"|[Ss]eeds?|[Rr]anks?|[Ww]orkers?|Python|NumPy|CUDA|[Vv]ersion|ranks|rows?)\s+(?:[\d.]+,?\s+(?:and|to|or)\s+)?$")
MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def _outputs(cell) -> str:
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out.append(_text(o["text"]))
        elif "data" in o:
            out.append(_text(o["data"].get("text/plain", "")))
    return "\n".join(out)


def parse(token: str):
    """(value, is a percentage, the digits as written) of a number as the prose writes it, or None."""
    t = token.replace("−", "-").replace(",", "").replace(" ", "")
    percent = t.endswith("%")
    t = t.rstrip("%")
    try:
        return float(t), percent, t
    except ValueError:
        return None


def _half_unit(digits: str) -> float:
    m = re.match(r"-?\d+\.(\d+)$", digits)
    return 0.5 * 10.0 ** -len(m.group(1)) if m else 0.5


def _sentences(markdown: str) -> list[str]:
    markdown = re.sub(r"^#+ .*$", " ", markdown, flags=re.M)                # headings name, they do not state
    return re.split(r"(?<=[.!?])\s+(?=[A-Z*(\[])|\n\n", markdown)


def _prose(sentence: str) -> str:
    """The sentence without mathematics, code, link targets and list numbers."""
    s = re.sub(r"\$\$.*?\$\$", " ", sentence, flags=re.S)
    s = re.sub(r"\$[^$]*\$", " ", s)
    s = re.sub(r"`[^`]*`", " ", s)
    s = re.sub(r"\]\([^)]*\)", "]", s)
    s = re.sub(rf"\b\d{{1,2}} (?:{MONTHS})\b|\b(?:{MONTHS}) \d{{1,2}}\b", " ", s)
    return re.sub(r"^\s*\d+\.\s", " ", s, flags=re.M)


def _allowed(x: float, percent: bool, before: str) -> bool:
    if NAMED.search(before):
        return True
    whole = x.is_integer() and not percent
    return whole and (0 <= x <= 12 or 1900 <= x <= 2100)


def _matches(x, percent, digits, known) -> bool:
    tol = _half_unit(digits) + 1e-12
    for y, y_percent in known:
        if abs(x - y) <= tol:
            return True
        if percent and not y_percent and abs(x / 100 - y) <= tol / 100:
            return True
    return False


def _numbers(text: str) -> list[tuple[float, bool]]:
    return [(v[0], v[1]) for v in map(parse, (m.group() for m in NUMBER.finditer(text))) if v]


def tied(name: str) -> list[tuple[float, bool]]:
    """The numbers of the sentences ``tests/test_notebooks_prose.py`` computes from a notebook's outputs
    (a mean, a difference, a ratio of printed numbers): backed by that test."""
    import test_notebooks_prose as prose
    if name not in prose.CLAIMS:
        return []
    outputs, _ = prose.load(name)
    return _numbers(" ".join(prose.CLAIMS[name](outputs)))


def unbacked(cells, backed=()) -> list[tuple[int, str, str]]:
    """(cell, number, sentence) for each number of the Markdown cells that nothing backs; ``backed``:
    numbers a test computes from the outputs."""
    found, cited, maths = [], [], list(backed)
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        code = [c for c in cells[:i] if c["cell_type"] == "code"]
        after = [next((c for c in cells[i + 1:] if c["cell_type"] == "code" and not answer(c)), None),
                 next((c for c in cells[i + 1:] if c["cell_type"] == "code"), None)]
        known = _numbers("\n".join(_text(c["source"]) + "\n" + _outputs(c) for c in code + [c for c in after if c]))
        for sentence in _sentences(_text(cell["source"])):
            maths.extend(_numbers(" ".join(re.findall(r"\$\$.*?\$\$|\$[^$]*\$", sentence, flags=re.S))))   # a formula's
            prose = _prose(sentence)
            here = [(m, parse(m.group())) for m in NUMBER.finditer(prose)]
            if CITATION.search(sentence):
                cited += [(v[0], v[1]) for _, v in here if v]
                continue
            for m, v in here:
                if v is None or _allowed(v[0], v[1], prose[:m.start()]):
                    continue
                if not _matches(*v, known + cited + maths):
                    found.append((i, m.group(), " ".join(sentence.split())[:160]))
    return found


def answer(cell) -> bool:
    """A graded question's answer or check cell (tags solution, check): the prose above a question
    introduces the cell after them."""
    return bool({"solution", "check"} & set(cell.get("metadata", {}).get("tags", [])))


def _cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_number_of_the_prose_is_printed_set_or_cited(path):
    found = unbacked(_cells(path), tied(path.name))
    assert not found, f"{path.name}: numbers no cell prints or sets and no citation backs:\n" + \
        "\n".join(f"  cell {i}: {n!r} in: {s}" for i, n, s in found)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_planted_number_fails(path):
    cells = _cells(path)
    i = max(k for k, c in enumerate(cells) if c["cell_type"] == "markdown" and len(_text(c["source"])) > 200)
    planted = [dict(c) for c in cells]
    planted[i] = dict(cells[i], source=_text(cells[i]["source"]) + "\n\nThe loss fell by 0.8137 nats.")
    assert (i, "0.8137", "The loss fell by 0.8137 nats.") in unbacked(planted)
