"""The commands of ``minibert`` other than pre-training: ``train-tokenizer`` and ``fill-mask``.

Each takes the parsed command line; ``cli.py`` turns what they raise into one line and an
exit status.
"""
from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path


def train_tokenizer(ns) -> int:
    from .data.corpus import check_data_dir, load_corpus
    from .data.tokenizer import train_wordpiece
    from .data.wordpiece_trainer import check_vocab_size_option
    check_vocab_size_option(ns.vocab_size)
    check_data_dir(ns.corpus, ns.data_dir)
    if ns.out.endswith(("/", os.sep)):
        raise ValueError(f"--out {ns.out} names a folder; name the vocabulary file, e.g. {Path(ns.out) / 'vocab.txt'}")
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
    _check_not_a_models_vocab(out)
    from .data.vocab import UNK, load_vocab
    try:
        is_vocab = UNK in load_vocab(out)
    except (ValueError, OSError):
        is_vocab = False
    if not is_vocab:
        raise FileExistsError(f"--out {out} already exists and is not a vocabulary (no [UNK] line); choose "
                              f"another --out, or delete the file first if it may go")
    return True


def _check_not_a_models_vocab(out: Path) -> None:
    """A model's or a run's own vocabulary is not replaced: its weights (or checkpoints) are tied to those token ids."""
    from .model.hf_io import CONFIG_NAME, WEIGHTS_NAME
    from .train.run_folder import RUN_NAME
    folder = out.parent
    if (folder / RUN_NAME).is_file():
        whose = f"the run in {folder} ({RUN_NAME} there): its checkpoints and --resume"
    elif (folder / CONFIG_NAME).is_file() and (folder / WEIGHTS_NAME).is_file():
        whose = f"the model in {folder} ({CONFIG_NAME} and {WEIGHTS_NAME} there): its weights"
    else:
        return
    raise FileExistsError(f"--out {out} is the vocabulary of {whose} need these token ids, and a new vocabulary "
                          f"gives them other words; write it elsewhere (another --out)")


def fill_mask(ns) -> int:
    from .model.inference import fill_mask as predict, load_for_fill_mask
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
            predictions = predict(model, tokenizer, text, ns.top_k)
        for w in caught:
            print(f"note: {w.message}", file=sys.stderr)
        for i, preds in enumerate(predictions):
            shown = "  ".join(f"{tok} ({_probability(p)})" for tok, p in preds)
            print(textwrap.indent(f"[MASK] #{i + 1}: {shown}", "  "))
    return 0


def _probability(p: float) -> str:
    """Three decimals, or two significant digits below 0.001 (a 30,522-token vocabulary spreads it thin)."""
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"
