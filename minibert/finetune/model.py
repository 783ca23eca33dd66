"""BERT for a sentence (or sentence-pair) task: the encoder, then dropout and a linear layer on the pooled
[CLS] vector, forward and backward by hand.

As in the paper (section 4.1) and Hugging Face's ``BertForSequenceClassification``, whose parameter names
it keeps (``bert.*``, ``classifier.weight`` (K, H), ``classifier.bias`` (K,)): K = ``num_labels`` logits,
the loss softmax cross-entropy over the K classes; with ``num_labels=1`` (STS-B) one number, the loss the
mean squared error against the score.  The dropout is the encoder's ``hidden_dropout_prob``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..model.bert import BertModel
from ..model.encoder import backward_linear, linear_weights
from ..checks import check_flag
from ..model.inputs import check_loss_scale, prepare_inputs
from ..model.params import ParamSpec
from ..ops import mse_backward, mse_forward

CLASSIFIER = "classifier"


@dataclass
class ClassifierOutput:
    logits: object          # (B, K); (B, 1) for a regression
    loss: object = None     # a 0-d array, when labels were given


class BertForSequenceClassification(BertModel):
    """``forward(input_ids, token_type_ids, attention_mask, labels=None, train=None)``; ``backward()``
    after a forward with labels fills ``self.params.grads``.  New: training mode; loaded: inference."""

    prefix = "bert."
    head_prefixes = ("cls.", CLASSIFIER + ".")
    training = True

    def __init__(self, config, num_labels: int = 2, **kwargs):
        if isinstance(num_labels, bool) or not isinstance(num_labels, (int, np.integer)) or num_labels < 1:
            raise ValueError(f"num_labels must be an int >= 1 (1: a regression), got {num_labels!r}")
        self.num_labels = int(num_labels)
        super().__init__(config, **kwargs)
        self.classifier = linear_weights(self.params, CLASSIFIER, self.mixed_precision)

    def _param_specs(self):
        H, K = self.config.hidden_size, self.num_labels
        return super()._param_specs() + [ParamSpec(CLASSIFIER + ".weight", (K, H), "normal", True),
                                         ParamSpec(CLASSIFIER + ".bias", (K,), "zeros", False)]

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None, train=None):
        """input_ids, token_type_ids, attention_mask: (B, T) ints; labels: (B,) class numbers in
        [0, num_labels), or (B,) scores for a regression.  Returns ``ClassifierOutput``."""
        train = self._mode(train)
        ids, types, mask = prepare_inputs(self.xp, self.config, input_ids, token_type_ids, attention_mask)
        _, pooled, caches = self._encode(ids, types, mask, train)
        x, caches["dropout"] = self.ops.dropout_forward(pooled, self.config.hidden_dropout_prob, self._uniform, train)
        logits, caches["classifier"] = self.ops.linear_forward(x, self.classifier.weight, self.classifier.bias)
        out = ClassifierOutput(logits)
        if labels is not None:
            labels = self._labels(labels, ids.shape[0])
            if self.num_labels == 1:
                out.loss, caches["loss"] = mse_forward(logits[:, 0], labels)
            else:
                out.loss, caches["loss"] = self.ops.softmax_cross_entropy_forward(logits, labels)
        self._cache = caches if labels is not None else None
        return out

    __call__ = forward

    def _labels(self, labels, B):
        xp, regression = self.xp, self.num_labels == 1
        labels = xp.asarray(labels)
        if labels.shape != (B,):
            raise ValueError(f"labels must be ({B},), one per sequence, got {tuple(labels.shape)}")
        if regression:
            if labels.dtype.kind not in "iuf" or not bool(xp.isfinite(labels).all()):
                raise ValueError("labels of a regression (num_labels=1) must be finite numbers")
            return labels.astype(self.dtype)
        if labels.dtype.kind not in "iu" or bool(((labels < 0) | (labels >= self.num_labels)).any()):
            raise ValueError(f"labels must be class numbers in [0, {self.num_labels}), got {labels.tolist()}")
        return labels.astype(np.int64)

    def backward(self, accumulate=False, loss_scale=1.0):
        """Gradients of ``loss_scale`` times the loss of the last forward with labels."""
        check_loss_scale(loss_scale)
        accumulate = check_flag("accumulate", accumulate)
        if self._cache is None:
            raise RuntimeError("backward() needs a forward() with labels first (each forward allows one backward)")
        caches, self._cache = self._cache, None
        self._begin_backward(accumulate)
        if self.num_labels == 1:
            dlogits = mse_backward(loss_scale, caches["loss"])[:, None]
        else:
            dlogits = self.ops.softmax_cross_entropy_backward(loss_scale, caches["loss"])
        dx = backward_linear(self.ops, dlogits.astype(self.dtype, copy=False), caches["classifier"],
                             self.classifier, self.params.add_grad, half_dx=True)
        dpooled = self.ops.dropout_backward(dx, caches["dropout"])
        B, T = caches["shape"]
        dh = self.xp.zeros((B, T, self.config.hidden_size), dtype=self.dtype)
        self._encode_backward(dh, dpooled, caches)

    def save_pretrained(self, directory, labels=None) -> None:
        """Hugging Face's format, as transformers' ``BertForSequenceClassification`` reads it: config.json
        names that class and the labels (``labels``: their names in the order of the logits; the default
        LABEL_0 ...), and a regression's ``problem_type``."""
        if labels is not None and (not isinstance(labels, (list, tuple)) or not all(isinstance(n, str) for n in labels)):
            raise TypeError(f"labels must be a list of the label names, in the order of the logits, got {labels!r}")
        names = list(labels) if labels is not None else [f"LABEL_{k}" for k in range(self.num_labels)]
        if len(names) != self.num_labels:       # before anything is written
            raise ValueError(f"labels names {len(names)} labels for a model of {self.num_labels} outputs")
        super().save_pretrained(directory)
        path = Path(directory) / "config.json"
        config = json.loads(path.read_text(encoding="utf-8"))
        config.update(architectures=["BertForSequenceClassification"],
                      id2label={str(k): n for k, n in enumerate(names)}, label2id={n: k for k, n in enumerate(names)})
        if self.num_labels == 1:
            config["problem_type"] = "regression"
        path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
