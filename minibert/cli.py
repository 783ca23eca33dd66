"""The ``minibert`` command line: pretrain, doctor, train-tokenizer, fill-mask, demo.

Every command checks its arguments first and fails with one clear line
(exit status 2) before doing any work.
"""
from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import textwrap
from dataclasses import fields
from pathlib import Path

from . import accel
from .train import TrainArgs, dist, dist_exit, doctor
from .train.errors import agreed
from .train.signals import STOP_SIGNALS, guarded_output, honoured

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
away, saves a checkpoint and exits with status 0; --resume continues exactly where the
run stopped (the same losses as an uninterrupted run on the CPU). To keep training after
the terminal closes, run it under nohup or tmux (see the README).
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
    g = p.add_argument_group("model")
    g.add_argument("--config", default=d.config,
                   help="a preset (tiny, mini, small, medium, base) or a config.json (default: %(default)s)")
    g.add_argument("--dropout", type=float, help="override the config's dropout probabilities")
    g.add_argument("--device", choices=["cpu", "cuda"], default=d.device, help="(default: %(default)s)")
    g.add_argument("--dtype", choices=["float32", "float64"], default=d.dtype, help="(default: %(default)s)")
    g.add_argument("--mixed-precision", action="store_true",
                   help="float16 matrix products against float32 master weights, with dynamic loss "
                        "scaling: fast on a GPU's tensor cores; on the CPU an emulation, 2-3x slower")
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
                   help="held-out instances per evaluation, balanced IsNext/NotNext (default: %(default)s)")
    g.add_argument("--save-every", type=int, default=d.save_every, help="(default: %(default)s)")
    g.add_argument("--log-every", type=int, default=d.log_every, help="(default: %(default)s)")
    g.add_argument("--keep", type=int, default=d.keep, help="checkpoints kept (default: %(default)s)")
    g.add_argument("--stop-at", type=int,
                   help="save and stop at this step; the schedule still runs to --steps (resume later)")
    g.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    g.add_argument("--no-plot", dest="plot", action="store_false", help="no loss-curve picture")
    return p


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
        status = _run_command(ns)
    if argv is None:
        # the program itself, which ends now (MPI finishing with the other ranks, at most): a late
        # Ctrl-C or SIGHUP, say the second of two quick ones, must not turn a saved run into a failure
        with contextlib.suppress(ValueError):      # (not the main thread: nothing to do)
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_IGN)
    return status


def _run_command(ns) -> int:
    """The command ``ns`` names, with every failure turned into one line and an exit status."""
    try:
        dist.world()     # under mpiexec -n N: the job's N processes (an error after this ends them all)
        accel.enable()   # the accelerated kernels: the same math, faster (MINIBERT_FAST=0: the reference)
        with _terminate_as_interrupt():
            return _dispatch(ns)
    except KeyboardInterrupt as exc:
        signame = exc.args[0] if exc.args and isinstance(exc.args[0], str) else "SIGINT"
        advice = ("; a run keeps the checkpoints it saved: run the same command again (with --resume "
                  "if its folder holds one)") if ns.command == "pretrain" else ""
        def report(rank):
            print(f"minibert {ns.command}: {rank}interrupted ({signame}){advice}", file=sys.stderr, flush=True)
        return dist_exit.interrupted(128 + getattr(signal, signame, signal.SIGINT), report)
    except MemoryError as exc:
        return _fail(ns, exc, f"out of memory ({str(exc) or 'an allocation failed'}); use a smaller "
                              f"--batch-size, --seq-len or --config", 2)
    except (ValueError, TypeError, FileNotFoundError, PermissionError, RuntimeError, OSError) as exc:
        kind = getattr(exc, "kind", type(exc).__name__)     # a PeerError: the other rank's error
        return _fail(ns, exc, str(exc), 1 if kind == "TrainingError" else 2)
    except Exception:
        dist_exit.abort_on_crash()   # several processes: a bug in one ends the job (even without -m mpi4py)
        raise


def _fail(ns, exc, message: str, status: int) -> int:
    """One line on stderr (from rank 0 alone in a data-parallel job), and the exit status."""
    def report(text):
        print(f"minibert {ns.command}: error: {text}", file=sys.stderr)
    exc.args = (message,)
    return dist_exit.leave(exc, report, status)


@contextlib.contextmanager
def _terminate_as_interrupt():
    """SIGTERM (e.g. from a job scheduler) and SIGHUP (the terminal closed) stop the command like
    Ctrl-C: with one line, not silently.

    During the training loop, pretrain's own handler takes over these signals (it saves a
    checkpoint and stops cleanly); this one covers everything before and after it. A SIGHUP
    ignored by the user (``nohup``) stays ignored.
    """
    def interrupt(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)
    old = {}
    try:
        for sig in STOP_SIGNALS:
            if sig != signal.SIGINT and honoured(sig):   # SIGINT: Python's own KeyboardInterrupt
                old[sig] = signal.signal(sig, interrupt)
    except ValueError:       # not the main thread: leave the signals alone
        pass
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _dispatch(ns) -> int:
    """Run the chosen command; returns its exit status."""
    if ns.command != "pretrain" and dist.current().size > 1:
        raise agreed(ValueError(f"`minibert {ns.command}` runs as one process; of the commands, only pretrain "
                                f"runs as several (mpiexec -n {dist.current().size} ...): start this one "
                                f"without mpiexec"))
    if ns.command == "pretrain":
        from .train import pretrain
        # every rank parses its own command line: a bad one is reported once, by rank 0
        result = pretrain(dist.current().everywhere(lambda: _train_args(ns)))
        if (result.stopped_by or "").startswith("stdout "):   # its own line went there: say it where it is read
            print(f"minibert pretrain: {result.stopped_by}: saved a checkpoint at step {result.step} in "
                  f"{result.out}; continue with --resume", file=sys.stderr)
        return doctor.after_pretrain(result, status=0 if result.stopped_by != "nan" else 1)   # + its one line
    if ns.command == "doctor":
        return doctor.command(ns)
    if ns.command == "train-tokenizer":
        return _train_tokenizer(ns)
    if ns.command == "fill-mask":
        return _fill_mask(ns)
    if ns.command == "demo":
        from .demo import run_demo
        return run_demo(ns.out, ns.steps, ns.device)
    return 0


def _train_tokenizer(ns) -> int:
    from .corpus import load_corpus
    from .tokenizer import train_wordpiece
    from .wordpiece_trainer import check_vocab_size_option
    check_vocab_size_option(ns.vocab_size)
    out = Path(ns.out)
    replaces = _check_vocab_out(out, ns.corpus)
    corpus = load_corpus(ns.corpus, ns.corpus_format, data_dir=ns.data_dir, download=ns.data_dir is None)
    import warnings
    with warnings.catch_warnings(record=True) as caught:     # one plain line, not Python's warning format
        warnings.simplefilter("always", UserWarning)
        tok = train_wordpiece([" ".join(d) for d in corpus.documents], ns.vocab_size, do_lower_case=not ns.cased)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    tok.write_vocab_file(out)
    print(f"wrote {out}{' (it replaces the vocabulary that was there)' if replaces else ''}: {tok.vocab_size} "
          f"tokens learned from {corpus}")
    if tok.vocab_size < ns.vocab_size:
        words = {w for d in corpus.documents for s in d for w in tok.basic.tokenize(s)}
        split = sum(len(tok.tokenize(w)) > 1 for w in words)
        why = ("every word is already one token" if not split else
               f"no pair of adjacent pieces is seen twice or more, where training stops; {split:,} of its "
               f"{len(words):,} distinct words are still split into pieces")
        print(f"note: --vocab-size asked for {ns.vocab_size:,}; the corpus has no more word pieces to learn "
              f"({why})", file=sys.stderr)
    return 0


def _check_vocab_out(out: Path, corpus: str) -> bool:
    """``--out`` of train-tokenizer can be written, and replaces no file but a vocabulary; True if it replaces one."""
    blocker = next((p for p in out.parents if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise NotADirectoryError(f"--out {out}: {blocker} is a file, not a folder")
    if out.parent and not out.parent.exists():
        raise FileNotFoundError(f"--out {out}: the folder {out.parent} does not exist")
    if out.is_dir():
        raise ValueError(f"--out {out} is a folder; name the vocabulary file, e.g. {out / 'vocab.txt'}")
    if not out.exists():
        return False
    if Path(corpus).exists() and out.resolve() == Path(corpus).resolve():
        raise ValueError(f"--out {out} is the corpus itself; writing the vocabulary there would replace it")
    from .vocab import UNK, load_vocab
    try:
        is_vocab = UNK in load_vocab(out)
    except (ValueError, OSError):
        is_vocab = False
    if not is_vocab:
        raise FileExistsError(f"--out {out} already exists and is not a vocabulary (no [UNK] line); choose "
                              f"another --out, or delete the file first if it may go")
    return True


def _fill_mask(ns) -> int:
    from .inference import fill_mask, load_for_fill_mask
    if ns.top_k < 1:
        raise ValueError(f"--top-k must be at least 1, got {ns.top_k}")
    model, tokenizer, note = load_for_fill_mask(ns.model_dir, device=ns.device)
    if note:
        print(note, file=sys.stderr)
    import warnings
    for text in ns.text:
        print(text)
        with warnings.catch_warnings(record=True) as caught:     # one plain line, not Python's warning format
            warnings.simplefilter("always", UserWarning)
            predictions = fill_mask(model, tokenizer, text, ns.top_k)
        for w in caught:
            print(f"note: {w.message}", file=sys.stderr)
        for i, preds in enumerate(predictions):
            shown = "  ".join(f"{tok} ({_probability(p)})" for tok, p in preds)
            print(textwrap.indent(f"[MASK] #{i + 1}: {shown}", "  "))
    return 0


def _probability(p: float) -> str:
    """Three decimals, or two significant digits below 0.001 (a 30,522-token vocabulary spreads it thin)."""
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


if __name__ == "__main__":
    sys.exit(main())
