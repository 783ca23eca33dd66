"""Make the runs that ``tests/test_doctor.py`` diagnoses: real ``minibert pretrain`` runs, some broken on purpose.

    python tools/make_doctor_fixtures.py             # every case (about 40 minutes on a 2-core CPU)
    python tools/make_doctor_fixtures.py lr-10x ...  # some of them

Each case is ``make demo``'s recipe (``minibert.demo.DEMO``: tiny, the built-in corpus, 32-token
sequences in batches of 128, AdamW at 3e-3 with 80 warmup steps, 800 steps) with one thing
changed. It trains in a temporary folder through the command line's own ``main``; only the run's
``run.json`` and ``metrics.jsonl`` are kept, in ``tests/data/doctor/<case>/``.

Two of the breakages are not settings: ``mlm-shuffled`` and ``nsp-constant`` change the labels of
every training batch as it leaves the batch stream (this script patches ``BatchStream.next_batch``;
the held-out batches keep their true labels, as a real bug in the training data would leave them).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minibert.cli import main                      # noqa: E402
from minibert.constants import IGNORE_INDEX        # noqa: E402
from minibert.demo import DEMO                     # noqa: E402
from minibert.train import data as train_data     # noqa: E402

OUT = ROOT / "tests" / "data" / "doctor"

# case: (the flags changed from the demo's recipe, the label breakage or None)
CASES = {
    "healthy": ({"seed": 3}, None),                          # a seed the reference runs do not use
    "lr-10x": ({"lr": 3e-2}, None),
    "no-warmup": ({"warmup": 0}, None),
    "mlm-shuffled": ({}, "mlm"),
    "nsp-constant": ({}, "nsp"),
    "one-document": ({"corpus": "ONE_DOCUMENT"}, None),
    # 2,400 steps: with --dupe-factor 1 each training pair comes back some 60 times ...
    "dupe-1-long": ({"dupe_factor": 1, "steps": 2400, "warmup": 240}, None),
    # ... with 10, some 6 times: the same steps, healthy
    "dupe-10-long": ({"dupe_factor": 10, "steps": 2400, "warmup": 240}, None),
}


def recipe_flags(changes: dict, out: Path) -> list:
    """``minibert pretrain``'s command line for the demo's recipe with ``changes``."""
    settings = dict(DEMO, **changes)
    argv = ["pretrain", "--out", str(out), "--no-progress", "--no-plot", "--keep", "1",
            "--save-every", str(settings["steps"])]
    for name, value in settings.items():
        if name != "save_every":
            argv += [f"--{name.replace('_', '-')}", str(value)]
    return argv


def break_labels(kind: str):
    """Wrap ``BatchStream.next_batch`` so that every training batch leaves with broken labels."""
    real = train_data.BatchStream.next_batch
    rng = np.random.default_rng(0)

    def next_batch(self):
        batch = real(self)
        if kind == "mlm":
            # each predicted position gets the target of another position of the batch: the
            # targets keep their frequencies and lose every link to the context
            labels = batch["mlm_labels"]
            chosen = labels != IGNORE_INDEX
            labels[chosen] = rng.permutation(labels[chosen])
        else:
            batch["nsp_labels"][:] = 0                     # every pair labelled IsNext
        return batch
    train_data.BatchStream.next_batch = next_batch
    return lambda: setattr(train_data.BatchStream, "next_batch", real)


def one_document_corpus(folder: Path) -> Path:
    """The built-in corpus's longest document, 100 times over, as a corpus file."""
    from minibert.data.builtin import builtin_corpus
    longest = max(builtin_corpus().documents, key=len)
    path = folder / "one_document.txt"
    path.write_text("\n\n".join(["\n".join(longest)] * 100) + "\n", encoding="utf-8")
    return path


def make(case: str, folder: Path) -> None:
    changes, breakage = CASES[case]
    changes = dict(changes)
    if changes.get("corpus") == "ONE_DOCUMENT":
        changes["corpus"] = str(one_document_corpus(folder))
    run = folder / case
    restore = break_labels(breakage) if breakage else (lambda: None)
    try:
        status = main(recipe_flags(changes, run))
    finally:
        restore()
    if status != 0:
        raise SystemExit(f"{case}: minibert pretrain exited with status {status}")
    keep = OUT / case
    keep.mkdir(parents=True, exist_ok=True)
    for name in ("run.json", "metrics.jsonl"):
        shutil.copyfile(run / name, keep / name)
    print(f"{case}: {keep.relative_to(ROOT)}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases", nargs="*", metavar="CASE", help=f"default: every case ({', '.join(CASES)})")
    cases = parser.parse_args().cases or list(CASES)
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"no case {', '.join(unknown)}; the cases: {', '.join(CASES)}")
    with tempfile.TemporaryDirectory(prefix="minibert-doctor-") as tmp:
        for name in cases:
            make(name, Path(tmp))
