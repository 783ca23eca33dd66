"""Text corpora: documents made of sentences, from a name or a path.

A :class:`Corpus` is a list of documents, each a list of sentences (strings).
Pre-training needs both levels: segments A and B are runs of consecutive
sentences of one document, and "NotNext" examples take B from another document.

Sources (the type and the file readers are defined in :mod:`minibert.data.documents`):

* :func:`read_bert_format` — google-research/bert's input format: one sentence
  per line, a blank line between documents.
* :func:`read_plain_text` — ordinary text; paragraphs (separated by blank lines)
  are cut into sentences by :func:`split_sentences`.
* :func:`minibert.data.builtin.builtin_corpus` — prose shipped with Python itself.
* :func:`minibert.data.wikitext.load_wikitext2` — WikiText-2 (raw).
* :func:`load_corpus` picks one of these by name.
"""
from __future__ import annotations

import os

from .builtin import builtin_corpus
from .documents import Corpus, paragraphs, read_bert_format, read_plain_text, split_sentences
from .wikitext import load_wikitext2

__all__ = ["Corpus", "split_sentences", "read_bert_format", "read_plain_text", "load_corpus", "paragraphs",
           "check_data_dir"]
WIKITEXT_NAMES = ("wikitext-2", "wikitext2")


def check_data_dir(source, data_dir) -> None:
    """--data-dir names where WikiText-2 is read from: refused beside any other corpus, where it would do nothing."""
    if data_dir is not None and str(source) not in WIKITEXT_NAMES:
        raise ValueError(f"--data-dir is where WikiText-2 is read from; it does nothing for "
                         f"--corpus {source} (give the file itself as --corpus)")


def load_corpus(source: str | os.PathLike, fmt: str = "bert", *, data_dir: str | os.PathLike | None = None,
                splits=("valid", "test"), download: bool = False, encoding: str = "utf-8") -> Corpus:
    """A corpus by name or path.

    Args:
        source: ``"builtin"`` (see :mod:`minibert.data.builtin`), ``"wikitext-2"``
            (see :func:`minibert.data.wikitext.load_wikitext2`), or the path of a text file.
        fmt: for a path: ``"bert"`` (one sentence per line, blank line between documents)
            or ``"plain"`` (ordinary text: one document per paragraph for a single file, one
            per file for several).
        data_dir, splits, download: where WikiText-2 is (or goes), which splits, and whether
            to download it; unused for the other sources.
        encoding: the encoding of a text file.
    """
    if str(source) == "builtin":
        return builtin_corpus()
    if str(source) in WIKITEXT_NAMES:
        return load_wikitext2(splits, data_dir=data_dir, download=download)
    if fmt == "bert":
        return read_bert_format(source, encoding=encoding)
    if fmt == "plain":
        # NSP needs documents: a single file is cut at its blank lines, several files are one each
        single = isinstance(source, (str, os.PathLike))
        return read_plain_text(source, documents="paragraph" if single else "file", encoding=encoding)
    raise ValueError(f"fmt={fmt!r}: use 'bert' (one sentence per line) or 'plain' (ordinary text).")
