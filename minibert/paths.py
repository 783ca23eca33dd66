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
