"""``minibert finetune``: a pre-trained BERT fine-tuned on a GLUE task, with BERT's recipe.

Writes into ``--out``: ``metrics.jsonl`` (each step's loss, each run's development metrics), ``finetune.png``,
``results.json`` (the settings, the final development metrics, what of the model was new),
``predictions/`` (the test files' predictions in GLUE's submission format, where the task folder has
test files) and ``model/`` (the fine-tuned model with its vocab.txt, in Hugging Face's format).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from . import glue, search
from ..paths import default_data_dir
from .custom import custom_task
from .download import download
from .features import encode
from .load import load
from .plot import plot_finetune
from .train import Recipe, predict, scores, train

HELP = ("Fine-tune a pre-trained BERT on a GLUE task with BERT's recipe. Writes metrics.jsonl, results.json, "
        "a plot (finetune.png), the test files' predictions in GLUE's submission format (predictions/) and the "
        "model (model/) into --out.")
EXAMPLES = """\
examples:
  minibert finetune --task sst2 --model runs/mini --data-dir ~/glue_data/SST-2 --out runs/mini-sst2
  minibert finetune --task mrpc --model ~/models/bert-base-uncased --data-dir ~/glue_data --lr 3e-5 --epochs 3
"""
KERNELS = "fast"          # minibert's fast kernels, as pretrain runs: the reference ops' arithmetic, faster


def add_command(sub) -> None:
    import argparse

    d = Recipe()
    p = sub.add_parser("finetune", help="fine-tune a pre-trained BERT on a GLUE task", description=HELP,
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", required=True, help=f"one of {', '.join(glue.TASKS)}, or custom (below)")
    p.add_argument("--model", required=True, type=Path,
                   help="a minibert run folder, or a BERT model folder (config.json, model.safetensors, vocab.txt)")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="the task's folder (train.tsv, dev.tsv, ...), or GLUE's download holding it (SST-2/, ...); "
                        "default: minibert's data folder, the task downloaded there once and checked")
    p.add_argument("--out", required=True, type=Path, help="the folder to write the results into")
    p.add_argument("--lr", type=float, default=d.lr, help="peak learning rate (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="(default: %(default)s)")
    p.add_argument("--epochs", type=int, default=d.epochs, help="(default: %(default)s)")
    p.add_argument("--max-seq-length", type=int, default=128, help="(default: %(default)s)")
    p.add_argument("--seed", type=int, default=d.seed, help="fixes the new weights, the order and dropout")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="cuda: on a GPU, with CuPy")
    p.add_argument("--mixed-precision", action="store_true",
                   help="float16 products with float32 weights and a loss scale, as pretrain's")
    p.add_argument("--search", nargs="?", const="", default=None, metavar="SPEC",
                   help="BERT's grid (batch 16/32 x lr 5e-5/3e-5/2e-5 x epochs 2/3/4), or a part of it: "
                        "\"lr=5e-5,3e-5;epochs=3\"; the best setting by the dev metric is kept")
    p.add_argument("--seeds", type=int, default=1, help="runs per setting, seeds --seed, --seed+1, ... "
                                                        "(default: %(default)s)")
    c = p.add_argument_group("--task custom: a folder of train, dev (and test) files, .tsv or .csv, with a header")
    c.add_argument("--text-a", help="the text's column")
    c.add_argument("--text-b", help="the second text's column, for a pair task")
    c.add_argument("--label", help="the label's column")
    c.add_argument("--labels", help="the class names in order, comma-separated (default: the training file's)")
    c.add_argument("--regression", action="store_true", help="the label is a number to predict")
    c.add_argument("--id", help="the test file's id column (default: its line numbers)")


def task_folder(t: glue.Task, data_dir: Path | None) -> Path:
    if data_dir is None:
        glue_dir = default_data_dir() / "glue"
        found = glue_dir / t.folder
        return found if (found / "train.tsv").is_file() else download(t.name, glue_dir)
    if (data_dir / f"train{t.suffix}").is_file() or t.name == "custom":
        return data_dir
    inside = data_dir / t.folder
    if (inside / "train.tsv").is_file():
        return inside
    raise FileNotFoundError(f"--data-dir {data_dir}: no train.tsv there or in {inside.name}/; put {t.name}'s "
                            f"files ({', '.join(glue.files(t))}) in it")


def command(ns) -> int:
    t = custom_task(ns.data_dir, ns.text_a, ns.text_b, ns.label, ns.labels, ns.regression, ns.id) \
        if ns.task.lower() == "custom" else glue.task(ns.task)
    for name in ("batch_size", "epochs", "max_seq_length", "seeds"):
        if getattr(ns, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be 1 or more, not {getattr(ns, name)}")
    if not (0 < ns.lr < 1):
        raise ValueError(f"--lr must be a number between 0 and 1, not {ns.lr}")
    settings = search.grid(ns.search, Recipe(lr=ns.lr, batch_size=ns.batch_size, epochs=ns.epochs, seed=ns.seed))
    folder = task_folder(t, ns.data_dir)
    train_set = glue.read_split(t, folder / f"train{t.suffix}")
    devs = {name: glue.read_split(t, folder / f"{name}{t.suffix}") for name in t.dev_files}
    tests = {name: glue.read_split(t, folder / f"{name}{t.suffix}", test=True) for name in t.test_files
             if (folder / f"{name}{t.suffix}").is_file()}
    K = 1 if t.labels is None else len(t.labels)
    first_model, tokenizer, note = load(ns.model, K, seed=ns.seed, device=ns.device,
                                        mixed_precision=ns.mixed_precision, kernels=KERNELS)
    fresh = {ns.seed: first_model}          # the first run's model is this one: not loaded a second time
    print(f"minibert finetune: {t.name}, {len(train_set.text_a)} training examples; {note}", flush=True)
    features = encode(tokenizer, train_set, ns.max_seq_length)
    dev_features = {name: encode(tokenizer, dev, ns.max_seq_length) for name, dev in devs.items()}
    ns.out.mkdir(parents=True, exist_ok=True)
    with open(ns.out / "metrics.jsonl", "w", encoding="utf-8") as log:
        def one_run(recipe):
            model = fresh.pop(recipe.seed, None)
            if model is None:
                model = load(ns.model, K, seed=recipe.seed, device=ns.device, mixed_precision=ns.mixed_precision,
                             kernels=KERNELS)[0]
            tag = {"lr": recipe.lr, "batch_size": recipe.batch_size, "epochs": recipe.epochs, "seed": recipe.seed}
            _train_with_progress(model, features, tokenizer.pad_id, recipe, log, tag)
            results = {name: scores(t, predict(model, f, tokenizer.pad_id), devs[name].labels)
                       for name, f in dev_features.items()}
            log.write("".join(json.dumps({"split": n, **tag, **r}) + "\n" for n, r in results.items()))
            return results, model
        first = (t.dev_files[0], t.metrics[0])
        table, best = search.run(settings, [ns.seed + k for k in range(ns.seeds)], one_run,
                                 lambda results: results[first[0]][first[1]])
    model, results = best["model"], best["results"]
    plot_finetune(ns.out / "metrics.jsonl", first, ns.out / "finetune.png")
    for name, test in tests.items():
        _write_predictions(t, name, predict(model, encode(tokenizer, test, ns.max_seq_length), tokenizer.pad_id),
                           test.ids or list(range(len(test.text_a))), ns.out / "predictions")
    model.save_pretrained(ns.out / "model", labels=t.labels or ["score"])
    tokenizer.write_vocab_file(ns.out / "model" / "vocab.txt")
    (ns.out / "results.json").write_text(json.dumps({
        "task": t.name, "model": str(ns.model), "new_weights": note, "recipe": best["recipe"].__dict__,
        "max_seq_length": ns.max_seq_length, "truncated_examples": features.truncated, "dev": results,
        "search": table if len(table) > 1 or ns.seeds > 1 else None}, indent=1) + "\n", encoding="utf-8")
    if len(table) > 1 or ns.seeds > 1:
        print(search.render(table, f"{first[0]} {first[1]}"))
        print(f"best: batch {best['recipe'].batch_size}, lr {best['recipe'].lr:g}, {best['recipe'].epochs} epochs "
              f"(seed {best['recipe'].seed}, kept in {ns.out / 'model'})")
    for name, r in results.items():
        print(f"{name}: " + ", ".join(f"{k} {v:.4f}" for k, v in r.items()))
    return 0


def _train_with_progress(model, features, pad_id, recipe, log, tag):
    from tqdm import tqdm

    total, _ = recipe.steps(len(features))
    desc = f"lr {recipe.lr:g}, batch {recipe.batch_size}, seed {recipe.seed}"
    with tqdm(total=total, desc=desc, unit="step", file=sys.stderr, disable=None) as bar:
        def on_step(step, loss):
            log.write(json.dumps({"step": step, **tag, "loss": loss}) + "\n")
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}")
        return train(model, features, pad_id, recipe, on_step)


def _write_predictions(t: glue.Task, name: str, logits: np.ndarray, ids: list, folder: Path) -> None:
    """GLUE's submission format: ``index<TAB>prediction`` per line, a label's name (a score for STS-B)."""
    folder.mkdir(parents=True, exist_ok=True)
    file = t.submission[t.test_files.index(name)] + ".tsv"
    if t.labels is None:
        low, high = t.score_range or (-np.inf, np.inf)
        shown = [f"{min(max(float(v), low), high):.3f}" for v in logits[:, 0]]
    else:
        shown = [t.labels[k] for k in logits.argmax(axis=1)]
    (folder / file).write_text("index\tprediction\n" + "".join(f"{i}\t{p}\n" for i, p in zip(ids, shown)),
                               encoding="utf-8")
