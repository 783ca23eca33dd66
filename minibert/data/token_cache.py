"""Tokenizing a whole corpus once, and keeping the result on disk.

Tokenizing WikiText-2's valid + test splits takes about a second; loading the
cached ids takes a few milliseconds. The cache file's name is made of the
corpus fingerprint (its text and structure) and the tokenizer fingerprint (its
vocabulary and casing), plus the Unicode version of Python's ``unicodedata``
(which decides what is punctuation, a Chinese character or an accent to strip),
so a changed corpus, vocabulary or Python is never served stale ids. Cache folder: ``$MINIBERT_CACHE``, default ``~/.cache/minibert``.
"""
from __future__ import annotations

import contextlib
import os
import unicodedata
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .documents import Corpus
from ..paths import TOKENIZED_FOLDER, default_cache_dir

__all__ = ["TokenizedCorpus", "tokenize_corpus"]

FORMAT_VERSION = 1


@dataclass
class TokenizedCorpus:
    """A corpus as token ids, stored flat.

    Attributes:
        name: the corpus name.
        ids: int32, shape (num_tokens,): every sentence's ids, one after another.
        sentence_starts: int64, shape (num_sentences + 1,): sentence ``s`` is
            ``ids[sentence_starts[s]:sentence_starts[s + 1]]``.
        document_starts: int64, shape (num_documents + 1,): document ``d`` is sentences
            ``document_starts[d]`` to ``document_starts[d + 1] - 1``.
    """

    name: str
    ids: np.ndarray
    sentence_starts: np.ndarray
    document_starts: np.ndarray

    @property
    def num_tokens(self) -> int:
        return int(self.ids.shape[0])

    @property
    def num_documents(self) -> int:
        return int(self.document_starts.shape[0] - 1)

    @property
    def num_sentences(self) -> int:
        return int(self.sentence_starts.shape[0] - 1)

    def documents(self, vocab: list[str]) -> list[list[list[str]]]:
        """Tokens as ``documents[d][s] = [token, ...]`` (the input of
        :func:`~minibert.data.instances.create_training_instances`)."""
        tokens = [vocab[i] for i in self.ids.tolist()]
        starts = self.sentence_starts.tolist()
        sentences = [tokens[a:b] for a, b in zip(starts, starts[1:])]
        d = self.document_starts.tolist()
        return [sentences[a:b] for a, b in zip(d, d[1:])]


def _tokenize(corpus: Corpus, tokenizer) -> TokenizedCorpus:
    ids: list[int] = []
    sentence_starts = [0]
    document_starts = [0]
    for doc in corpus.documents:
        for sentence in doc:
            sentence_ids = tokenizer.tokenize_to_ids(sentence)
            if sentence_ids:                  # a sentence of only control characters has none
                ids.extend(sentence_ids)
                sentence_starts.append(len(ids))
        if len(sentence_starts) - 1 > document_starts[-1]:
            document_starts.append(len(sentence_starts) - 1)
    return TokenizedCorpus(corpus.name, np.asarray(ids, dtype=np.int32),
                           np.asarray(sentence_starts, dtype=np.int64),
                           np.asarray(document_starts, dtype=np.int64))


def cache_path(corpus: Corpus, tokenizer, cache_dir: str | os.PathLike | None = None) -> Path:
    """Where the tokenized ``corpus`` is (or would be) cached."""
    if cache_dir is None:
        cache_dir = default_cache_dir()
    name = (f"v{FORMAT_VERSION}-{corpus.fingerprint()[:20]}-{tokenizer.fingerprint()[:20]}"
            f"-u{unicodedata.unidata_version}.npz")
    return Path(cache_dir) / TOKENIZED_FOLDER / name


def tokenize_corpus(corpus: Corpus, tokenizer, cache_dir: str | os.PathLike | None | bool = None) -> TokenizedCorpus:
    """Token ids of every sentence of ``corpus``, from the cache when possible.

    Args:
        corpus: the text.
        tokenizer: a :class:`~minibert.data.tokenizer.WordPieceTokenizer`.
        cache_dir: the cache folder; ``None`` for ``$MINIBERT_CACHE`` or ``~/.cache/minibert``,
            ``False`` for no cache.
    """
    corpus.check()
    if cache_dir is False:
        return _tokenize(corpus, tokenizer)
    path = cache_path(corpus, tokenizer, cache_dir)
    if path.is_file():
        try:
            with np.load(path) as z:
                return TokenizedCorpus(corpus.name, z["ids"], z["sentence_starts"], z["document_starts"])
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            pass                                  # damaged cache file: tokenize again
    result = _tokenize(corpus, tokenizer)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npz")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(tmp, ids=result.ids, sentence_starts=result.sentence_starts,
                 document_starts=result.document_starts)
        os.replace(tmp, path)                     # atomic: readers never see half a file
    except OSError as exc:                        # a cache that cannot be written only costs time: say so
        warnings.warn(f"the token cache {path.parent} cannot be written ({exc.strerror or exc}): the corpus "
                      f"is tokenized again on every run; set MINIBERT_CACHE to a writable folder",
                      UserWarning, stacklevel=2)
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    return result
