"""The learning-rate and length sweep behind the table of notebook 8 (fine-tuning).

Runs the notebook's own code (its code cells up to the one that defines ``fine_tune``, so the
data, the model and the training loop are exactly the notebook's) for every setting below, both
starts (the committed pre-trained encoder and a random one) and three seeds, and writes the
accuracies on the development sentences (for choosing a setting) and on the test sentences (for
reporting it) to ``fine_tuning_sweep.json`` beside this file.  From the repository root:

    python notebooks/pretrained/fine_tuning_sweep.py

It takes about seven minutes on a 2-core CPU.  The accuracies are float32 training results: another
CPU (another BLAS kernel) can move a few of them by a test sentence or two.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
NOTEBOOK = HERE.parent / "08_fine_tuning.ipynb"
OUT = HERE / "fine_tuning_sweep.json"

# (peak learning rate, epochs): the notebook's grid, then BERT's published range for comparison
# (Devlin et al. 2019, appendix A.3: 2e-5 to 5e-5, 2 to 4 epochs)
SETTINGS = [(1e-3, 10), (1e-3, 20), (3e-3, 10), (3e-3, 20), (5e-3, 10), (5e-3, 20),
            (5e-5, 4), (5e-5, 20)]
SEEDS = (0, 1, 2)


def notebook_namespace() -> dict:
    """Execute the notebook's code cells up to the one that defines fine_tune, in its folder."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    ns: dict = {"__name__": "__sweep__"}
    os.chdir(NOTEBOOK.parent)
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        exec(compile(source, str(NOTEBOOK), "exec"), ns)
        if "def fine_tune(" in source:
            return ns
    raise SystemExit(f"{NOTEBOOK} defines no fine_tune")


def also_on_dev(ns: dict) -> list:
    """Make the notebook's fine_tune measure the development sentences too, each time it measures the
    test sentences (its ``accuracy`` is looked up when called): returns the list the dev accuracies go to.
    Evaluation draws no random number, so training is the notebook's own, step for step."""
    accuracy, dev = ns["accuracy"], []

    def accuracy_and_dev(model, f):
        dev.append(accuracy(model, ns["dev_f"]))
        return accuracy(model, f)
    ns["accuracy"] = accuracy_and_dev
    return dev


def main() -> None:
    ns = notebook_namespace()
    fine_tune, pretrained_dir = ns["fine_tune"], ns["pretrained_dir"]
    dev = also_on_dev(ns)
    rows, t0 = [], time.perf_counter()
    for lr, epochs in SETTINGS:
        for seed in SEEDS:
            for start in ("pre-trained", "random init"):
                dev.clear()
                acc, _ = fine_tune(start, epochs=epochs, lr=lr, seed=seed)
                rows.append(dict(lr=lr, epochs=epochs, seed=seed, start=start, final_accuracy=acc[-1],
                                 accuracy_every_2_epochs=acc, final_dev_accuracy=dev[-1],
                                 dev_accuracy_every_2_epochs=list(dev)))
                print(f"lr {lr:g}, {epochs:2d} epochs, seed {seed}, {start:12}: dev {dev[-1]:.4f}, "
                      f"test {acc[-1]:.4f}", flush=True)
    result = dict(
        what="accuracy of notebook 8's fine_tune on its 400 test sentences (final_accuracy, after the last "
             "epoch) and on its 400 development sentences (final_dev_accuracy), for each setting, seed and "
             "start; settings are chosen on dev, reported on test",
        command="python notebooks/pretrained/fine_tuning_sweep.py",
        notebook=str(NOTEBOOK.relative_to(HERE.parent.parent)),
        pretrained=str(pretrained_dir),
        python=platform.python_version(), numpy=np.__version__,
        seconds=round(time.perf_counter() - t0),
        runs=rows)
    OUT.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
