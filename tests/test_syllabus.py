"""The syllabus (notebooks/README.md) says what the notebooks hold: the exercises each one checks,
in order, its prose's length to within a tenth, and every exercise in exactly one list of assignments."""
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from exercises import EXERCISES  # noqa: E402
from exercises.student_notebooks import exercise_cells, source  # noqa: E402

SYLLABUS = ROOT / "notebooks" / "README.md"


def _rows():
    rows = {}
    for line in SYLLABUS.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| \[(\d\d[a-z]?) [^]]+\]\((\S+\.ipynb)\) \| (core|systems) \|.*\| ([^|]*) \| ([\d,]+) \| (\d+) s \|$", line)
        if m:
            rows[m.group(2)] = dict(exercises=re.findall(r"`(\w+)`", m.group(4)), words=int(m.group(5).replace(",", "")))
    return rows


def test_the_syllabus_lists_every_notebook_its_exercises_and_its_length():
    rows = _rows()
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert sorted(rows) == notebooks
    for name, row in rows.items():
        nb = json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))
        checked = []
        for _, j in exercise_cells(nb):
            exercise = re.search(r'check\("(\w+)"', source(nb["cells"][j])).group(1)
            if exercise not in checked:
                checked.append(exercise)
        assert row["exercises"] == checked, name
        words = sum(len(re.findall(r"[A-Za-z][\w'-]*", source(c))) for c in nb["cells"] if c["cell_type"] == "markdown")
        assert abs(words - row["words"]) <= 0.1 * row["words"], f"{name}: {words} words, the syllabus says {row['words']}"


def test_every_exercise_is_one_assignment():
    text = SYLLABUS.read_text(encoding="utf-8").split("## Assignments", 1)[1]
    listed = [name for line in text.split("\n* ")[1:] for name in re.findall(r"`(\w+)`", line.split(":", 1)[1])
              if name in EXERCISES]
    assert sorted(listed) == sorted(EXERCISES)


def test_the_architecture_figure_is_drawn_by_its_script(tmp_path):
    """notebooks/figures/bert_architecture.png is what tools/draw_architecture.py draws (the same
    size: the pixels differ with the fonts a machine has), and the course shows it."""
    import subprocess

    from PIL import Image
    out = tmp_path / "bert.png"
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "draw_architecture.py"), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    committed = ROOT / "notebooks" / "figures" / "bert_architecture.png"
    assert abs(Image.open(out).size[0] - Image.open(committed).size[0]) <= 20
    for name in ("02_building_blocks", "03_attention", "09_what_bert_is_not"):
        assert "](figures/bert_architecture.png)" in (ROOT / "notebooks" / f"{name}.ipynb").read_text()
    assert "](notebooks/figures/bert_architecture.png)" in (ROOT / "README.md").read_text()
