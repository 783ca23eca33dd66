"""BERT's search over fine-tuning settings (Devlin et al. 2019, appendix A.3): batch 16 or 32, learning
rate 5e-5, 3e-5 or 2e-5, 2 to 4 epochs, each setting run from the same pre-trained weights and the best
kept by the task's development metric; with several seeds per setting, since fine-tuning a small task
varies from run to run (the paper reruns BERT-large on the small tasks for that reason).

``--search`` alone is the whole grid; ``--search "lr=5e-5,3e-5;epochs=3"`` a part of it (the other
settings the command line's).  A setting's score is the mean over its seeds of the first development
file's first metric (MNLI: matched; MRPC: F1); the best setting's best seed is the model kept.
"""
from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from .train import Recipe

GRID = {"batch_size": (16, 32), "lr": (5e-5, 3e-5, 2e-5), "epochs": (2, 3, 4)}
NAMES = {"batch": "batch_size", "batch-size": "batch_size", "batch_size": "batch_size", "lr": "lr",
         "epochs": "epochs"}


def grid(spec: str | None, base: Recipe) -> list[Recipe]:
    """The settings to run: ``base`` alone (no ``--search``), the whole grid (``""``), or the grid of
    ``spec`` (``name=v1,v2;...``), each with ``base``'s other settings."""
    if spec is None:
        return [base]
    values = dict(GRID)
    if spec.strip():
        values = {k: (getattr(base, k),) for k in GRID}
        for part in filter(None, (p.strip() for p in spec.split(";"))):
            name, _, given = part.partition("=")
            key = NAMES.get(name.strip())
            if key is None or not given.strip():
                raise ValueError(f"--search {spec!r}: write name=value,value;... with names lr, batch-size and "
                                 f"epochs (not {part!r})")
            kind = float if key == "lr" else int
            try:
                values[key] = tuple(kind(v) for v in given.split(","))
            except ValueError:
                raise ValueError(f"--search {spec!r}: {given!r} are not {key} values") from None
            if not all(0 < v < (1 if key == "lr" else 10 ** 6) for v in values[key]):
                raise ValueError(f"--search {spec!r}: {key} must be {'between 0 and 1' if key == 'lr' else '1 or more'}")
    return [dataclasses.replace(base, batch_size=b, lr=lr, epochs=e)
            for b, lr, e in itertools.product(values["batch_size"], values["lr"], values["epochs"])]


def run(settings: list[Recipe], seeds: list[int], one_run, key, done=(), on_run=None) -> tuple[list[dict], dict]:
    """Each setting with each seed: ``one_run(recipe)`` returns (dev results {file: {metric: value}}, model).
    ``key(results)`` is the number that ranks a run.  ``done``: the results of the first runs, made before
    (a resumed job): not run again, their models None.  ``on_run(index, results, model, keep)`` after each
    new run, ``keep`` the runs (their numbers, in order from 0) whose models the search may still choose.
    Returns the table (a row per setting: its runs, the mean and sample spread of ``key``) and the best: its
    recipe, results and run number."""
    table, best, index = [], None, 0
    for setting in settings:
        runs, top = [], None
        for seed in seeds:
            recipe = dataclasses.replace(setting, seed=seed)
            results, model = (done[index], None) if index < len(done) else one_run(recipe)
            runs.append((key(results), recipe, results, index))
            if top is None or runs[-1][0] > top[0]:
                top = runs[-1]                      # this setting's best seed so far
            if len(runs) == len(seeds):
                values = np.array([r[0] for r in runs])
                row = {"batch_size": setting.batch_size, "lr": setting.lr, "epochs": setting.epochs,
                       "mean": float(values.mean()), "spread": float(values.std(ddof=1)) if len(values) > 1 else 0.0,
                       "runs": [{"seed": r[1].seed, "dev": r[2]} for r in runs]}
                table.append(row)
                if best is None or row["mean"] > best["mean"]:
                    best = {"mean": row["mean"], "recipe": top[1], "results": top[2], "index": top[3]}
            if on_run is not None and index >= len(done):
                keep = {top[3]} if len(runs) < len(seeds) else set()
                on_run(index, results, model, keep | ({best["index"]} if best is not None else set()))
            index += 1
    return table, best


def render(table: list[dict], what: str) -> str:
    """The table as text: a line per setting, the mean and spread of ``what`` over its seeds."""
    n = len(table[0]["runs"])
    lines = [f"batch  lr      epochs  {what} (mean" + (f" +- spread over {n} seeds)" if n > 1 else ")")]
    for row in table:
        lines.append(f"{row['batch_size']:>5}  {row['lr']:<7.0e} {row['epochs']:>6}  {row['mean']:.4f}"
                     + (f" +- {row['spread']:.4f}" if n > 1 else ""))
    return "\n".join(lines)
