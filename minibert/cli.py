"""The ``minibert`` command line: pretrain, doctor, train-tokenizer, fill-mask, demo.

Every command checks its arguments first and fails with one clear line
(exit status 2) before doing any work.
"""
from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from dataclasses import fields

from .accel import num_threads
from .finetune import command as finetune_command
from .train import TrainArgs, dist, dist_exit, doctor
from .train.errors import AgreedError
from .train.signals import STOP_SIGNALS, guarded_output, honoured, stop_requested

PRETRAIN_HELP = """\
Pre-train a BERT from scratch with masked language modelling (MLM) and next
sentence prediction (NSP), on the CPU (NumPy) or a GPU (CuPy).

The run writes into --out:
  vocab.txt                 the WordPiece vocabulary (trained on the corpus unless --vocab)
  metrics.jsonl             every logged step and every held-out evaluation, one JSON per line
  checkpoint-NNNNNNNN.npz   the last --keep checkpoints (weights, optimiser, data position)
  loss.png                  train and held-out curves, with the baselines drawn as lines
  model/                    the final model in Hugging Face's format (config.json,
                            model.safetensors, vocab.txt): transformers loads it as it is

Ctrl-C, SIGTERM or SIGHUP (a closed terminal), or a stdout or stderr whose reader went
away, saves a checkpoint and exits with status 0 (an output on a full disk: status 1);
--resume continues exactly where the run stopped (the same losses as an uninterrupted run
on the CPU). To keep training after the terminal closes, run it under nohup or tmux (see
the README); under mpiexec, send the output to a file.
A NaN loss stops the run, names the step and the last good checkpoint, and saves nothing.

Several processes train one model with MPI (pip install "minibert[dist]"):
  mpiexec -n 2 python -m mpi4py -m minibert pretrain ... (--batch-size is the global batch)
"""

PRETRAIN_EXAMPLES = """\
examples:
  minibert pretrain --corpus builtin --config tiny --steps 600 --seq-len 64 --out runs/demo
  minibert pretrain --corpus wikitext-2 --data-dir ~/data/wikitext-2-raw --config mini \\
                    --steps 20000 --lr 5e-4 --out runs/wt2
  minibert pretrain --out runs/wt2 --corpus wikitext-2 --config mini --steps 20000 --lr 5e-4 --resume
"""


def _pretrain_parser(sub):
    p = sub.add_parser("pretrain", help="pre-train a BERT on a corpus",
                       description=PRETRAIN_HELP, epilog=PRETRAIN_EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    d = TrainArgs()
    g = p.add_argument_group("data")
    g.add_argument("--corpus", default=d.corpus,
                   help="'builtin' (Python's own documentation, offline), 'wikitext-2' (downloaded into "
                        "the cache and checked, or read from --data-dir), or a text file (default: %(default)s)")
    g.add_argument("--corpus-format", choices=["bert", "plain"], default=d.corpus_format,
                   help="for a file: 'bert' = one sentence per line, blank line between documents; "
                        "'plain' = ordinary text, one document per paragraph (default: %(default)s)")
    g.add_argument("--data-dir", help="a local folder holding wiki.valid.raw / wiki.test.raw (WikiText-2)")
    g.add_argument("--vocab", help="a BERT vocab.txt; without it a vocabulary is trained on the corpus")
    g.add_argument("--vocab-size", type=int, default=None,
                   help=f"size of the trained vocabulary (default: {d.vocab_size}; not with --vocab)")
    g.add_argument("--seq-len", type=int, default=d.seq_len, help="tokens per sequence (default: %(default)s)")
    g.add_argument("--dupe-factor", type=int, default=d.dupe_factor,
                   help="times the corpus is cut into instances, each time differently (default: %(default)s)")
    g.add_argument("--data-worker", choices=["auto", "thread", "process"], default=d.data_worker,
                   help="where the next batch is masked while a step runs: a thread, or a process of its own "
                        "(a GPU step keeps the interpreter busy launching kernels); auto: a process with "
                        "--device cuda, a thread otherwise (default: %(default)s)")
    _model_options(p.add_argument_group("model"), d)
    _ablation_options(p.add_argument_group("ablations", ABLATIONS_HELP), d)
    g = p.add_argument_group("optimisation")
    g.add_argument("--steps", type=int, default=d.steps, help="optimiser steps (default: %(default)s)")
    g.add_argument("--batch-size", type=int, default=d.batch_size,
                   help="sequences per micro-batch (default: %(default)s)")
    g.add_argument("--accum", type=int, default=d.accum,
                   help="micro-batches per optimiser step (default: %(default)s)")
    g.add_argument("--lr", type=float, default=d.lr, help="peak learning rate (default: %(default)s)")
    g.add_argument("--warmup", type=int, help="warmup steps (default: 10%% of --steps)")
    g.add_argument("--weight-decay", type=float, default=d.weight_decay, help="(default: %(default)s)")
    g.add_argument("--max-grad-norm", type=float, default=d.max_grad_norm,
                   help="clip the gradients' global norm to this; 0: no clipping (default: %(default)s)")
    g.add_argument("--bert-adam", dest="bias_correction", action="store_false",
                   help="google-research/bert's AdamW, without bias correction")
    g.add_argument("--seed", type=int, default=d.seed,
                   help="fixes weights, data, masks and dropout (default: %(default)s)")
    g = p.add_argument_group("output")
    g.add_argument("--out", default=d.out, help="run directory (default: %(default)s)")
    g.add_argument("--resume", action="store_true", help="continue from the last checkpoint in --out")
    g.add_argument("--eval-every", type=int, default=d.eval_every, help="(default: %(default)s)")
    g.add_argument("--heldout-fraction", type=float, default=d.heldout_fraction,
                   help="share of the documents held out for evaluation (default: %(default)s)")
    g.add_argument("--eval-instances", type=int, default=d.eval_instances,
                   help="held-out instances per evaluation; with NSP, half IsNext, half NotNext (default: %(default)s)")
    g.add_argument("--save-every", type=int, default=d.save_every, help="(default: %(default)s)")
    g.add_argument("--log-every", type=int, default=d.log_every, help="(default: %(default)s)")
    g.add_argument("--keep", type=int, default=d.keep, help="checkpoints kept (default: %(default)s)")
    g.add_argument("--stop-at", type=int,
                   help="save and stop at this step; the schedule still runs to --steps (resume later)")
    g.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    g.add_argument("--no-plot", dest="plot", action="store_false", help="no loss-curve picture")
    return p


def _model_options(g, d: TrainArgs) -> None:
    g.add_argument("--config", default=d.config,
                   help="a preset (tiny, mini, small, medium, base) or a config.json (default: %(default)s)")
    g.add_argument("--dropout", type=float, help="both of the config's dropout probabilities (hidden "
                   "and attention) set to this; 0: none (an ablation: see below)")
    g.add_argument("--device", choices=["cpu", "cuda"], default=d.device, help="(default: %(default)s)")
    g.add_argument("--dtype", choices=["float32", "float64"], default=d.dtype, help="(default: %(default)s)")
    g.add_argument("--mixed-precision", action="store_true",
                   help="float16 matrix products against float32 master weights, with dynamic loss "
                        "scaling: fast on a GPU's tensor cores; on the CPU an emulation, 2-3x slower")
    g.add_argument("--cuda-graph", action="store_true",
                   help="on a GPU: capture a step as one CUDA graph and replay it, one launch a step (faster "
                        "at small sizes, where a step is its launches; with --accum, all its micro-batches); batches "
                        "padded to --seq-len")
    g.add_argument("--kernels", choices=["fast", "reference"], default=d.kernels, help="fast: minibert/accel's "
                   "kernels; reference: minibert/ops alone, the definition, slower (default: %(default)s)")


ABLATIONS_HELP = ("one change each to BERT's recipe, to compare with the default run (notebook 12); "
                  "with --dropout 0, five")


def _ablation_options(g, d: TrainArgs) -> None:
    g.add_argument("--no-nsp", action="store_true",
                   help="masked LM alone (RoBERTa): whole sentences packed into one segment up to --seq-len, "
                        "no sentence pairs, no NSP loss")
    g.add_argument("--mlm-probability", type=float, default=d.mlm_probability, metavar="P",
                   help="share of the tokens predicted, in (0, 1); of those 80%% [MASK], 10%% random, 10%% "
                        "unchanged (default: %(default)s)")
    g.add_argument("--whole-word-masking", action="store_true",
                   help="a word's WordPieces (a token and the ## pieces after it) chosen together")
    g.add_argument("--pre-ln", action="store_true",
                   help="pre-LayerNorm layers, x + sublayer(LN(x)), and a last LayerNorm (notebook 9); "
                        "trains and saves checkpoints, but is not exported: Hugging Face's BERT is post-LN")


def _train_args(ns) -> TrainArgs:
    if ns.vocab is not None and ns.vocab_size is not None:
        raise ValueError("--vocab-size sets the size of a vocabulary trained on the corpus; with --vocab "
                         "the vocabulary is that file (give one or the other)")
    names = {f.name for f in fields(TrainArgs)}
    return TrainArgs(**{k: v for k, v in vars(ns).items() if k in names and v is not None})


TOKENIZER_HELP = """\
Learn a WordPiece vocabulary from a corpus and write it as vocab.txt (BERT's
format: one token per line, [PAD] [unused...] [UNK] [CLS] [SEP] [MASK] first).

example:
  minibert train-tokenizer --corpus builtin --vocab-size 4000 --out vocab.txt
"""

FILL_MASK_HELP = """\
Predict the words hidden behind [MASK] in a sentence, with a model saved by
`minibert pretrain` (its model/ directory) or any BERT directory holding
config.json, model.safetensors and vocab.txt.

example:
  minibert fill-mask runs/demo/model "the [MASK] statement returns a value from a function ."
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="minibert", description="BERT pre-training from scratch, forward and backward by hand in NumPy.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run `minibert COMMAND --help` for the details of each command.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _pretrain_parser(sub)

    t = sub.add_parser("train-tokenizer", help="learn a WordPiece vocabulary", description=TOKENIZER_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--corpus", default="builtin", help="'builtin', 'wikitext-2' or a text file")
    t.add_argument("--corpus-format", choices=["bert", "plain"], default="bert")
    t.add_argument("--data-dir", help="a local WikiText-2 folder")
    t.add_argument("--vocab-size", type=int, default=4000)
    t.add_argument("--cased", action="store_true", help="keep case and accents (default: uncased)")
    t.add_argument("--out", default="vocab.txt", help="the file to write (default: %(default)s)")

    f = sub.add_parser("fill-mask", help="top-k predictions for [MASK] in a sentence", description=FILL_MASK_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    f.add_argument("model_dir", help="a directory with config.json, model.safetensors and vocab.txt")
    f.add_argument("text", nargs="+", help="sentence(s) containing [MASK]")
    f.add_argument("--top-k", type=int, default=5)
    f.add_argument("--device", choices=["cpu", "cuda"], default="cpu")

    doctor.add_command(sub)
    finetune_command.add_command(sub)
    dm = sub.add_parser("demo", help="a short pre-training run on the built-in corpus (make demo)",
                        description="Train a tiny BERT from scratch on the built-in corpus in a few minutes "
                                    "on a laptop CPU, then show held-out numbers against their baselines, "
                                    "the loss curves and some fill-mask predictions.")
    dm.add_argument("--out", default="runs/demo")
    dm.add_argument("--steps", type=int, default=None, help="override the demo's number of steps")
    dm.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: the same run on a GPU, with CuPy (default: %(default)s)")

    ns = parser.parse_args(argv)
    # a closed pipe or a hung-up terminal never crashes a command: its output goes nowhere,
    # and a pre-training run saves and stops (signals.py)
    with guarded_output():
        status = _output_written(ns, _run_command(ns, program=argv is None))
    if argv is None:
        # the program itself, which ends now (MPI finishing with the other ranks, at most): a late
        # Ctrl-C or SIGHUP, say the second of two quick ones, must not turn a saved run into a failure
        with contextlib.suppress(ValueError):      # (not the main thread: nothing to do)
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_IGN)
    return status


def _output_written(ns, status: int) -> int:
    """A stdout that could not be written (a full disk; not a reader that went away, which is quiet)
    fails a command that succeeded, as ``echo`` does: what it printed is lost."""
    lost = getattr(sys.stdout, "lost", None)
    if status == 0 and lost and lost != "closed":
        print(f"minibert {ns.command}: error: stdout {lost}: its output is lost", file=sys.stderr)
        return 1
    return status


def _run_command(ns, program: bool) -> int:
    """The command ``ns`` names, with every failure turned into one line and an exit status.
    ``program``: this is the process's whole run (``main()`` without arguments), which ends after it."""
    try:
        dist.world()     # under mpiexec -n N: the job's N processes (an error after this ends them all)
        num_threads()    # a bad MINIBERT_NUM_THREADS (the fast CPU kernels' pool) is one line before any work
        with _terminate_as_interrupt(final=program):
            return _dispatch(ns)
    except KeyboardInterrupt as exc:
        signame = exc.args[0] if exc.args and isinstance(exc.args[0], str) else "SIGINT"
        advice = ("; a run keeps the checkpoints it saved: run the same command again (with --resume "
                  "if its folder holds one)") if ns.command in ("pretrain", "finetune") else ""
        def report(rank):
            print(f"minibert {ns.command}: {rank}interrupted ({signame}){advice}", file=sys.stderr, flush=True)
        return dist_exit.interrupted(128 + getattr(signal, signame, signal.SIGINT), report)
    except AgreedError as exc:       # every rank of the job has it: rank 0 says it, as its own error
        if not isinstance(exc.error, _EXPECTED):
            dist_exit.abort_on_crash()
            raise exc.error from None
        return _fail(ns, exc, *_message_and_status(exc.error))
    except _EXPECTED as exc:
        return _fail(ns, exc, *_message_and_status(exc))
    except Exception:
        dist_exit.abort_on_crash()   # several processes: a bug in one ends the job (even without -m mpi4py)
        raise


# what a command reports in one line; anything else is a bug, and its traceback is shown
_EXPECTED = (MemoryError, ValueError, TypeError, FileNotFoundError, PermissionError, RuntimeError, OSError)


def _message_and_status(exc: BaseException):
    """The line that says what went wrong, and the exit status: 1 for a run that failed, 2 for bad input."""
    if isinstance(exc, MemoryError):
        return (f"out of memory ({str(exc) or 'an allocation failed'}); use a smaller --batch-size, --seq-len "
                f"or --config", 2)
    kind = getattr(exc, "kind", type(exc).__name__)     # a PeerError: the other rank's error
    return str(exc), 1 if kind == "TrainingError" else 2


def _fail(ns, exc, message: str, status: int) -> int:
    """One line on stderr (from rank 0 alone in a data-parallel job), and the exit status."""
    def report(text):
        print(f"minibert {ns.command}: error: {text}", file=sys.stderr)
    exc.args = (message,)
    if str(exc) != message:          # an exception that writes its own text (NumPy's out-of-memory error)
        exc = Exception(message)
    return dist_exit.leave(exc, report, status)


@contextlib.contextmanager
def _terminate_as_interrupt(final: bool):
    """SIGINT, SIGTERM (e.g. from a job scheduler) and SIGHUP (the terminal closed) stop the
    command with one line, not silently.

    During the training loop, pretrain's own handler takes over these signals (it saves a
    checkpoint and stops cleanly); this one covers everything before and after it. Once the run
    has saved on a signal, further ones change nothing: it is ending (``final``: signals stay
    ignored to the process's exit). A signal the process was started ignoring (``nohup``, or
    SIGINT in a background job) stays ignored.
    """
    def interrupt(signum, frame):
        if not stop_requested():
            raise KeyboardInterrupt(signal.Signals(signum).name)
    old = {}
    try:
        for sig in STOP_SIGNALS:
            default = signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL
            if honoured(sig) and signal.getsignal(sig) == default:
                old[sig] = signal.signal(sig, interrupt)
    except ValueError:       # not the main thread: leave the signals alone
        pass
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, signal.SIG_IGN if final and stop_requested() else handler)


def _dispatch(ns) -> int:
    """Run the chosen command; returns its exit status."""
    if ns.command != "pretrain" and dist.current().size > 1:
        raise AgreedError(ValueError(f"`minibert {ns.command}` runs as one process; of the commands, only pretrain "
                                f"runs as several (mpiexec -n {dist.current().size} ...): start this one "
                                f"without mpiexec"))
    if ns.command == "pretrain":
        from .train import pretrain
        # every rank parses its own command line: a bad one is reported once, by rank 0
        result = pretrain(dist.current().everywhere(lambda: _train_args(ns)))
        stop = result.stopped_by or ""
        if stop.startswith("stdout "):   # its own line went there: say it where it is read
            print(f"minibert pretrain: {stop}: saved a checkpoint at step {result.step} in "
                  f"{result.out}; continue with --resume", file=sys.stderr)
        # a stop on purpose (a signal, a reader gone) is a success; a NaN or a full disk is not
        status = 1 if stop == "nan" or "could not be written" in stop else 0
        return doctor.after_pretrain(result, status)   # and the doctor's one line
    if ns.command == "doctor":
        return doctor.command(ns)
    if ns.command == "finetune":
        return finetune_command.command(ns)
    if ns.command == "train-tokenizer":
        from .commands import train_tokenizer
        return train_tokenizer(ns)
    if ns.command == "fill-mask":
        from .commands import fill_mask
        return fill_mask(ns)
    if ns.command == "demo":
        from .demo import run_demo
        return run_demo(ns.out, ns.steps, ns.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
