"""``minibert finetune``: a pre-trained BERT fine-tuned on a GLUE task, with BERT's recipe.

Writes into ``--out``: ``metrics.jsonl`` (each step's loss, each run's development metrics), ``finetune.png``,
``results.json`` (the settings, the final development metrics, what of the model was new),
``predictions/`` (the test files' predictions in GLUE's submission format, where the task folder has
test files) and ``model/`` (the fine-tuned model with its vocab.txt, in Hugging Face's format).
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

from . import glue, resume, search
from ..paths import default_data_dir
from ..train.errors import DISK_FULL, TrainingError
from ..train.run_folder import lock_run_folder
from ..train.signals import StopSignal
from .custom import custom_task
from .download import download
from .features import encode
from .load import load
from .plot import plot_finetune
from .resume import Progress
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
    p.add_argument("--random-init", action="store_true",
                   help="--model's config and vocabulary with every weight drawn anew: the baseline that "
                        "pre-training is measured against")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="the task's folder (train.tsv, dev.tsv, ...), or GLUE's download holding it (SST-2/, ...); "
                        "default: minibert's data folder, the task downloaded there once and checked")
    p.add_argument("--out", required=True, type=Path, help="the folder to write the results into")
    p.add_argument("--lr", type=float, default=d.lr, help="peak learning rate (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="(default: %(default)s)")
    p.add_argument("--epochs", type=int, default=d.epochs, help="(default: %(default)s)")
    p.add_argument("--max-seq-length", type=int, default=None,
                   help="the longest input in tokens, longer examples cut (default: 128, or the model's length "
                        "where it is shorter)")
    p.add_argument("--seed", type=int, default=d.seed, help="fixes the new weights, the order and dropout")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="cuda: on a GPU, with CuPy")
    p.add_argument("--mixed-precision", action="store_true",
                   help="float16 products with float32 weights and a loss scale, as pretrain's")
    p.add_argument("--search", nargs="?", const="", default=None, metavar="SPEC",
                   help="BERT's grid (batch 16/32 x lr 5e-5/3e-5/2e-5 x epochs 2/3/4), or a part of it: "
                        "\"lr=5e-5,3e-5;epochs=3\"; the best setting by the dev metric is kept")
    p.add_argument("--seeds", type=int, default=1, help="runs per setting, seeds --seed, --seed+1, ... "
                                                        "(default: %(default)s)")
    p.add_argument("--save-every", type=int, default=500,
                   help="a checkpoint every so many steps, and on Ctrl-C (default: %(default)s)")
    p.add_argument("--resume", action="store_true",
                   help="continue the job in --out where it stopped (the same command otherwise)")
    p.add_argument("--stop-at", type=int, default=None, metavar="STEP",
                   help="stop after this many steps in all (the search's runs together), with a checkpoint")
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


CUSTOM_ONLY = ("text_a", "text_b", "label", "labels", "regression", "id")     # what a GLUE task fixes itself


def command(ns) -> int:
    if ns.task.lower() != "custom" and (given := [n for n in CUSTOM_ONLY if getattr(ns, n) not in (None, False)]):
        raise ValueError(f"--{given[0].replace('_', '-')} is for --task custom: {ns.task}'s columns and labels are "
                         f"GLUE's; leave it out, or use --task custom")
    t = custom_task(ns.data_dir, ns.text_a, ns.text_b, ns.label, ns.labels, ns.regression, ns.id) \
        if ns.task.lower() == "custom" else glue.task(ns.task)
    for name in ("batch_size", "epochs", "seeds", "save_every"):
        if getattr(ns, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be 1 or more, not {getattr(ns, name)}")
    if not (0 < ns.lr < 1):
        raise ValueError(f"--lr must be a number between 0 and 1, not {ns.lr}")
    if ns.stop_at is not None and ns.stop_at < 1:
        raise ValueError(f"--stop-at must be 1 or more, not {ns.stop_at}")
    settings = search.grid(ns.search, Recipe(lr=ns.lr, batch_size=ns.batch_size, epochs=ns.epochs, seed=ns.seed))
    folder = task_folder(t, ns.data_dir)
    train_set = glue.read_split(t, folder / f"train{t.suffix}")
    devs = {name: glue.read_split(t, folder / f"{name}{t.suffix}") for name in t.dev_files}
    tests = {name: glue.read_split(t, folder / f"{name}{t.suffix}", test=True) for name in t.test_files
             if (folder / f"{name}{t.suffix}").is_file()}
    K = 1 if t.labels is None else len(t.labels)
    first_model, tokenizer, note = load(ns.model, K, seed=ns.seed, device=ns.device, random_init=ns.random_init,
                                        mixed_precision=ns.mixed_precision, kernels=KERNELS)
    # at least one token of each text besides [CLS] and [SEP] (and [SEP]): BERT's truncation keeps no fewer
    positions, least = first_model.config.max_position_embeddings, 3 if train_set.text_b is None else 5
    if ns.max_seq_length is None:
        ns.max_seq_length = min(128, positions)
    if not least <= ns.max_seq_length <= positions:
        raise ValueError(f"--max-seq-length {ns.max_seq_length}: the model reads {positions} tokens at most, and "
                         f"{t.name}'s examples need {least} at least: [CLS], " + ("a token of the text and [SEP]"
                         if least == 3 else "a token of each text and a [SEP] after each"))
    features = encode(tokenizer, train_set, ns.max_seq_length)
    cut = (f" ({features.truncated:,} longer than --max-seq-length {ns.max_seq_length}: cut as BERT cuts them)"
           if features.truncated else "")
    print(f"minibert finetune: {t.name}, {len(features):,} training examples{cut}; {note}", flush=True)
    job = Job(ns, t, tokenizer, features,
              {name: encode(tokenizer, dev, ns.max_seq_length) for name, dev in devs.items()},
              {name: dev.labels for name, dev in devs.items()}, first_model, settings)
    ns.out.mkdir(parents=True, exist_ok=True)
    lock = lock_run_folder(ns.out)
    try:
        progress = Progress(ns.out, job.identity(), ns.resume)
        try:
            table, best = job.run(progress)
        except Stopped as stop:
            print(f"minibert finetune: {stop}; continue with the same command and --resume", file=sys.stderr)
            return 0
        model = job.kept.get(best["index"])
        if model is None:                  # chosen before the job was resumed: its saved weights
            model = job.restored(progress.kept_weights(best["index"]))
        _write_outputs(ns, t, job, tokenizer, model, tests, note, table, best)
        progress.close()
    except OSError as exc:
        if exc.errno not in DISK_FULL:
            raise
        raise TrainingError(f"could not write {exc.filename or ns.out}: the disk is full ({exc.strerror}); free some "
                            f"space, then run the same command with --resume: the job goes on from its last "
                            f"checkpoint") from None
    finally:
        lock.close()
    return 0


class Stopped(Exception):
    """A signal or --stop-at ended the job after a checkpoint: its message says where."""


class Job:
    """The runs of one ``minibert finetune``: the data encoded once, a model for each run (the first loaded
    one for the first), the checkpoints, the models the search may choose."""

    def __init__(self, ns, t, tokenizer, features, dev_features, dev_labels, first_model, settings):
        self.ns, self.t, self.pad_id = ns, t, tokenizer.pad_id
        self.num_labels = first_model.num_labels
        self.features, self.dev_features, self.dev_labels = features, dev_features, dev_labels
        self.fresh = {ns.seed: first_model}          # the first run's model: not loaded a second time
        self.settings, self.seeds = settings, [ns.seed + k for k in range(ns.seeds)]
        self.runs = [dataclasses.replace(s, seed=seed) for s in settings for seed in self.seeds]
        self.start_digest = resume.fingerprint(first_model.params.data)
        self.kept = {}                               # run number -> its model, while the search may choose it

    def identity(self) -> dict:
        """What a checkpoint of this job must match to be resumed by it."""
        f = self.features
        data = resume.fingerprint(f.input_ids, f.token_type_ids, f.labels,
                                  *[p for d in self.dev_features.values() for p in (d.input_ids, d.token_type_ids)],
                                  *self.dev_labels.values())
        return {"version": resume.VERSION, "task": self.t.name, "data": data, "model": self.start_digest,
                "runs": [r.__dict__ for r in self.runs], "max_seq_length": self.ns.max_seq_length,
                "mixed_precision": self.ns.mixed_precision}

    def model(self, seed: int):
        model = self.fresh.pop(seed, None)
        if model is None:
            ns = self.ns
            model = load(ns.model, self.num_labels, seed=seed, device=ns.device, mixed_precision=ns.mixed_precision,
                         kernels=KERNELS, random_init=ns.random_init)[0]
        return model

    def restored(self, params):
        model = self.model(self.ns.seed)
        model.params.data[...] = model.xp.asarray(params)
        return model

    def run(self, progress):
        """The search (one run without ``--search``), from where ``progress`` stopped; (table, best)."""
        first = self.t.ranked_by
        with progress.start_log(self.ns.out / "metrics.jsonl") as log, StopSignal() as stop:
            def one_run(recipe):
                model = self.model(recipe.seed)
                index = len(progress.done)
                tag = {"lr": recipe.lr, "batch_size": recipe.batch_size, "epochs": recipe.epochs, "seed": recipe.seed}
                _train_with_progress(model, self, recipe, log, tag, progress, stop, index)
                results = {name: scores(self.t, predict(model, f, self.pad_id), self.dev_labels[name])
                           for name, f in self.dev_features.items()}
                log.write("".join(json.dumps({"split": n, **tag, **r}) + "\n" for n, r in results.items()))
                return results, model

            def on_run(index, results, model, keep):
                progress.finished(results, model, keep, log)
                self.kept = {i: m for i, m in {**self.kept, index: model}.items() if i in keep}
            return search.run(self.settings, self.seeds, one_run, lambda results: results[first[0]][first[1]],
                              done=progress.done, on_run=on_run)

    def steps_before(self, index: int) -> int:
        """The optimiser steps of the job's runs before run ``index``."""
        return sum(r.steps(len(self.features))[0] for r in self.runs[:index])


def _train_with_progress(model, job, recipe, log, tag, progress, stop, index):
    from tqdm import tqdm

    total, _ = recipe.steps(len(job.features))
    ns = job.ns
    desc = f"lr {recipe.lr:g}, batch {recipe.batch_size}, seed {recipe.seed}"
    before = job.steps_before(index)           # the job's steps in the runs before this one (for --stop-at)
    with tqdm(total=total, desc=desc, unit="step", file=sys.stderr, disable=None) as bar:
        def start(opt, scaler):
            step = progress.restore(model, opt, scaler)
            bar.update(step)
            return step

        def on_step(step, loss, opt, scaler):
            log.write(json.dumps({"step": step, **tag, "loss": loss}) + "\n")
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}")
            why = stop.received or ("--stop-at" if ns.stop_at is not None and before + step >= ns.stop_at else None)
            if why or step % ns.save_every == 0:
                saved = progress.save_step(step, model, opt, scaler, log)
                if why:
                    raise Stopped(f"stopped ({why}) at step {step} of run {index + 1} of {len(job.runs)} ({desc}): "
                                  f"saved {saved}")
        return train(model, job.features, job.pad_id, recipe, on_step, start=start)


def _write_outputs(ns, t, job, tokenizer, model, tests, note, table, best) -> None:
    """The test files' predictions (and their metrics, where a custom task's test file has labels), the
    model, results.json, the plot; the table and the metrics printed."""
    first = t.ranked_by
    results, scored = best["results"], {}
    plot_finetune(ns.out / "metrics.jsonl", first, ns.out / "finetune.png")
    for name, test in tests.items():
        logits = predict(model, encode(tokenizer, test, ns.max_seq_length), tokenizer.pad_id)
        _write_predictions(t, name, logits, test.ids or list(range(len(test.text_a))), ns.out / "predictions")
        if test.labels is not None:
            scored[name] = scores(t, logits, test.labels)
    model.save_pretrained(ns.out / "model", labels=t.labels or ["score"])
    tokenizer.write_vocab_file(ns.out / "model" / "vocab.txt")
    searched = len(table) > 1 or ns.seeds > 1
    (ns.out / "results.json").write_text(json.dumps({
        "task": t.name, "model": str(ns.model), "new_weights": note, "recipe": best["recipe"].__dict__,
        "max_seq_length": ns.max_seq_length, "truncated_examples": job.features.truncated, "dev": results,
        "test": scored or None, "search": table if searched else None}, indent=1) + "\n", encoding="utf-8")
    if searched:
        print(search.render(table, f"{first[0]} {first[1]}"))
        print(f"best: batch {best['recipe'].batch_size}, lr {best['recipe'].lr:g}, {best['recipe'].epochs} epochs "
              f"(seed {best['recipe'].seed}, kept in {ns.out / 'model'})")
    for name, r in {**results, **scored}.items():
        print(f"{name}: " + ", ".join(f"{k} {v:.4f}" for k, v in r.items()))


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
