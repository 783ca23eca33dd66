"""BERT's fine-tuning recipe: AdamW, warmup then linear decay, clipping, a few epochs (Devlin et al. 2019,
section 4.1 and appendix A.3; google-research/bert's ``run_classifier.py``).

The defaults are the paper's and ``run_classifier.py``'s: batch 32, learning rate 2e-5 (the paper searches
5e-5, 3e-5 and 2e-5), 3 epochs (it searches 2, 3 and 4), warmup over the first 10% of the steps, weight
decay 0.01 (not on biases and LayerNorm), the gradients' global norm clipped to 1.0, dropout 0.1.
``epoch_order`` fixes each epoch's batches by the seed and the epoch, and ``seed_dropout((seed, step))``
each step's masks, so one seed fixes the whole run.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..optim import AdamW, LossScaler, linear_warmup_decay, scaled_step, unscale_and_clip
from ..backend import to_numpy
from .features import Features, batch, batches_of, epoch_order
from .metrics import METRICS


@dataclass(frozen=True)
class Recipe:
    lr: float = 2e-5
    batch_size: int = 32
    epochs: int = 3
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    seed: int = 0

    def steps(self, n_examples: int) -> tuple[int, int]:
        """(total optimiser steps, warmup steps) for a training split of ``n_examples``."""
        total = self.epochs * math.ceil(n_examples / self.batch_size)
        return total, int(total * self.warmup_proportion)


def train(model, features: Features, pad_id: int, recipe: Recipe = Recipe(), on_step=None, start=None) -> list[float]:
    """Fine-tune ``model`` on ``features``; returns the loss of every step taken.  ``on_step(step, loss, opt,
    scaler)`` after each (the progress bar, the metrics log, a checkpoint).  ``start(opt, scaler)``, where
    given, loads a checkpoint into the model, AdamW and the loss scaler and returns its step: the run goes on
    after it with the batches and dropout masks it would have had without the stop.  A model in mixed
    precision is trained with a loss scale (``optim.LossScaler``), a step whose gradients overflowed not
    taken, as ``pretrain`` does."""
    opt = AdamW(model.params, lr=recipe.lr, weight_decay=recipe.weight_decay)
    scaler = LossScaler() if model.mixed_precision else None
    total, warmup = recipe.steps(len(features))
    first = start(opt, scaler) if start is not None else 0
    losses, step = [], 0
    model.train()
    for epoch in range(recipe.epochs):
        for rows in batches_of(epoch_order(len(features), recipe.seed, epoch), recipe.batch_size):
            if step < first:            # taken before the checkpoint: the order and the masks skip it
                step += 1
                continue
            model.seed_dropout((recipe.seed, step))
            out = model.forward(**batch(features, rows, pad_id), train=True)
            loss_scale = scaler.scale if scaler is not None else 1.0
            model.backward(loss_scale=loss_scale)
            finite = model.xp.isfinite(unscale_and_clip(model.params, recipe.max_grad_norm, loss_scale))
            scaled_step(opt, scaler, finite, lr=recipe.lr * linear_warmup_decay(step, total, warmup))
            losses.append(float(out.loss))
            step += 1
            if on_step is not None:
                on_step(step, losses[-1], opt, scaler)
    return losses


def predict(model, features: Features, pad_id: int, batch_size: int = 64) -> np.ndarray:
    """The model's logits (N, K) on ``features``, in their order, without dropout."""
    rows = np.arange(len(features))
    out = []
    for part in batches_of(rows, batch_size):
        inputs = {k: v for k, v in batch(features, part, pad_id).items() if k != "labels"}
        out.append(to_numpy(model.forward(**inputs, train=False).logits).astype(np.float64))
    model.release()
    return np.concatenate(out)


def scores(task, logits: np.ndarray, labels: np.ndarray) -> dict:
    """The task's metrics of ``logits`` against ``labels``: the argmax for a classification, the one
    output for a regression."""
    pred = logits[:, 0] if task.labels is None else logits.argmax(axis=1)
    return {name: METRICS[name](pred, labels) for name in task.metrics}
