"""The pre-training loop: ``pretrain`` sets the run up, ``train_step`` is one optimiser step."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import dist
from .. import accel
from ..accel.cuda import bookkeeping
from .checkpoint_files import checkpoint_step, latest_checkpoint, remove_partial_checkpoints
from ..model.config import BertConfig
from ..model.bert import BertForPreTraining
from ..model.hf_io import PRE_LN_EXPORT
from ..optim import AdamW, LossScaler, linear_warmup_decay, scaled_step, unscale_and_clip
from .args import RunResult, TrainArgs, check_args, uses_data_process
from .checkpoints import checkpoint_to_resume, restore_run, run_identity, save_run
from .data import Prefetch, data_summary, prepare_data
from .data_worker import ProcessPrefetch
from .errors import DISK_FULL, AgreedError, TrainingError, os_error_in, replaced, writes
from .graph_step import GraphStep
from .health import Health
from .metrics import (MetricsLog, add, batch_stats, evaluate, open_metrics, summarize, token_counts,
                      unigram_baseline, unknown_share)
from .plot import plot_history
from .run_facts import data_facts, model_facts, write_run_facts
from .run_folder import (METRICS_NAME, PLOT_NAME, VOCAB_NAME, export_model, lock_run_folder,
                         start_fresh)
from .signals import StopSignal


def pretrain(args: TrainArgs, log=print, on_record=None) -> RunResult:
    """Run (or resume) a pre-training job; see the package docstring.

    log: where the set-up and end messages go (``print`` by default).
    on_record: called with each record as it is written to metrics.jsonl
        (a dict with "kind" = "train" or "eval", "step" and the metrics),
        e.g. to draw a live plot in a notebook.

    Under ``mpiexec -n N`` the N processes train one model together (``dist.py``):
    rank 0 alone logs and writes, and returns the whole result; the others return
    theirs without history.
    """
    comm = dist.world()
    if not comm.is_root:
        log, on_record = _quiet, None
    try:
        dist.check_run(comm, args)
        config = comm.everywhere(lambda: check_args(args, probe_out=comm.is_root))
        return _in_folder(args, config, comm, log, on_record)
    finally:
        comm.close()


def _quiet(*args, **kwargs) -> None:
    """The log of ranks other than 0: one voice per job."""


def _in_folder(args: TrainArgs, config: BertConfig, comm, log, on_record) -> RunResult:
    """Lock the run folder (rank 0), start or resume in it, and run."""
    out = Path(args.out)
    # before anything in the folder is read: a run starting beside us hears of us
    lock = comm.on_root(lambda: lock_run_folder(out))
    try:
        checkpoint = comm.bcast(comm.on_root(lambda: _open_folder(args, out)))
        return _run(args, config, out, checkpoint, comm, log, on_record)
    except (OSError, AgreedError) as exc:     # the loop's own writes say more: this is the set-up's
        failed = os_error_in(exc)
        if failed is None or failed.errno not in DISK_FULL:
            raise
        raise replaced(exc, TrainingError(
            f"could not write {failed.filename or out}: the disk is full ({failed.strerror}); no step was "
            f"trained in this start: free some space, then run the same command again")) from None
    finally:
        if lock is not None:
            lock.close()


def _open_folder(args: TrainArgs, out: Path):
    """The checkpoint to resume from (None for a new run, whose folder is made ready)."""
    remove_partial_checkpoints(out)   # left by a run killed while it saved (the lock is ours now)
    checkpoint = checkpoint_to_resume(args, out)
    if checkpoint is not None and args.stop_at is not None and args.stop_at < checkpoint_step(checkpoint):
        raise ValueError(f"--stop-at {args.stop_at} is behind the run: {checkpoint} is at step "
                         f"{checkpoint_step(checkpoint)}; give a later --stop-at, or none to train to --steps")
    if not args.resume:
        if latest_checkpoint(out) is not None:
            raise ValueError(f"{out} already holds checkpoints of a run: pass --resume to continue "
                             f"it, or choose another --out")
        start_fresh(out, args)
    return checkpoint


@dataclass
class Run:
    """What the loop works on: set up once by ``_set_up``, then moved on by each step."""
    args: TrainArgs
    out: Path
    model: BertForPreTraining
    opt: AdamW
    scaler: LossScaler | None      # mixed precision only
    stream: object                 # the BatchStream; in the loop, its Prefetch
    eval_batches: list
    tokenizer: object
    identity: dict                 # what a checkpoint must match to be resumed by this run
    counts: object                 # how often each token occurs in the training text
    baseline: float                # the unigram baseline of the held-out MLM loss
    step: int                      # steps done
    last_ckpt: object              # the last checkpoint saved or resumed from; None before the first
    window: dict | None            # the restored sums since the last train record
    comm: object                   # the data-parallel ranks (dist.py); one process: Single
    metrics: MetricsLog            # metrics.jsonl and the sums of the steps since its last train record
    health: Health = None          # whether a step went wrong (on a GPU, read at the next log)
    graph: object = None           # --cuda-graph: the step as a CUDA graph (graph_step.py)

    def __post_init__(self):
        c = self.model.config
        self.health = Health(self.comm, lambda: self.last_ckpt,
                             dropout=max(c.hidden_dropout_prob, c.attention_probs_dropout_prob))

    def record_eval(self) -> None:
        result = evaluate(self.model, self.eval_batches, self.comm)
        self.metrics.record(dict(kind="eval", step=self.step, **result, unigram_baseline=self.baseline))


def _run(args: TrainArgs, config: BertConfig, out: Path, checkpoint, comm, log, on_record) -> RunResult:
    """``pretrain`` once the folder is checked and locked: set-up, the loop, the end."""
    dist.use_device(comm, args.device)
    run = _set_up(args, config, out, checkpoint, comm, log, on_record)
    # one handler from the first step to the return: a second Ctrl-C (or a SIGHUP after a SIGTERM)
    # while the checkpoint is written, the prefetch thread ends or the model is exported changes nothing
    with StopSignal() as stop:
        with _running(run) as bar:
            stopped_by = _loop(run, stop, bar, log)
        return _finish(run, config, stopped_by, log)


@contextlib.contextmanager
def _running(run: Run):
    """Around the loop, and closed in reverse order however it ends: the metrics file, the held-out
    evaluation of step 0, the thread that prepares the next batch, the progress bar, the clock."""
    with contextlib.ExitStack() as closing:
        closing.callback(run.metrics.close)
        if run.step == 0:
            with writes(run.step, run.last_ckpt):
                run.record_eval()
        # after the restore: it starts from the restored position
        run.stream = (ProcessPrefetch if uses_data_process(run.args) else Prefetch)(run.stream)
        closing.callback(run.stream.close)
        from tqdm.auto import tqdm
        bar = tqdm(total=run.args.steps, initial=run.step, disable=not (run.args.progress and run.comm.is_root),
                   unit="step", dynamic_ncols=True)
        closing.callback(bar.close)
        run.metrics.start(run.stream, run.window)
        # a diverging run overflows: the finiteness check reports it
        # in one line instead of a wall of NumPy warnings
        with np.errstate(over="ignore", invalid="ignore"):
            yield bar


def _loop(run: Run, stop: StopSignal, bar, log) -> str | None:
    """Train to --steps (or --stop-at); returns why the run stopped before --steps (None if it did not)."""
    args = run.args
    end = args.stop_at if args.stop_at is not None else args.steps
    while run.step < end:
        lr = args.lr * linear_warmup_decay(run.step, args.steps, args.warmup_steps)
        train_step(run, lr)
        stopping = run.comm.first(stop.received)    # every rank stops after the same step, for one reason
        # log, evaluate, save; a write that fails says which steps are lost
        with writes(run.step, run.last_ckpt):
            _log_evaluate_save(run, lr, bar, save=bool(stopping) or run.step == end)
        if stopping:
            why = f"{stopping} received" if stopping.startswith("SIG") else stopping
            log(f"\n{why}: saved {run.last_ckpt} at step {run.step}; continue with --resume")
            return stopping
    if args.stop_at is not None and run.step < args.steps:
        log(f"stopped at step {run.step} (--stop-at): saved {run.last_ckpt}; continue with --resume")
        return "stop_at"
    return None


def train_step(run: Run, lr: float) -> None:
    """Step ``run.step + 1``: batch, forward and loss, backward, clip, AdamW, and the step's sums logged.

    With ``--accum`` n, n micro-batches add up their gradients before the one AdamW step.
    """
    args, model, scaler, comm = run.args, run.model, run.scaler, run.comm
    if run.graph is not None:                      # --cuda-graph: the same step, one launch
        batches = [run.stream.next_batch() for _ in range(args.accum)]
        r = run.graph(batches, lr, comm.dropout_seed(args.seed, run.step))
        _book(run, run.graph.sums(r), r["grad_norm"], r["finite"], r.get("loss_scale"))
        run.step += 1
        return
    # dropout masks depend on (seed, step) only (and the rank, with several processes)
    model.seed_dropout(comm.dropout_seed(args.seed, run.step))
    loss_scale = scaler.scale if scaler is not None else 1.0
    sums = {}
    for micro in range(args.accum):
        batch = run.stream.next_batch()            # the global batch: every rank draws the same one
        mine = comm.share(batch)                   # this rank's rows (all of them, in one process)
        out = model.forward(**mine, train=True)    # the logits and both losses
        # each loss summed over these rows and divided by the global batch's counts
        model.backward(accumulate=micro > 0, loss_scale=loss_scale, loss_counts=comm.loss_counts(batch))
        sums = add(sums, batch_stats(out, mine, fused=model.ops is accel.cuda))
    comm.allreduce_grads(model.params.grad)        # the ranks' gradients summed: the global batch's
    sums = comm.reduce_step(sums)                  # and the step's metrics
    # the mean over micro-batches, the loss scale taken out again, clipped; on a GPU the norm,
    # the verdicts and the loss scale stay there: no step waits to read them
    grad_norm = unscale_and_clip(model.params, args.max_grad_norm or None, loss_scale, args.accum)
    finite = model.xp.isfinite(grad_norm)
    _book(run, sums, grad_norm, finite, loss_scale if scaler else None)
    scaled_step(run.opt, scaler, finite, lr)       # not taken where the gradients overflowed
    run.step += 1


def _book(run: Run, sums: dict, grad_norm, finite, loss_scale) -> None:
    """Step ``run.step + 1`` watched for divergence (``Health``) and its sums added to the metrics'
    window; on a GPU with minibert's kernels both in one launch (``accel/cuda/bookkeeping.py``)."""
    step = run.step + 1
    if run.model.ops is accel.cuda and bookkeeping.applies(sums, grad_norm, finite, loss_scale):
        xp = run.model.xp
        bookkeeping.step_book(step, sums, grad_norm, finite, loss_scale, run.metrics.device_window(xp),
                              run.health.device_first(xp))
        run.metrics.add_counts(sums)
        return
    run.health.watch(step, summarize(sums)["loss"], grad_norm, finite, loss_scale)
    run.metrics.add_step(sums, grad_norm, finite)


def _log_evaluate_save(run: Run, lr: float, bar, save: bool) -> None:
    """After a step: the train record on log steps, the held-out evaluation, the checkpoint."""
    args, step = run.args, run.step
    log = step % args.log_every == 0 or step == args.steps
    evaluate = step % args.eval_every == 0 or step == args.steps
    save = save or step % args.save_every == 0
    if log or evaluate or save:      # the host reads the step's numbers: first, whether all went well
        run.health.check()
    # log steps only, never at a stop: the window goes into the checkpoint instead
    if log:
        entry = run.metrics.train_record(step, lr, run.stream, run.scaler)
        shown = dict(loss=f"{entry['loss']:.3f}", mlm_acc=f"{entry['mlm_acc']:.3f}")
        if "nsp_acc" in entry:     # not trained with --no-nsp
            shown["nsp_acc"] = f"{entry['nsp_acc']:.2f}"
        bar.set_postfix(**shown, tok_s=f"{entry['tokens_per_s']:,.0f}")
    bar.update(1)
    if evaluate:
        run.record_eval()
    if save:
        # rank 0 writes while the others wait; a failure there stops every rank
        run.last_ckpt = run.comm.bcast(run.comm.on_root(lambda: _save(run)))


def _save(run: Run) -> Path:
    args = run.args
    try:
        return save_run(run.out, run.step, run.model, run.opt, run.stream, run.identity, args.keep,
                        run.metrics.window_state(run.stream), run.scaler)
    except TrainingError as exc:
        raise TrainingError(f"{exc}. Last good checkpoint: {run.last_ckpt or 'none'}. "
                            f"Try a lower --lr.") from None


def _set_up(args: TrainArgs, config: BertConfig, out: Path, checkpoint, comm, log, on_record) -> Run:
    """The data, the model, AdamW (restored from ``checkpoint`` if there is one), what is known of them,
    and metrics.jsonl rewound to the step the run starts from."""
    # rank 0 first: it writes the vocabulary and fills the token cache; the others then read them
    data = comm.on_root(lambda: prepare_data(args, out, log))
    # the others check that they read the same text (their working folders and disks may differ)
    leader = comm.bcast(comm.on_root(lambda: data_summary(args, data[0], data[1])))
    corpus, tokenizer, stream, eval_batches = comm.everywhere(
        lambda: data if comm.is_root else prepare_data(args, out, log, follower=True, leader=leader))
    config.vocab_size = tokenizer.vocab_size
    config.pad_token_id = tokenizer.pad_id
    model = BertForPreTraining(config, seed=args.seed, dtype=args.dtype, device=args.device,
                               mixed_precision=args.mixed_precision, kernels=args.kernels, pre_ln=args.pre_ln)
    opt = AdamW(model.params, lr=args.lr, weight_decay=args.weight_decay, bias_correction=args.bias_correction)
    scaler = LossScaler() if args.mixed_precision else None
    identity = run_identity(args, config, corpus.fingerprint(), tokenizer.fingerprint())
    step, window = _restore(comm, checkpoint, model, opt, stream, identity, scaler)
    comm.broadcast_arrays(model.params.data, opt.m, opt.v)   # the same start on every rank, by construction

    counts = token_counts(stream.dataset, tokenizer)
    baseline = unigram_baseline(counts, eval_batches)
    # what minibert doctor needs to read the curves (the NSP prior, the pairs, the sizes)
    comm.on_root(lambda: write_run_facts(out, args, data_facts(args, corpus, tokenizer, stream.dataset, baseline),
                                         model_facts(config, model.num_parameters())))
    log(f"corpus: {corpus}")
    log(f"model: {args.config}, {model.num_parameters():,} parameters, vocabulary {config.vocab_size:,}; "
        f"{stream.per_epoch} batches of {args.batch_size} per epoch")
    log(f"baselines: MLM loss {baseline:.3f} (the training corpus's unigram frequencies)"
        + (", NSP not trained (--no-nsp)" if args.no_nsp else ", NSP accuracy 50%"))
    unk = unknown_share(eval_batches, tokenizer)
    if unk > 0.05:
        source = f"--vocab {args.vocab} does not fit this corpus" if args.vocab else\
            f"--vocab-size {args.vocab_size} is too small for this corpus"
        log(f"warning: {unk:.0%} of the held-out tokens are [UNK]: {source}; the model learns little "
            f"from text it cannot see")
    if checkpoint:
        log(f"resumed from {checkpoint} at step {step}")
    if comm.size > 1:
        log(f"data parallel: {comm.size} processes, {args.batch_size // comm.size} of the {args.batch_size} "
            f"sequences of each batch on each")
    metrics = open_metrics(out / METRICS_NAME, step, checkpoint, log, on_record, comm)
    return Run(args, out, model, opt, scaler, stream, eval_batches, tokenizer, identity, counts, baseline, step,
               checkpoint, window, comm, metrics, graph=GraphStep.for_run(args, model, opt, scaler, comm, log))


def _restore(comm, checkpoint, model, opt, stream, identity, scaler):
    """(step, log window) of ``checkpoint`` (0, None for a new run), its state loaded.

    Rank 0 reads it; the other ranks, which may run on nodes that do not see --out,
    get its small state from rank 0 and its arrays from ``broadcast_arrays``.
    """
    def read():
        if not checkpoint:
            return None
        step, window = restore_run(checkpoint, model, opt, stream, identity, scaler)
        return step, window, opt.t, stream.state_dict(), scaler.state_dict() if scaler is not None else None
    state = comm.bcast(comm.on_root(read))
    if state is None:
        return 0, None
    step, window, opt.t, position, scale = state
    stream.load_state_dict(position)
    if scaler is not None:
        scaler.load_state_dict(scale)
    return step, window


def _finish(run: Run, config: BertConfig, stopped_by, log) -> RunResult:
    """The end of a start: the model exported (once all steps are done), the loss curves drawn."""
    args, out, step, history = run.args, run.out, run.step, run.metrics.history
    final_eval = next((h for h in reversed(history) if h["kind"] == "eval"), None)
    result = RunResult(out=out, step=step, history=history, final_eval=final_eval, model=run.model,
                       tokenizer=run.tokenizer, stopped_by=stopped_by, eval_batches=run.eval_batches,
                       token_counts=run.counts)
    # rank 0 writes the model and the plot while the others wait, and a signal now neither cuts the
    # export short nor ends a waiting rank (_run's StopSignal still holds them): the run is all but done
    if step == args.steps and args.pre_ln:
        log(f"model not exported: {PRE_LN_EXPORT}; its checkpoints in {out} hold it")
    elif step == args.steps:
        with writes(step, run.last_ckpt, what=out / "model"):
            export_dir = run.comm.on_root(lambda: export_model(run.model, run.tokenizer, out))
        log(f"model saved to {export_dir} (Hugging Face format, with {VOCAB_NAME})")
    if args.plot:
        with writes(step, run.last_ckpt, what=out / PLOT_NAME):
            run.comm.on_root(lambda: plot_history(history, out / PLOT_NAME, vocab_size=config.vocab_size))
        log(f"loss curves: {out / PLOT_NAME}")
    return result
