"""Make the reference runs ``minibert doctor`` draws a run against: ``make demo``'s recipe, three seeds.

    python tools/make_doctor_references.py       # about 8 minutes on a 2-core CPU

Each run is ``minibert pretrain`` with the settings of ``minibert.demo.DEMO`` (seed 0 is the
run ``make demo`` makes) and seeds 1 and 2; its ``run.json`` and ``metrics.jsonl`` go to
``minibert/references/demo/seed-<N>/``. The spread of the three is the band in ``doctor.png``.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minibert.cli import main                       # noqa: E402
from minibert.demo import DEMO                      # noqa: E402
from tools.make_doctor_fixtures import recipe_flags  # noqa: E402

OUT = ROOT / "minibert" / "references" / "demo"

if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="minibert-references-") as tmp:
        for seed in (0, 1, 2):
            run = Path(tmp) / f"seed-{seed}"
            if main(recipe_flags({"seed": seed}, run)) != 0:
                raise SystemExit(f"seed {seed}: minibert pretrain failed")
            keep = OUT / f"seed-{seed}"
            keep.mkdir(parents=True, exist_ok=True)
            for name in ("run.json", "metrics.jsonl"):
                shutil.copyfile(run / name, keep / name)
            print(f"seed {seed}: {keep.relative_to(ROOT)}", flush=True)
