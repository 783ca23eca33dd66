"""Points per exercise: one table for every output of ``grade`` (grades.csv, grades.json, summary.txt and
Gradescope's results.json).

The table is a CSV file (``grade --points FILE``), a line ``exercise,points`` per exercise, a header line
``exercise,points`` allowed; an exercise it does not name is worth 1 point, as every one is by default.
An exercise earns its points when every check passes, none otherwise.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path


def read_points(path: Path | None, names) -> dict:
    """{exercise: its points} for each of ``names``; ValueError with the line at fault for a table that
    names an exercise not graded, or twice, or gives anything but a positive number."""
    points = dict.fromkeys(names, 1.0)
    if path is None:
        return points
    try:
        with open(path, newline="", encoding="utf-8") as f:
            lines = list(csv.reader(f))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from None
    given = {}                 # exercise: the line that gave its points
    for number, line in enumerate(lines, start=1):
        cells = [c.strip() for c in line]
        if not any(cells) or (number == 1 and [c.lower() for c in cells] == ["exercise", "points"]):
            continue
        where = f"{path}, line {number}"
        if len(cells) != 2:
            raise ValueError(f"{where}: write exercise,points (got {','.join(line)!r})")
        name, value = cells
        if name not in points:
            raise ValueError(f"{where}: {name!r} is not an exercise being graded ({', '.join(points)})")
        if name in given:
            raise ValueError(f"{where}: {name} is given points on line {given[name]} already")
        given[name] = number
        try:
            points[name] = float(value)
        except ValueError:
            raise ValueError(f"{where}: {value!r} is not a number of points") from None
        if not (math.isfinite(points[name]) and points[name] > 0):
            raise ValueError(f"{where}: an exercise is worth more than 0 points, not {value}")
    return points


def award(rows: list[dict], points: dict) -> None:
    """Each row's ``max_points`` (its exercise's) and ``points`` (those, when it passes; else 0)."""
    for r in rows:
        r["max_points"] = points[r["exercise"]]
        r["points"] = r["max_points"] if r["verdict"] == "pass" else 0.0
