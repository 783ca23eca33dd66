"""A small English corpus that every Python installation already carries, the same on every version.

It needs no download and no data file, so the demo and the tests run offline on
any fresh machine. Its sentences are prose that CPython ships:

* the topics of the Python language reference that ``help()`` shows, shipped as
  ``pydoc_data.topics``, and
* the docstrings of the standard library's public modules and of their public
  classes, functions and methods, read from the source files with :mod:`ast`
  (nothing is imported, so no module's import-time side effects run).

Only prose is kept: code examples, indented blocks, grammar rules, tables,
headings and doctest lines are dropped, and paragraphs are cut into sentences by
:func:`~minibert.data.documents.split_sentences`.

**The same corpus on every Python.** Each CPython release edits some of that
prose, and a distribution may leave modules out (Debian ships ``tkinter``
separately), so taking everything would give every Python version its own corpus
and every count, vocabulary and loss downstream would move with it. Instead
minibert keeps a *manifest* (``builtin_corpus.manifest`` beside this file): one
line per document, one fingerprint per sentence (the first 12 hexadecimal digits
of the SHA-256 of its UTF-8 bytes). It lists only the sentences that every
CPython it was made from (see the manifest's header) has word for word, and
fixes their order and their grouping into documents. At run time the sentences
of the running Python are fingerprinted and looked up: a Python that has them all
gives exactly the same corpus, which the manifest's corpus fingerprint confirms.
The manifest holds no text, only which text to take. A Python that lacks a few
sentences (a later release that rewrote them, a trimmed distribution) still
works: the missing sentences are left out, with a warning that numbers will
differ from the ones the README and the notebooks quote.

Parsing the standard library takes a couple of seconds, so the result is kept in
the cache folder (``$MINIBERT_CACHE``, default ``~/.cache/minibert``), keyed by
the Python version and the manifest, and in memory. The manifest is made by
``tools/build_corpus_manifest.py``.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import sys
import sysconfig
import warnings
from pathlib import Path

from .documents import Corpus, split_sentences
from ..paths import default_cache_dir

__all__ = ["builtin_corpus", "document_sources", "default_cache_dir", "prose_sentences", "source_documents",
           "sentence_fingerprint", "MANIFEST"]

BUILD_VERSION = 2             # bump when the cleaning rules change, to invalidate caches
MANIFEST = Path(__file__).with_name("builtin_corpus.manifest")
FINGERPRINT_DIGITS = 12       # 48 bits: no two of the ~30,000 candidate sentences share one
# Not prose, or not meant to be read: tests, the IDLE and turtle demos, the topics
# (used separately), the two joke modules; tkinter, which distributions ship apart.
_SKIP_MODULES = {"test", "idlelib", "turtledemo", "pydoc_data", "this", "antigravity", "lib2to3", "ensurepip",
                 "tkinter"}
_RULE_LINE = re.compile(r"^\s*([*=\-~^#+]{3,}|[+|].*[+|])\s*$")   # underlines, table borders
# Lines that give a paragraph away as code or a doctest.
_CODE_LINE = re.compile(r"^\s*(>>>|\.\.\.|def |class |return\b|import |from \S+ import|@\w|#)"
                        r"|\s=\s|[:{(\[,]\s*$|^\s*\w+\(.*\)\s*$")
_WORD = re.compile(r"""^["'(\[]*[A-Za-z][A-Za-z'\-]*[.,;:!?"')\]]*$""")
_BULLET = re.compile(r"^\s*([*\-\u2022]|\d+\.)\s+")
_memory: dict[str, Corpus] = {}


def _is_prose(lines: list[str]) -> bool:
    """Guess whether a paragraph is prose (True) or code, grammar, a table or a doctest."""
    text = " ".join(lines)
    if "::=" in text or any(_RULE_LINE.match(line) or _CODE_LINE.match(line) for line in lines):
        return False
    tokens = text.split()
    words = sum(1 for t in tokens if _WORD.match(t))
    return len(tokens) >= 3 and words >= 0.7 * len(tokens)


def prose_sentences(text: str) -> list[str]:
    """The sentences of the prose in a docstring or help topic.

    Paragraphs (lines between blank lines) that look like code, grammar rules,
    tables, headings or doctests are dropped: see ``_CODE_LINE``, and a paragraph
    must be at least 70% plain words. List bullets are removed. Sentences of a
    single word are dropped too (labels such as "Returns:").
    """
    sentences: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        lines = [line for line in para.split("\n") if line.strip()]
        if not lines or not _is_prose(lines):
            continue
        kept = " ".join(_BULLET.sub("", line) for line in lines)
        sentences.extend(s for s in split_sentences(kept) if len(s.split()) >= 2)
    return sentences


def _topic_documents() -> list[tuple[str, list[str]]]:
    from pydoc_data.topics import topics
    return [(f"topic:{k}", s) for k, s in ((k, prose_sentences(topics[k])) for k in sorted(topics)) if s]


def _stdlib_files() -> list[tuple[str, Path]]:
    """(name, source file) of each public top-level standard-library module (``__init__.py`` for packages)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for name in sorted(sys.stdlib_module_names):
        if name.startswith("_") or name in _SKIP_MODULES:
            continue
        for candidate in (stdlib / f"{name}.py", stdlib / name / "__init__.py"):
            if candidate.is_file():
                files.append((name, candidate))
                break
    return files


def _docstring_documents() -> list[tuple[str, list[str]]]:
    docs: list[tuple[str, list[str]]] = []
    for name, path in _stdlib_files():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")            # e.g. invalid escape sequences
                tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name.startswith("_"):
                    continue
            elif not isinstance(node, ast.Module):
                continue
            doc = ast.get_docstring(node)
            sentences = prose_sentences(doc) if doc else []
            if sentences:
                docs.append((name, sentences))
    return docs


def source_documents() -> list[tuple[str, list[str]]]:
    """Every prose document of the running Python, as (source, sentences): the reference
    topics (source ``"topic:NAME"``), then the docstrings (source: the module's name).

    This is what the manifest chooses from; it differs from one Python to the next.
    """
    return _topic_documents() + _docstring_documents()


def sentence_fingerprint(sentence: str) -> str:
    """The first 12 hexadecimal digits of the SHA-256 of the sentence's UTF-8 bytes."""
    return hashlib.sha256(sentence.encode("utf-8")).hexdigest()[:FINGERPRINT_DIGITS]


def read_manifest(path: str | os.PathLike = MANIFEST) -> tuple[dict[str, str], list[tuple[str, list[str]]]]:
    """The manifest's header fields (``# key: value`` lines) and its documents, each
    (source, fingerprints of its sentences)."""
    header: dict[str, str] = {}
    documents: list[tuple[str, list[str]]] = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            key, sep, value = line[1:].partition(":")
            if sep:
                header[key.strip()] = value.strip()
        elif line.strip():
            source, *prints = line.split()
            documents.append((source, prints))
    return header, documents


def assemble(manifest_documents: list[tuple[str, list[str]]], sources: list[tuple[str, list[str]]]):
    """The manifest's documents with each fingerprint replaced by the sentence it names.

    Returns (documents, their sources, how many of the manifest's sentences ``sources``
    lacks). Missing sentences are left out, and a document left with fewer than two is
    dropped (next-sentence prediction needs two from one document).
    """
    by_print = {}
    for _, doc in sources:
        for sentence in doc:
            by_print.setdefault(sentence_fingerprint(sentence), sentence)
    documents, kept_sources, missing = [], [], 0
    for source, prints in manifest_documents:
        doc = [by_print[p] for p in prints if p in by_print]
        missing += len(prints) - len(doc)
        if len(doc) >= 2:
            documents.append(doc)
            kept_sources.append(source)
    return documents, kept_sources, missing


def _cache_key() -> str:
    manifest = hashlib.sha256(MANIFEST.read_bytes()).hexdigest()
    h = hashlib.sha256(f"v{BUILD_VERSION} {sys.version} {sysconfig.get_paths()['stdlib']} {manifest}".encode())
    return h.hexdigest()[:16]


def _read_cache(path: Path):
    """(documents, sources) from a cache file, or None when it is missing or not what we wrote."""
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
        documents, sources = cached["documents"], cached["sources"]
        if (isinstance(documents, list) and len(documents) >= 2 and isinstance(sources, list)
                and len(sources) == len(documents) and all(isinstance(s, str) for s in sources)):
            _make(documents)                              # raises TypeError unless documents of sentences
            return documents, sources
    except (OSError, ValueError, TypeError, KeyError):
        pass                                              # damaged, old, or written by hand: build again
    return None


def _build(cache_dir) -> tuple[Corpus, list[str]]:
    key = _cache_key()
    if key in _memory:
        return _memory[key]
    path = None
    if cache_dir is not False:
        path = Path(cache_dir if cache_dir is not None else default_cache_dir()) / f"builtin-corpus-{key}.json"
        cached = _read_cache(path) if path.is_file() else None
        if cached is not None:
            _memory[key] = (_make(cached[0]), cached[1])
            return _memory[key]
    header, manifest_documents = read_manifest()
    documents, sources, missing = assemble(manifest_documents, source_documents())
    corpus = _make(documents)
    if missing:
        total = sum(len(prints) for _, prints in manifest_documents)
        warnings.warn(
            f"this Python ({sys.version.split()[0]}) lacks {missing:,} of the {total:,} sentences of minibert's "
            f"built-in corpus (made from CPython {header.get('made from', '?')}), so the corpus is smaller and "
            "the figures will differ from those the README and the notebooks quote", UserWarning, stacklevel=3)
    elif corpus.fingerprint() != header.get("corpus sha256"):
        # every sentence found, yet not the manifest's corpus: the manifest was edited by hand
        raise RuntimeError(f"the built-in corpus does not match {MANIFEST}; rebuild the manifest with "
                           "tools/build_corpus_manifest.py")
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps({"documents": documents, "sources": sources}), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass                                     # a read-only cache is not an error
    _memory[key] = (corpus, sources)
    return _memory[key]


def builtin_corpus(cache_dir: str | os.PathLike | None | bool = None) -> Corpus:
    """The built-in corpus (see the module docstring).

    Args:
        cache_dir: folder for the cached build; ``None`` for :func:`default_cache_dir`,
            ``False`` to neither read nor write a cache file.
    """
    return _build(cache_dir)[0]


def document_sources(cache_dir: str | os.PathLike | None | bool = None) -> list[str]:
    """Where each document of :func:`builtin_corpus` comes from, in the same order: a
    module's name (``"os"``, ``"email"``) for its docstrings, ``"topic:NAME"`` for a topic
    of the language reference. The same on every Python, like the corpus."""
    return _build(cache_dir)[1]


def _make(documents: list[list[str]]) -> Corpus:
    return Corpus("builtin", documents,
                  description="prose from the Python reference topics (pydoc_data.topics) and standard-library "
                              f"docstrings that every CPython listed in {MANIFEST.name} ships")
