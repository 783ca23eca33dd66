"""Reading text files with error messages that say which file, where, and what to do."""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["read_text"]


def read_text(path: str | os.PathLike, what: str = "file", encoding: str = "utf-8") -> str:
    """Return the whole text of ``path`` with ``\\r\\n`` and lone ``\\r`` line ends turned into ``\\n``.

    Args:
        path: the file.
        what: how to call the file in error messages ("corpus file", "vocabulary file", ...).
        encoding: the text encoding; UTF-8 unless you know better.

    Raises:
        FileNotFoundError: the file does not exist.
        IsADirectoryError: the path is a folder.
        ValueError: bytes that are not valid in ``encoding``, with their byte offset and line.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{what} {path} does not exist; check the path "
                                f"(relative paths start from {Path.cwd()}).")
    if path.is_dir():
        raise IsADirectoryError(f"{what} {path} is a folder; give the path of a text file inside it.")
    data = path.read_bytes()
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        bad = data[e.start:e.end].hex(" ")
        raise ValueError(
            f"{what} {path}: byte offset {e.start} (line {line}, column {column}) holds byte(s) "
            f"{bad} that are not valid {encoding}. Convert the file to {encoding} "
            f"(for example with iconv) or pass the right encoding.") from None
    if text.startswith("\ufeff"):
        text = text[1:]                # a byte-order mark is not text
    # Windows (\r\n) and classic Mac OS (\r alone) line ends, as Python's universal newlines
    return text.replace("\r\n", "\n").replace("\r", "\n")
