"""Text corpora: documents made of sentences; the readers of text files.

A :class:`Corpus` is a list of documents, each a list of sentences (strings).
Pre-training needs both levels: segments A and B are runs of consecutive
sentences of one document, and "NotNext" examples take B from another document.

Readers:

* :func:`read_bert_format` — google-research/bert's input format: one sentence
  per line, a blank line between documents.
* :func:`read_plain_text` — ordinary text; paragraphs (separated by blank lines)
  are cut into sentences by :func:`split_sentences`.

The corpora by name (the built-in one, WikiText-2) are in :mod:`minibert.data.corpus`,
whose :func:`~minibert.data.corpus.load_corpus` picks a source by name or path.
"""
from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..textio import read_text

__all__ = ["Corpus", "split_sentences", "read_bert_format", "read_plain_text", "paragraphs"]


@dataclass
class Corpus:
    """Documents of sentences.

    Attributes:
        name: a short name for messages and reports ("wikitext-2 valid+test", a file name, ...).
        documents: ``documents[d][s]`` is sentence ``s`` of document ``d`` (a non-empty string).
        description: where the text comes from.
    """

    name: str
    documents: list[list[str]] = field(repr=False)
    description: str = ""

    def __post_init__(self):
        # a string where a list is expected would be cut into characters, silently
        docs = self.documents
        if isinstance(docs, (str, bytes)) or not isinstance(docs, (list, tuple)):
            raise TypeError(f"Corpus documents must be a list of documents (each a list of sentence "
                            f"strings), got {type(docs).__name__}")
        for d, doc in enumerate(docs):
            if isinstance(doc, (str, bytes)) or not isinstance(doc, (list, tuple)):
                raise TypeError(f"Corpus {self.name!r}: documents[{d}] has type {type(doc).__name__}; each "
                                f"document must be a list of sentence strings, e.g. [['First sentence.', "
                                f"'Second one.'], ['Another document.']]")
            for s, sentence in enumerate(doc):
                if not isinstance(sentence, str):
                    raise TypeError(f"Corpus {self.name!r}: documents[{d}][{s}] has type "
                                    f"{type(sentence).__name__}; sentences must be strings")

    @property
    def num_documents(self) -> int:
        return len(self.documents)

    @property
    def num_sentences(self) -> int:
        return sum(len(d) for d in self.documents)

    @property
    def num_words(self) -> int:
        """Whitespace-separated words, as ``wc -w`` counts them."""
        return sum(len(s.split()) for d in self.documents for s in d)

    def stats(self) -> dict:
        """``{"documents": ..., "sentences": ..., "words": ...}``."""
        return {"documents": self.num_documents, "sentences": self.num_sentences, "words": self.num_words}

    def fingerprint(self) -> str:
        """SHA-256 of the text and its document/sentence structure (a cache key)."""
        h = hashlib.sha256(b"minibert-corpus-v1\n")
        for doc in self.documents:
            h.update("\n".join(doc).encode("utf-8"))
            h.update(b"\n\x00\n")
        return h.hexdigest()

    def check(self, min_documents: int = 1) -> "Corpus":
        """Raise ``ValueError`` if the corpus has no text or fewer than ``min_documents`` documents."""
        if self.num_sentences == 0:
            raise ValueError(f"corpus {self.name!r} is empty: it has no sentences. Check that the file(s) "
                             "hold text, one sentence per line, with a blank line between documents.")
        if self.num_documents < min_documents:
            raise ValueError(
                f"corpus {self.name!r} has {self.num_documents} document(s) but at least {min_documents} "
                "are needed: next-sentence prediction takes the 'NotNext' segment from a different "
                "document. Separate documents with a blank line (one sentence per line), or add text.")
        return self

    def __str__(self) -> str:
        s = self.stats()
        return (f"{self.name}: {s['documents']:,} documents, {s['sentences']:,} sentences, "
                f"{s['words']:,} words")


# ---------------------------------------------------------------------- sentences
# Words that end in a period without ending the sentence (compared in lowercase).
_ABBREVIATIONS = frozenset("""
    mr mrs ms dr prof sr jr st mt vs etc e.g i.e cf al fig figs no nos vol vols pp ed eds
    approx ca inc ltd co corp gen col lt sgt capt rev gov sen rep jan feb mar apr jun jul aug
    sep sept oct nov dec u.s u.k
    """.split())

# A candidate boundary: ., ! or ? (maybe several, maybe followed by closing quotes or
# brackets), then whitespace, then something that can start a sentence.
_BOUNDARY = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*(?=\s+(?:[\"'\u201c\u2018(\[]\s?)*[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """Cut a paragraph into sentences with a simple rule.

    A sentence ends at ``.``, ``!`` or ``?`` (plus any closing quotes or brackets)
    when whitespace and then a capital letter, a digit, or an opening quote or
    bracket follow. A period does not end a sentence after a common abbreviation
    ("Mr.", "e.g.", "etc.", see ``_ABBREVIATIONS``) or after a single capital
    letter (an initial, as in "J. R. R. Tolkien"). Whitespace inside a sentence is
    collapsed to single spaces; empty sentences are dropped.

    >>> split_sentences("It rained. Mr. Smith stayed in!  So did we.")
    ['It rained.', 'Mr. Smith stayed in!', 'So did we.']
    """
    sentences: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        if text[m.start()] == "." and m.group().count(".") == 1:
            before = text[max(start, m.start() - 16):m.start()].split()
            word = before[-1].lstrip("(\"'[").lower() if before else ""
            if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
                continue
        sentences.append(text[start:m.end()])
        start = m.end()
    sentences.append(text[start:])
    return [s for s in (" ".join(s.split()) for s in sentences) if s]


# ---------------------------------------------------------------------- readers
def _paths(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Path]:
    if isinstance(paths, (str, os.PathLike)):
        return [Path(paths)]
    return [Path(p) for p in paths]


def read_bert_format(paths, name: str | None = None, encoding: str = "utf-8") -> Corpus:
    """Read files in google-research/bert's format: one sentence per line, blank line between documents.

    Each file also ends the document that is open at its end. Leading and trailing
    whitespace of each line is removed.

    Raises:
        FileNotFoundError, IsADirectoryError: a path is not a file.
        ValueError: undecodable bytes (file, byte offset and line in the message) or no text at all.
    """
    paths = _paths(paths)
    documents: list[list[str]] = []
    for path in paths:
        current: list[str] = []
        for line in read_text(path, what="corpus file", encoding=encoding).split("\n"):
            line = line.strip()
            if line:
                current.append(line)
            elif current:
                documents.append(current)
                current = []
        if current:
            documents.append(current)
    corpus = Corpus(name or ", ".join(p.name for p in paths), documents,
                    description="one sentence per line, blank line between documents: "
                                + ", ".join(map(str, paths)))
    return corpus.check()


def paragraphs(text: str) -> list[str]:
    """Blank-line-separated paragraphs of ``text``, each with its lines joined by spaces."""
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]


def read_plain_text(paths, name: str | None = None, documents: str = "file",
                    encoding: str = "utf-8") -> Corpus:
    """Read ordinary text files, cutting paragraphs into sentences with :func:`split_sentences`.

    Args:
        paths: one path or several.
        documents: ``"file"``: each file is one document; ``"paragraph"``: each
            blank-line-separated paragraph is a document of its own.
    """
    if documents not in ("file", "paragraph"):
        raise ValueError(f"documents={documents!r}: use 'file' or 'paragraph'.")
    paths = _paths(paths)
    docs: list[list[str]] = []
    for path in paths:
        paras = [split_sentences(p) for p in paragraphs(read_text(path, what="text file", encoding=encoding))]
        if documents == "file":
            docs.append([s for p in paras for s in p])
        else:
            docs.extend(p for p in paras if p)
    docs = [d for d in docs if d]
    return Corpus(name or ", ".join(p.name for p in paths), docs,
                  description=f"plain text, one document per {documents}: " + ", ".join(map(str, paths))).check()

