"""Reading text files with error messages that say which file, where, and what to do."""
from __future__ import annotations

import os
import shlex
from pathlib import Path

__all__ = ["read_text", "write_whole"]


# the first bytes of compressed files and archives, which are no text in any encoding
_PACKED = {b"\x1f\x8b": ("gzip-compressed", "gunzip -k"), b"PK\x03\x04": ("a zip archive", "unzip"),
           b"BZh": ("bzip2-compressed", "bunzip2 -k"), b"\xfd7zXZ\x00": ("xz-compressed", "unxz -k"),
           b"\x28\xb5\x2f\xfd": ("zstd-compressed", "unzstd")}


def _conversion_advice(path: Path, data: bytes, encoding: str) -> str:
    """How to convert the file: a command that works, for the likely source encoding (or the packing)."""
    for magic, (what, command) in _PACKED.items():
        if data.startswith(magic):
            return f"It is {what}, not text: unpack it first (`{command} {shlex.quote(str(path))}`) and give the text."
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        source, why = "UTF-16", "the file starts with UTF-16's byte-order mark (Windows' \"Unicode\")"
    else:
        source, why = "CP1252", ("CP1252, Windows' Western European encoding, is the usual one, and "
                                 f"`file {shlex.quote(str(path))}` may name another")
    converted = path.with_name(f"{path.stem}.{encoding.replace('-', '')}{path.suffix}")
    return (f"Convert it to {encoding} and give the converted file instead, e.g. "
            f"`iconv -f {source} -t {encoding.upper()} {shlex.quote(str(path))} > "
            f"{shlex.quote(str(converted))}`: {why}.")


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
            f"{bad} that are not valid {encoding}. {_conversion_advice(path, data, encoding)}") from None
    if text.startswith("\ufeff"):
        text = text[1:]                # a byte-order mark is not text
    # Windows (\r\n) and classic Mac OS (\r alone) line ends, as Python's universal newlines
    return text.replace("\r\n", "\n").replace("\r", "\n")


def write_whole(path, write) -> None:
    """``write(file)`` into a temporary file beside ``path``, renamed over ``path`` once complete.

    A failure (a full disk) leaves ``path`` as it was, and no temporary file.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
