"""A training step on the GPU replayed as one CUDA graph (``accel/cuda/graph.py``).

At the lab sizes a step is its launches: a few hundred, each some microseconds of the host's
time.  ``GraphStep`` runs the step's work (forward with both losses, backward, the batch's
sums, unscaling and clipping, AdamW with the loss scaler's decision) one by one for ``WARMUP``
steps, then captures it once and from then on replays it: one launch a step.

What changes from one step to the next is written by the host into device arrays before each
step, since a graph replays its launches with the arguments they were captured with:

* the batch: ids, segments, mask, MLM and NSP labels, into arrays of a fixed shape.  The MLM
  head runs at the labelled positions, whose number varies; here they are padded to a fixed
  count (``max_predictions``) with targets -100, which the loss ignores;
* the learning rate (AdamW's kernels read it there, ``loss_scaling.py``), and dropout's base
  key (``CounterUniform.reseed``);
* the number of labelled positions, by which the mean MLM loss becomes the batch's sum.

The loss scale, the step count and the good steps live on the device already and are updated in
place.  Products go through ``cublas.py``, also in the steps before the capture, so that every
step computes what a replay computes.  One process.
A batch shorter than the step's sequence length is padded to it (``[PAD]``, masked out).
``pretrain --cuda-graph`` runs its steps so (``for_run``); a capture the GPU refuses is said
once, and the steps go on one launch at a time.
"""
from __future__ import annotations

import math

import numpy as np

from ..accel.cuda import bookkeeping, graph
from ..model.inputs import IGNORE_INDEX, check_labels, prepare_inputs
from ..optim import scaled_step, unscale_and_clip
from .metrics import add

WARMUP = 2      # steps run one by one before the capture: kernels compiled, the memory pool filled


class GraphStep:
    """``step(batch, lr, dropout_seed)``: one training step of ``model`` on a host batch of ``shape``
    (batch, seq_len) with at most ``max_predictions`` MLM labels, or with ``accum`` n on a list of n
    such batches; returns a dict of device arrays (loss, the step's sums, the gradients' norm,
    whether it is finite), rewritten by each step."""

    def __init__(self, model, opt, scaler, shape, max_predictions, max_grad_norm=None, nsp=True, log=None,
                 accum=1):
        B, T = shape
        self.model, self.opt, self.scaler, self.max_grad_norm = model, opt, scaler, max_grad_norm
        self.shape, self.P, self.nsp = (B, T), int(max_predictions), bool(nsp)
        if not 0 < self.P <= B * T:
            raise ValueError(f"max_predictions must be in [1, {B * T}] (batch x seq_len), got {max_predictions}")
        if not (isinstance(accum, int) and accum >= 1):
            raise ValueError(f"accum must be a positive integer (micro-batches a step), got {accum!r}")
        self.micro = [self._arrays() for _ in range(accum)]     # each micro-batch's arrays
        self.lr = model.xp.zeros((), dtype=np.float64)
        self.steps, self.graph, self.log = 0, None, log or print

    def _arrays(self) -> dict:
        """A micro-batch's device arrays: the batch (no ``nsp`` without NSP labels), the padded MLM
        positions and targets, and the number of labelled positions."""
        xp, (B, T), i64 = self.model.xp, self.shape, np.int64
        a = {name: xp.zeros((B, T), dtype=i64) for name in ("ids", "types", "mask", "mlm")}
        a.update(nsp=xp.zeros(B, dtype=i64) if self.nsp else None, positions=xp.zeros(self.P, dtype=i64),
                 targets=xp.full(self.P, IGNORE_INDEX, dtype=i64), n_mlm=xp.zeros((), dtype=np.float64))
        return a

    @classmethod
    def for_run(cls, args, model, opt, scaler, comm, log):
        """``pretrain``'s step with ``--cuda-graph`` (None without): batch x seq-len, at most
        ceil(mlm_probability x seq_len) labels a sequence unless --max-predictions says."""
        if not args.cuda_graph:
            return None
        if comm.size > 1:
            raise ValueError("--cuda-graph runs in one process: data parallelism is not captured")
        per_seq = args.max_predictions or math.ceil(args.seq_len * args.mlm_probability)
        return cls(model, opt, scaler, (args.batch_size, args.seq_len), min(args.batch_size * per_seq,
                   args.batch_size * args.seq_len), args.max_grad_norm or None, nsp=not args.no_nsp, log=log,
                   accum=args.accum)

    def _load(self, batch, into):
        """The host's batch checked there and written into the micro-batch arrays ``into``, with its
        MLM count; returns the host counts (masked tokens, pairs, tokens)."""
        c = self.model.config
        ids, types, mask = prepare_inputs(np, c, batch["input_ids"], batch.get("token_type_ids"),
                                          batch.get("attention_mask"))
        if ids.shape[0] != self.shape[0] or ids.shape[1] > self.shape[1]:
            raise ValueError(f"this step was built for batches of shape {self.shape}, got {ids.shape}")
        labels = check_labels(np, c, batch["mlm_labels"], batch.get("nsp_labels"), ids.shape)
        if (labels["nsp"] is None) == self.nsp:
            raise ValueError(f"this step was built for batches {'with' if self.nsp else 'without'} nsp_labels")
        pad = ((0, 0), (0, self.shape[1] - ids.shape[1]))      # to the step's length: [PAD], masked out
        ids, types, mask, mlm = (np.pad(a, pad, constant_values=v) for a, v in (
            (ids, c.pad_token_id), (types, 0), (mask, 0), (labels["mlm"], IGNORE_INDEX)))
        flat = mlm.reshape(-1)
        where = np.flatnonzero(flat != IGNORE_INDEX)          # (flat indices of the padded rows)
        if len(where) > self.P:
            raise ValueError(f"the batch has {len(where)} MLM labels, more than max_predictions={self.P}")
        # padded with positions that have no label, target -100: distinct, as the head's backward
        # needs (it assigns each row's gradient back to its position); the loss ignores them
        positions = np.concatenate([where, np.flatnonzero(flat == IGNORE_INDEX)[:self.P - len(where)]])
        targets = np.full(self.P, IGNORE_INDEX, dtype=np.int64)
        targets[:len(where)] = flat[where]
        for name, src in (("ids", ids), ("types", types), ("mask", mask), ("mlm", mlm), ("nsp", labels["nsp"]),
                          ("positions", positions), ("targets", targets), ("n_mlm", np.float64(len(where)))):
            if into[name] is not None:
                into[name][...] = self.model.xp.asarray(src)
        return len(where), len(ids) if self.nsp else 0, int(mask.sum())

    def _work(self):
        """The step's device work, all of it in the graph: no read, no host copy, fixed shapes."""
        model, scaler, n = self.model, self.scaler, len(self.micro)
        loss_scale = scaler.scale if scaler is not None else 1.0
        # the scale this step used, kept apart from the scaler's update in place (a copy on the device)
        scale_used = model.xp.asarray(loss_scale, dtype=np.float64).copy() if scaler is not None else None
        total = {}
        for k, a in enumerate(self.micro):          # the micro-batches' gradients add up
            labels = dict(mlm=a["mlm"], nsp=a["nsp"], positions=a["positions"], targets=a["targets"])
            out = model._forward(a["ids"], a["types"], a["mask"], labels, True)
            model.backward(accumulate=k > 0, loss_scale=loss_scale)
            _, nsp_loss, mlm_hits, nsp_hits = bookkeeping.batch_sums(out)
            mlm_loss = out.mlm_loss.astype(np.float64) * a["n_mlm"]     # the labelled positions' sum
            total = add(total, dict(loss=out.loss / n if n > 1 else out.loss, mlm_loss=mlm_loss,
                                    nsp_loss=nsp_loss, mlm_correct=mlm_hits, nsp_correct=nsp_hits))
        # the mean over the micro-batches, the loss scale taken out, clipped
        grad_norm = unscale_and_clip(model.params, self.max_grad_norm, loss_scale, n)
        finite = model.xp.isfinite(grad_norm)
        scaled_step(self.opt, scaler, finite, self.lr)
        result = dict(total, grad_norm=grad_norm, finite=finite)
        return result if scale_used is None else dict(result, loss_scale=scale_used)

    @staticmethod
    def sums(result) -> dict:
        """A step's result as ``metrics.batch_stats`` gives a batch's sums (no NSP sums without pairs)."""
        n_nsp = result["n_nsp"]
        return dict(mlm_loss=result["mlm_loss"], nsp_loss=result["nsp_loss"] if n_nsp else 0.0,
                    mlm_correct=result["mlm_correct"], nsp_correct=result["nsp_correct"] if n_nsp else 0,
                    n_mlm=result["n_mlm"], n_nsp=n_nsp, tokens=result["tokens"])

    def __call__(self, batch, lr, dropout_seed):
        batches = [batch] if isinstance(batch, dict) else list(batch)
        if len(batches) != len(self.micro):
            raise ValueError(f"this step takes {len(self.micro)} micro-batch(es) (accum), got {len(batches)}")
        counts = np.sum([self._load(b, a) for b, a in zip(batches, self.micro)], axis=0)
        self.lr[...] = self.model.xp.asarray(np.float64(lr))
        self.model.seed_dropout(dropout_seed)
        if self.graph is None and self.steps == WARMUP:
            try:
                self.graph = graph.Graph(self._work)  # captured, not run: the replay below runs it
            except Exception as exc:                  # the GPU (or CuPy) refused: go on without
                self.log(f"warning: --cuda-graph: the step could not be captured ({type(exc).__name__}: "
                         f"{str(exc)[:200]}); it runs one launch at a time")
        if self.graph is not None:
            result = self.graph.replay()
        else:
            with graph.rehearsal():
                result = self._work()
        self.steps += 1
        return dict(result, n_mlm=int(counts[0]), n_nsp=int(counts[1]), tokens=int(counts[2]))
