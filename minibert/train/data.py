"""A run's data: the corpus, the vocabulary, the held-out split, the stream of masked batches."""
from __future__ import annotations

import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..data.corpus import Corpus, load_corpus
from ..data.memory_budget import check_instances_fit
from ..data.pretraining_data import batch_rng, build_pretraining_dataset, epoch_order
from ..data.tokenizer import WordPieceTokenizer, train_wordpiece
from .args import TrainArgs
from .checkpoint_files import CheckpointError
from .run_folder import VOCAB_NAME


def split_documents(corpus: Corpus, fraction: float, seed: int) -> tuple[Corpus, Corpus]:
    """Hold out whole documents (at least 2, so NotNext pairs exist there too)."""
    n = corpus.num_documents
    n_held = max(2, round(n * fraction))
    if n - n_held < 2:
        raise ValueError(f"corpus {corpus.name!r} has {n} document{'s' if n != 1 else ''}: too few to hold "
                         f"out {n_held} for evaluation and keep 2 for training")
    order = np.random.default_rng((seed, 1)).permutation(n)
    held = set(order[:n_held].tolist())
    docs = corpus.documents
    return (Corpus(corpus.name + " (train)", [d for i, d in enumerate(docs) if i not in held]),
            Corpus(corpus.name + " (held-out)", [d for i, d in enumerate(docs) if i in held]))


class BatchStream:
    """An endless stream of freshly masked batches, resumable from (epoch, index).

    Epoch e visits the instances in the order ``epoch_order`` draws from
    (seed, e); batch i of epoch e is masked with ``batch_rng(seed, e, i)``,
    as ``PretrainingDataset.batches`` does.  A batch therefore depends only
    on (seed, epoch, index): resuming needs those two numbers, and skipping
    ahead costs nothing.
    """

    def __init__(self, dataset, batch_size: int, seed: int):
        if len(dataset) < batch_size:
            raise ValueError(f"the corpus gives {len(dataset)} training instances, fewer than "
                             f"--batch-size {batch_size}; use a smaller batch or a larger corpus")
        self.dataset, self.batch_size, self.seed = dataset, batch_size, seed
        self.per_epoch = len(dataset) // batch_size   # the remainder waits for the next epoch's shuffle
        self.epoch, self.index = 0, 0
        self._order_epoch, self._order = None, None

    def next_batch(self) -> dict:
        if self.index == self.per_epoch:
            self.epoch, self.index = self.epoch + 1, 0
        if self._order_epoch != self.epoch:
            self._order = epoch_order(len(self.dataset), self.seed, self.epoch)
            self._order_epoch = self.epoch
        take = self._order[self.index * self.batch_size:(self.index + 1) * self.batch_size]
        rng = batch_rng(self.seed, self.epoch, self.index)
        self.index += 1
        return self.dataset.collate([self.dataset.instances[j] for j in take], rng)

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.index = int(state["epoch"]), int(state["index"])


class Prefetch:
    """Makes the next batch in a background thread while the current step runs.

    Masking and padding a batch holds the GIL (about 2 ms for 128 sequences
    of 128 tokens, half of it NumPy's cost per call of the four random draws
    of each sequence): next to a CPU step it is negligible, next to a GPU step
    of 15-60 ms it is not.  The main thread spends part of every step waiting
    (for BLAS on the CPU, for the GPU to finish at ``float(loss)``), and the
    GIL is free then, so the next batch is ready when it is needed.

    Batches come out in the stream's order, so results do not change.  The
    stream itself runs one batch ahead; ``state_dict`` reports the position
    after the last batch *handed out*, which is what a checkpoint must hold.
    ``wait_s`` accumulates the time the caller spent waiting for batches: the
    data pipeline's cost on the critical path.
    """

    def __init__(self, stream: BatchStream):
        self.stream, self.wait_s = stream, 0.0
        self._state = stream.state_dict()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="minibert-data")
        self._next = self._pool.submit(self._make)

    def _make(self):
        batch = self.stream.next_batch()
        return batch, self.stream.state_dict()

    def next_batch(self) -> dict:
        t0 = time.perf_counter()
        batch, self._state = self._next.result()
        self.wait_s += time.perf_counter() - t0
        self._next = self._pool.submit(self._make)
        return batch

    def state_dict(self) -> dict:
        return dict(self._state)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def load_run_corpus(args: TrainArgs) -> Corpus:
    """The run's corpus; WikiText-2 is downloaded (and checked) into the cache unless --data-dir names a copy."""
    return load_corpus(args.corpus, args.corpus_format, data_dir=args.data_dir, download=args.data_dir is None)


def prepare_data(args: TrainArgs, out: Path, log=print, follower: bool = False, leader: dict | None = None):
    """Corpus, tokenizer, training stream and fixed held-out batches.

    The data's warnings (e.g. lines far too long to be sentences) go to ``log``, one line each.
    ``follower``: a data-parallel rank other than 0, which writes nothing and reads the run's
    ``vocab.txt`` (written by rank 0) unless --vocab names one. ``leader``: what rank 0 read
    (``data_summary``); a follower then takes rank 0's trained vocabulary from it rather than
    from a file its node may not see, and refuses a corpus or a --vocab that differs from rank 0's.
    """
    saved_vocab = out / VOCAB_NAME
    trains_vocab = args.vocab is None and not (args.resume and saved_vocab.is_file()) and not follower
    corpus = load_run_corpus(args)
    # a first look at memory before the vocabulary and the tokens: a corpus has at least as
    # many tokens as whitespace-separated words (the exact count is checked again later)
    check_instances_fit(corpus.num_words, args.dupe_factor, unit="words")
    if leader is not None:
        _check_same(corpus.fingerprint(), leader["corpus"], f"the corpus {args.corpus!r}", "--corpus")
    train_docs, held_docs = split_documents(corpus, args.heldout_fraction, args.seed)

    if args.vocab is not None:
        tokenizer = WordPieceTokenizer.from_vocab_file(args.vocab)
    elif leader is not None:
        tokenizer = WordPieceTokenizer(leader["tokens"], do_lower_case=leader["lower"], source="rank 0's vocabulary")
    elif not trains_vocab:
        tokenizer = WordPieceTokenizer.from_vocab_file(saved_vocab)   # the run's own vocabulary
    else:
        # the vocabulary is learned from the training documents only
        with warnings.catch_warnings():   # the run measures and reports the [UNK] share itself
            warnings.simplefilter("ignore", UserWarning)
            tokenizer = train_wordpiece([" ".join(d) for d in train_docs.documents], args.vocab_size)
    if leader is not None:
        _check_same(tokenizer.fingerprint(), leader["vocab"],
                    f"the vocabulary {args.vocab!r} ({tokenizer.vocab_size:,} tokens)", "--vocab")
    if not follower:
        _check_resumed_vocabulary(args, saved_vocab, tokenizer)
        tokenizer.save_vocabulary(out)

    cache = args.cache_dir if args.cache_dir is not None else None
    common = dict(max_seq_length=args.seq_len, max_predictions_per_seq=args.max_predictions, cache_dir=cache,
                  masked_lm_prob=args.mlm_probability, whole_word_mask=args.whole_word_masking, nsp=not args.no_nsp)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        train = build_pretraining_dataset(train_docs, tokenizer, dupe_factor=args.dupe_factor, seed=args.seed,
                                          **common)
        held = build_pretraining_dataset(held_docs, tokenizer, dupe_factor=1, seed=args.seed + 1, **common)
    for message in dict.fromkeys(str(w.message) for w in caught):   # each once, in order
        log(f"warning: {message}")
    eval_batches = _eval_batches(held, train, corpus.name, args, log)
    return corpus, tokenizer, BatchStream(train, args.batch_size, args.seed), eval_batches


def _check_resumed_vocabulary(args: TrainArgs, saved: Path, tokenizer) -> None:
    """A resumed run keeps its vocabulary: a --vocab that differs is refused before the run's vocab.txt is written
    over (the checkpoints' token ids belong to the one there, and the run could not go on with either)."""
    if not (args.resume and args.vocab is not None and saved.is_file()):
        return
    try:
        theirs = WordPieceTokenizer.from_vocab_file(saved)
    except (ValueError, OSError):
        return                     # a damaged vocab.txt: the checkpoint's fingerprint decides (restore_run)
    if theirs.fingerprint() != tokenizer.fingerprint():
        raise CheckpointError(f"--vocab {args.vocab} is not the vocabulary of the run in {saved.parent} ({saved.name} "
                              f"there, {theirs.vocab_size:,} tokens): a resumed run keeps its own; leave --vocab out "
                              f"to resume, or start a run with this vocabulary in another --out")


def data_summary(args: TrainArgs, corpus: Corpus, tokenizer) -> dict:
    """What rank 0 read, for the other ranks: fingerprints, and the vocabulary it trained (or resumed)."""
    trained = args.vocab is None
    return dict(corpus=corpus.fingerprint(), vocab=tokenizer.fingerprint(),
                tokens=tokenizer.vocab if trained else None, lower=tokenizer.do_lower_case)


def _check_same(mine: str, rank0: str, what: str, flag: str) -> None:
    """Every rank trains on the same data: a rank whose files differ from rank 0's says so (a node of its own
    disk, or another working folder, reads its own copy of a file)."""
    if mine != rank0:
        raise ValueError(f"{what} differs from rank 0's (fingerprint {mine[:12]} against {rank0[:12]}): every "
                         f"process must read the same text; a relative {flag} is read from each process's own "
                         f"working folder, and nodes without a shared disk each need a copy of the same file")


def _eval_batches(held, train, corpus_name: str, args: TrainArgs, log) -> list:
    """The held-out batches every evaluation uses.

    They are masked once, with a fixed generator, so evaluations compare; as many IsNext as
    NotNext instances, so that NSP's chance level is exactly 50% (MLM-only instances: the first
    ``--eval-instances`` of a random order).
    """
    rng = np.random.default_rng((args.seed, 2))
    order = rng.permutation(len(held))
    if not held.has_nsp:
        return _collate_all(held, order[:args.eval_instances], args.batch_size, rng)
    by_label = [[j for j in order if held.instances[j].is_random_next == r] for r in (False, True)]
    half = min(args.eval_instances // 2, *map(len, by_label))
    if not by_label[0]:
        raise ValueError(f"the held-out documents of {corpus_name!r} give no IsNext pair to evaluate "
                         f"on: {_why_no_is_next(train, args.seq_len)}")
    if not by_label[1]:
        raise ValueError(f"the held-out documents of {corpus_name!r} give no NotNext pair to evaluate "
                         f"on (a NotNext pair needs a second held-out document); raise --heldout-fraction")
    if 2 * half < args.eval_instances // 4:      # far fewer than asked for
        log(f"warning: the held-out documents give only {half} IsNext/NotNext pairs of each kind "
            f"(--eval-instances {args.eval_instances} asked for {args.eval_instances // 2}): held-out numbers "
            f"will be noisy; raise --heldout-fraction or --seq-len")
    chosen = rng.permutation(by_label[0][:half] + by_label[1][:half])
    return _collate_all(held, chosen, args.batch_size, rng)


def _collate_all(held, chosen, batch_size: int, rng) -> list:
    return [held.collate([held.instances[j] for j in chosen[i:i + batch_size]], rng)
            for i in range(0, len(chosen), batch_size)]


def _why_no_is_next(train, seq_len: int) -> str:
    """The likely reason why no instance is IsNext: said plainly rather than "too small"."""
    share = 1.0 - train.not_next_share()
    if share < 0.02:
        return (f"only {share:.1%} of the training instances are IsNext either. IsNext needs two "
                f"sentences of one document in one sequence of --seq-len {seq_len} tokens: either "
                f"the sentences are longer than that (raise --seq-len), or each document is a single "
                f"line (in the bert format every line is one sentence, and a blank line ends a document)")
    return (f"{share:.1%} of the training instances are IsNext, but none of the held-out ones; "
            f"raise --heldout-fraction")


