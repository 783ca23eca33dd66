"""The messages between the checker and its worker process: a JSON header, then raw array bytes.

A frame is the header's length and the bytes' length, the header (JSON), and
the array bytes that ``codec.Encoder`` set aside.  Only the standard library
is imported: the worker imports this module before the student's file, in
isolated mode.
"""
from __future__ import annotations

import json
import struct

_HEAD = struct.Struct("<QQ")          # header length, length of the array bytes that follow
MAX_FRAME = 64 << 20                  # the most the checker reads in one answer (the largest is ~1 MB)


class ProtocolError(Exception):
    """A message that does not follow the protocol (cut short, malformed, too large)."""


# ------------------------------------------------------------------------------ messages
def write_frame(stream, header: dict, blobs: list) -> None:
    text = json.dumps(header, separators=(",", ":")).encode()
    stream.write(b"".join([_HEAD.pack(len(text), sum(len(b) for b in blobs)), text, *blobs]))
    stream.flush()


def read_frame(stream):
    """(header, array bytes) of the next message; EOFError when the other side is gone."""
    n_text, n_blob = _HEAD.unpack(_read_exactly(stream, _HEAD.size))
    if n_text + n_blob > MAX_FRAME:
        raise ProtocolError(f"a message of {n_text + n_blob} bytes (at most {MAX_FRAME})")
    text = _read_exactly(stream, n_text)
    blob = _read_exactly(stream, n_blob)
    try:
        header = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"an unreadable header ({exc})") from None
    if not isinstance(header, dict):
        raise ProtocolError("a header that is not an object")
    return header, blob


def _read_exactly(stream, n: int) -> bytes:
    data = stream.read(n)
    if data is None or len(data) < n:
        raise EOFError
    return data
