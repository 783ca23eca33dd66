"""A small English corpus that every Python installation already carries.

It needs no download and no data file, so the demo and the tests run offline
on any fresh machine. Its documents are

* the 79 topics of the Python language reference that ``help()`` shows, shipped
  as ``pydoc_data.topics`` (one document per topic), and
* the docstrings of the standard library's public modules and of their public
  classes, functions and methods (one document per docstring with at least two
  sentences), read from the source files with :mod:`ast` -- nothing is imported,
  so no module's import-time side effects run.

Only prose is kept: code examples, indented blocks, grammar rules, tables,
headings and doctest lines are dropped, and paragraphs are cut into sentences
by :func:`~minibert.corpus.split_sentences`. The exact size depends a little on
the Python version. It is a demonstration corpus, not a benchmark.

Parsing the standard library takes a couple of seconds, so the result is kept
in the cache folder (``$MINIBERT_CACHE``, default ``~/.cache/minibert``),
keyed by the Python version, and in memory.
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
from .paths import default_cache_dir

__all__ = ["builtin_corpus", "default_cache_dir", "prose_sentences"]

BUILD_VERSION = 1             # bump when the cleaning rules change, to invalidate caches
# Not prose, or not meant to be read: tests, the IDLE and turtle demos, the topics
# (used separately), and the two joke modules.
_SKIP_MODULES = {"test", "idlelib", "turtledemo", "pydoc_data", "this", "antigravity", "lib2to3", "ensurepip"}
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


def _topic_documents() -> list[list[str]]:
    from pydoc_data.topics import topics
    return [s for s in (prose_sentences(topics[k]) for k in sorted(topics)) if s]


def _stdlib_files() -> list[Path]:
    """The source file of each public top-level standard-library module (``__init__.py`` for packages)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    names = getattr(sys, "stdlib_module_names", None)
    if names is None:  # Python < 3.10: every .py file and package at the top of the stdlib folder
        names = {p.stem for p in stdlib.glob("*.py")} | {p.parent.name for p in stdlib.glob("*/__init__.py")}
    files = []
    for name in sorted(names):
        if name.startswith("_") or name in _SKIP_MODULES:
            continue
        for candidate in (stdlib / f"{name}.py", stdlib / name / "__init__.py"):
            if candidate.is_file():
                files.append(candidate)
                break
    return files


def _docstring_documents() -> list[list[str]]:
    docs: list[list[str]] = []
    for path in _stdlib_files():
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
            if len(sentences) >= 2:           # a one-sentence document cannot give an IsNext pair
                docs.append(sentences)
    return docs


def _cache_key() -> str:
    h = hashlib.sha256(f"v{BUILD_VERSION} {sys.version} {sysconfig.get_paths()['stdlib']}".encode())
    return h.hexdigest()[:16]


def builtin_corpus(cache_dir: str | os.PathLike | None | bool = None) -> Corpus:
    """The built-in corpus (see the module docstring).

    Args:
        cache_dir: folder for the cached build; ``None`` for :func:`default_cache_dir`,
            ``False`` to neither read nor write a cache file.
    """
    key = _cache_key()
    if key in _memory:
        return _memory[key]
    path = None
    if cache_dir is not False:
        path = Path(cache_dir if cache_dir is not None else default_cache_dir()) / f"builtin-corpus-{key}.json"
        if path.is_file():
            try:
                documents = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                documents = None                     # unreadable cache: build again
            try:   # a cache that is not documents of sentences (damaged, or written by hand): build again
                corpus = _make(documents) if isinstance(documents, list) and len(documents) >= 2 else None
            except TypeError:
                corpus = None
            if corpus is not None:
                _memory[key] = corpus
                return corpus
    documents = _topic_documents() + _docstring_documents()
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(documents), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass                                     # a read-only cache is not an error
    corpus = _make(documents)
    _memory[key] = corpus
    return corpus


def _make(documents: list[list[str]]) -> Corpus:
    return Corpus(
        "builtin", documents,
        description=f"Python {sys.version_info.major}.{sys.version_info.minor} reference topics "
                    "(pydoc_data.topics) and standard-library docstrings")
