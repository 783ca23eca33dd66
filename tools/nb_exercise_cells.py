"""Insert an exercise (a markdown cell, a solution cell, a check cell) into a notebook: for authors.

    python tools/nb_exercise_cells.py NOTEBOOK AFTER_INDEX MARKDOWN_FILE SOLUTION_FILE CHECK_FILE

AFTER_INDEX is the index of the cell the three cells follow.  The solution
cell gets the tag "solution", the check cell the tag "check"
(exercises/student_notebooks.py).  Execute the notebook afterwards.
"""
import json
import sys
import uuid
from pathlib import Path


def cell(kind, text, tags=()):
    c = {"cell_type": kind, "id": uuid.uuid4().hex[:8], "metadata": {"tags": list(tags)} if tags else {}, "source": text.splitlines(True)}
    if kind == "code":
        c.update(outputs=[], execution_count=None)
    return c


def main(path, after, md, sol, chk):
    path = Path(path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    new = [cell("markdown", Path(md).read_text().rstrip("\n")),
           cell("code", Path(sol).read_text().rstrip("\n"), ["solution"]),
           cell("code", Path(chk).read_text().rstrip("\n"), ["check"])]
    nb["cells"][int(after) + 1:int(after) + 1] = new
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:])
