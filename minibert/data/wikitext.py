"""WikiText-2 (raw, v1): download or find it, verify it, read it as a corpus.

WikiText-2 (Merity, Xiong, Bradbury and Socher, 2016) is text from Wikipedia's
Good and Featured articles, licensed CC BY-SA 3.0. The "raw" version keeps the
original characters and case. Its files have one paragraph per line, every
line starting with a space, and headings such as `` = Title = `` (an article)
and `` = = Section = = ``.

The original archive's address (an Amazon S3 bucket) no longer serves it; the
dataset's first author hosts the same archive at :data:`WIKITEXT2_URL`. Whether
downloaded or found in a local folder, every split is checked against the
SHA-256 below before it is used.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.request
import zipfile
from pathlib import Path

from .documents import Corpus, split_sentences
from ..paths import default_data_dir
from ..textio import read_text

__all__ = ["WIKITEXT2_URL", "WIKITEXT2_ARCHIVE_SHA256", "WIKITEXT2_SPLITS", "default_data_dir",
           "find_wikitext2", "download_wikitext2", "load_wikitext2", "parse_wikitext"]

WIKITEXT2_URL = "https://wikitext.smerity.com/wikitext-2-raw-v1.zip"
WIKITEXT2_ARCHIVE_SHA256 = "ef7edb566e3e2b2d31b29c1fdb0c89a4cc683597484c3dc2517919c615435a11"
FOLDER = "wikitext-2-raw"              # the folder inside the archive, and under the data dir

# split -> (file name, SHA-256 of the file's bytes)
WIKITEXT2_SPLITS = {
    "train": ("wiki.train.raw", "6707892fa3788b5ab9ed78ab5ff37d9fe825f6011a2ad4fcd6a6d467f0e7da57"),
    "valid": ("wiki.valid.raw", "4cd0f6876d07a413aa911261ff6d363c72d757d47f0fdd6015702014c89cb9c7"),
    "test": ("wiki.test.raw", "173c87a53759e0201f33e0ccf978e510c2042d7f2cb78229d9a50d79b9e7dd08"),
}


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check_splits(splits) -> tuple[str, ...]:
    if isinstance(splits, str):
        splits = (splits,)
    splits = tuple(splits)
    unknown = [s for s in splits if s not in WIKITEXT2_SPLITS]
    if unknown or not splits:
        raise ValueError(f"unknown WikiText-2 split(s) {unknown or splits}: use some of "
                         f"{', '.join(WIKITEXT2_SPLITS)}.")
    return splits


def _verify(path: Path, split: str) -> None:
    expected = WIKITEXT2_SPLITS[split][1]
    actual = sha256_file(path)
    if actual != expected:
        raise ValueError(f"{path}: SHA-256 is {actual} but WikiText-2 (raw, v1) {split} has {expected}. "
                         "The file is damaged or a different version (the tokenized 'wiki.*.tokens' "
                         "files, or CRLF line ends?); delete it and download again.")


def find_wikitext2(data_dir: str | os.PathLike, splits=("valid", "test")) -> dict[str, Path]:
    """The verified files of ``splits`` in the folder ``data_dir``.

    The files may sit in ``data_dir`` itself or in ``data_dir/wikitext-2-raw/`` (the archive's layout).

    Raises:
        FileNotFoundError: ``data_dir`` or a split's file is missing (the message says which
            splits the folder does have).
        ValueError: a file's SHA-256 is wrong.
    """
    root = Path(data_dir)
    splits = _check_splits(splits)
    if not root.is_dir():
        raise FileNotFoundError(f"WikiText-2 folder {root} does not exist; pass the folder that holds "
                                "wiki.valid.raw etc. (--data-dir), or let minibert download the data set "
                                "(download=True; the command line does when no --data-dir is given).")
    found: dict[str, Path] = {}
    for split in WIKITEXT2_SPLITS:
        name = WIKITEXT2_SPLITS[split][0]
        for candidate in (root / name, root / FOLDER / name):
            if candidate.is_file():
                found[split] = candidate
                break
    missing = [s for s in splits if s not in found]
    if missing:
        have = ", ".join(found) or "none"
        raise FileNotFoundError(
            f"WikiText-2 folder {root} has no {', '.join(WIKITEXT2_SPLITS[s][0] for s in missing)} "
            f"(split(s) {', '.join(missing)}); it has: {have}. Ask only for the splits it has "
            f"(splits=({', '.join(repr(s) for s in found)})) or download the full data set "
            "(download=True; the command line does when no --data-dir is given).")
    for split in splits:
        _verify(found[split], split)
    return {s: found[s] for s in splits}


def download_wikitext2(data_dir: str | os.PathLike | None = None, url: str | None = None,
                       verify_archive: bool = True, timeout: float = 60.0) -> Path:
    """Download the archive and unpack the three splits into ``data_dir/wikitext-2-raw``.

    Args:
        data_dir: default :func:`default_data_dir`.
        url: default :data:`WIKITEXT2_URL`; a ``file://`` URL works too.
        verify_archive: check the archive against :data:`WIKITEXT2_ARCHIVE_SHA256` (the
            splits are always checked against :data:`WIKITEXT2_SPLITS`).
        timeout: seconds to wait for the server.

    The archive goes to a temporary file next to its destination, and the files are
    moved into place (an atomic rename) only after every check has passed, so an
    interrupted download never leaves a half-written split behind.

    Returns:
        the folder holding ``wiki.train.raw``, ``wiki.valid.raw`` and ``wiki.test.raw``.
    """
    data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
    url = url or WIKITEXT2_URL
    archive_sha256 = WIKITEXT2_ARCHIVE_SHA256 if verify_archive else None
    target = data_dir / FOLDER
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=data_dir, prefix=".download-") as tmp:
        archive = Path(tmp) / "wikitext-2-raw-v1.zip"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response, open(archive, "wb") as out:
                shutil.copyfileobj(response, out, 1 << 20)
        except OSError as e:  # URLError, HTTPError and socket errors are all OSErrors
            raise OSError(f"could not download WikiText-2 from {url}: {e}. Without internet access, "
                          f"copy wiki.*.raw into {target} (or pass data_dir= a folder that has them).") from None
        if archive_sha256 is not None and sha256_file(archive) != archive_sha256:
            raise ValueError(f"the file downloaded from {url} is not the WikiText-2 (raw, v1) archive "
                             f"(SHA-256 {sha256_file(archive)}, expected {archive_sha256}).")
        try:
            with zipfile.ZipFile(archive) as zf:
                members = {Path(m).name: m for m in zf.namelist()}
                for split, (name, _) in WIKITEXT2_SPLITS.items():
                    if name not in members:
                        raise ValueError(f"the archive from {url} has no {name}.")
                    part = Path(tmp) / name
                    with zf.open(members[name]) as src, open(part, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
                    _verify(part, split)
        except zipfile.BadZipFile:
            raise ValueError(f"the file downloaded from {url} is not a zip archive.") from None
        for name, _ in WIKITEXT2_SPLITS.values():
            os.replace(Path(tmp) / name, target / name)
    return target


def parse_wikitext(text: str) -> list[list[str]]:
    """WikiText raw text -> documents of sentences.

    Each top-level heading `` = Title = `` starts a new document (one per article);
    section headings (`` = = ... = = ``) and empty lines are dropped; each paragraph
    line is cut into sentences by :func:`~minibert.data.corpus.split_sentences`. WikiText's
    escaped separators inside numbers and words are undone: ``@-@`` -> ``-``,
    ``@,@`` -> ``,``, ``@.@`` -> ``.`` (``"1 @,@ 000"`` -> ``"1,000"``).
    """
    documents: list[list[str]] = []
    current: list[str] = []
    for line in text.split("\n"):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("= ") and stripped.endswith(" ="):
            if not stripped.startswith("= ="):      # an article title: a new document
                if current:
                    documents.append(current)
                current = []
            continue
        line = line.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
        current.extend(split_sentences(line))
    if current:
        documents.append(current)
    return documents


def load_wikitext2(splits=("valid", "test"), data_dir: str | os.PathLike | None = None,
                   download: bool = False) -> Corpus:
    """WikiText-2 (raw, v1) as a :class:`~minibert.data.corpus.Corpus`, one document per article.

    Args:
        splits: which splits to join, in order ("train", "valid", "test"). Valid + test
            (about 455k words) serve as a small pre-training corpus when train is missing.
        data_dir: a folder that holds the ``wiki.*.raw`` files (directly or in
            ``wikitext-2-raw/``), or where to download them. Default: :func:`default_data_dir`
            (``$MINIBERT_DATA``, else ``~/.cache/minibert/data``).
        download: fetch the archive from :data:`WIKITEXT2_URL` into ``data_dir`` if the
            files are not there yet.
    """
    splits = _check_splits(splits)
    folder = Path(data_dir) if data_dir is not None else default_data_dir()
    try:
        files = find_wikitext2(folder, splits)
    except FileNotFoundError:
        if not download:
            raise
        download_wikitext2(folder)
        files = find_wikitext2(folder, splits)
    documents: list[list[str]] = []
    for split in splits:
        documents.extend(parse_wikitext(read_text(files[split], what="WikiText-2 file")))
    corpus = Corpus(f"wikitext-2 {'+'.join(splits)}", documents,
                    description=f"WikiText-2 (raw, v1) {', '.join(splits)} from {folder}")
    return corpus.check(min_documents=2)
