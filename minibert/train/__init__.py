"""Pre-training BERT with masked language modelling and next sentence prediction.

``pretrain(TrainArgs(...))`` is the whole job, used by ``minibert pretrain``,
``make demo`` and the pre-training notebook alike:

1. set-up: check every argument, load the corpus, load or train the
   WordPiece vocabulary, split off held-out documents, cut NSP instances;
2. the model and AdamW (or both restored from the last checkpoint);
3. the loop: for each step, a freshly masked batch (or several, with
   gradient accumulation), forward, backward, clip, AdamW with the
   warmup-then-decay learning rate; log, evaluate on held-out data, save;
4. the end: a last checkpoint, the model in Hugging Face's format with its
   ``vocab.txt``, ``metrics.jsonl`` and a loss-curve picture.

On a GPU a step never waits for it: the step's losses and counts, the gradient
norm, the loss scaler's decision and whether the run has diverged all stay on
the device, and the host reads them only on the steps that log, evaluate or
save (``health.Health`` then names the step where a run went wrong).  The host
checks each batch before copying it, and finds the labelled positions there.

Reproducible: one seed fixes the initial weights, the instances, the batch
order, every mask and every dropout mask (re-seeded from (seed, step) at each
step), so a run resumed from a checkpoint continues exactly as if it had
never stopped.

The package, by job: ``args`` (the settings and their checks), ``data`` (the
corpus, the vocabulary, the stream of masked batches), ``loop`` (``pretrain``
and ``train_step``), ``health`` (has the run diverged?), ``metrics`` (what is
measured, ``metrics.jsonl``),
``checkpoints`` (saving and restoring a run), ``dist`` and ``nccl`` (several
processes training one model), ``run_folder`` (the run's
folder: lock, fresh start, history, export), ``run_facts`` (what ``run.json``
records of the data and the model), ``doctor`` (``minibert doctor``: is a run
healthy?), ``signals``, ``plot`` and ``errors``.  ``fill_mask`` lives in ``minibert.model.inference``.
"""
from ..model.inference import fill_mask
from .args import RunResult, TrainArgs, check_args, load_model_config
from .checkpoints import check_complete, restore_run, run_identity, save_run
from .data import BatchStream, Prefetch, load_run_corpus, prepare_data, split_documents
from .errors import TrainingError
from .loop import pretrain, train_step
from .metrics import MetricsLog, batch_stats, evaluate, token_counts, unigram_baseline, unknown_share
from .plot import plot_history
from .run_folder import (METRICS_NAME, OUTPUT_NAMES, PLOT_NAME, RUN_NAME, VOCAB_NAME, check_writable,
                         export_model, lock_run_folder, start_fresh)
from .signals import StopSignal

__all__ = ["BatchStream", "METRICS_NAME", "MetricsLog", "OUTPUT_NAMES", "PLOT_NAME", "Prefetch", "RUN_NAME",
           "RunResult", "StopSignal", "TrainArgs", "TrainingError", "VOCAB_NAME", "batch_stats",
           "check_args", "check_complete", "check_writable", "evaluate", "export_model", "fill_mask",
           "load_model_config", "load_run_corpus", "lock_run_folder", "plot_history", "prepare_data",
           "pretrain", "restore_run", "run_identity", "save_run", "split_documents", "start_fresh",
           "token_counts", "train_step", "unigram_baseline", "unknown_share"]
