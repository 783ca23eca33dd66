"""Where minibert keeps what it downloads and what it caches.

``MINIBERT_CACHE`` and ``MINIBERT_DATA`` move the two folders; without them
both live under the per-user cache folder.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

APP_FOLDER = "minibert"          # under the user's cache folder
DATA_FOLDER = "data"             # downloaded data sets, under APP_FOLDER
TOKENIZED_FOLDER = "tokenized"   # tokenized corpora, under the cache folder


def user_cache_dir() -> Path:
    """The per-user cache folder: ``$XDG_CACHE_HOME`` or ``~/.cache`` (``%LOCALAPPDATA%`` on
    Windows, ``~/Library/Caches`` on macOS)."""
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"])
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def default_cache_dir() -> Path:
    """``$MINIBERT_CACHE``, or ``<user cache dir>/minibert``."""
    env = os.environ.get("MINIBERT_CACHE")
    if env:
        return Path(env)
    return user_cache_dir() / APP_FOLDER


def default_data_dir() -> Path:
    """Where downloaded data sets go: ``$MINIBERT_DATA``, else ``<user cache dir>/minibert/data``."""
    env = os.environ.get("MINIBERT_DATA")
    return Path(env) if env else user_cache_dir() / APP_FOLDER / DATA_FOLDER


def code_digest(*tops: Path) -> str:
    """A digest of NumPy's version and of every Python file under the folders ``tops`` (names and
    bytes): the key of a result kept in the cache folder, so that a change of code makes it again."""
    import hashlib

    import numpy as np
    digest = hashlib.sha256(np.__version__.encode())
    for top in tops:
        for path in sorted(Path(top).rglob("*.py")):
            digest.update(str(path.relative_to(top)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()
