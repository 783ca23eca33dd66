"""What a run's data and model are, recorded in ``run.json`` for ``minibert doctor``.

The loop's records (``metrics.jsonl``) say how the losses moved; reading them
needs a few facts about the data they came from: how many training pairs
there are (a run over them 60 times can memorise them), how often a training
pair is NotNext (the NSP accuracy a model gets from that share alone), whether
held-out documents also occur in the training text (then held-out numbers
measure memory), and the model's sizes.  A run writes them into ``run.json``
under ``"data"`` and ``"model"`` once its data is ready.  A run folder from
before they were recorded has neither key; ``facts_from_corpus`` recomputes
them from the run's corpus and ``vocab.txt`` when both can still be read.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from ..textio import write_whole
from .run_folder import RUN_NAME, VOCAB_NAME


def data_facts(args, corpus, tokenizer, dataset, baseline: float | None) -> dict:
    """The facts of a run's data: ``args`` its ``TrainArgs``, ``dataset`` its training ``PretrainingDataset``."""
    from .data import split_documents
    train_docs, held_docs = split_documents(corpus, args.heldout_fraction, args.seed)
    seen = {_key(d) for d in train_docs.documents}
    return dict(
        vocab_size=tokenizer.vocab_size,
        documents=corpus.num_documents,
        distinct_documents=len({_key(d) for d in corpus.documents}),
        train_documents=train_docs.num_documents,
        heldout_documents=held_docs.num_documents,
        # a held-out document whose exact text is also a training document is not held out
        heldout_seen_in_training=sum(_key(d) in seen for d in held_docs.documents),
        train_instances=len(dataset),
        # real tokens of all the training instances, the special tokens included: the text is
        # cut --dupe-factor times, so the text itself is about this over the dupe factor
        train_tokens=sum(len(inst.tokens) for inst in dataset.instances),
        not_next_share=dataset.not_next_share(),     # None for --no-nsp: no pairs
        unigram_baseline=baseline)


def model_facts(config, num_parameters: int) -> dict:
    return dict(config.to_dict(), parameters=int(num_parameters))


def _key(document) -> tuple:
    """A document's identity: its sentences, exactly."""
    return tuple(document)


def write_run_facts(out: Path, args, data: dict, model: dict) -> None:
    """Add the facts to ``out/run.json``, keeping what it already holds (written whole or not at all).

    A resumed run keeps the settings its first start recorded; a ``run.json`` that is gone or
    unreadable is written again from ``args``, the run's ``TrainArgs``.
    """
    path = Path(out) / RUN_NAME
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(info, dict):
            raise ValueError("not an object")
    except (OSError, ValueError):
        info = {"minibert_run": 1, "args": asdict(args)}
    info.update(data=data, model=model)
    text = json.dumps(info, indent=2, default=str) + "\n"
    write_whole(path, lambda f: f.write(text.encode()))


def facts_from_corpus(settings: dict, run_dir: Path) -> dict:
    """The data facts of a run from before ``run.json`` held them, from its corpus and its ``vocab.txt``.

    Nothing is downloaded: WikiText-2 must be in the cache or in the run's ``--data-dir``.
    Raises ``FileNotFoundError`` or ``ValueError`` with the reason when they cannot be read.
    """
    from ..data.pretraining_data import build_pretraining_dataset
    from ..data.tokenizer import WordPieceTokenizer
    from .args import TrainArgs
    from .data import split_documents
    from ..data.corpus import load_corpus
    names = set(TrainArgs.__dataclass_fields__)
    args = TrainArgs(**{k: v for k, v in settings.items() if k in names})
    vocab = Path(args.vocab) if args.vocab else Path(run_dir) / VOCAB_NAME
    if not vocab.is_file():
        raise FileNotFoundError(f"its vocabulary {vocab} is not there")
    corpus = load_corpus(args.corpus, args.corpus_format, data_dir=args.data_dir, download=False)
    tokenizer = WordPieceTokenizer.from_vocab_file(vocab)
    train_docs, _ = split_documents(corpus, args.heldout_fraction, args.seed)
    dataset = build_pretraining_dataset(train_docs, tokenizer, max_seq_length=args.seq_len,
                                        max_predictions_per_seq=args.max_predictions, dupe_factor=args.dupe_factor,
                                        seed=args.seed, cache_dir=args.cache_dir, nsp=not args.no_nsp)
    return data_facts(args, corpus, tokenizer, dataset, None)
