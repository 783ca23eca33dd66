"""A WordPiece vocabulary: its special tokens, BERT's layout of them, reading ``vocab.txt``."""
from __future__ import annotations

import os
from pathlib import Path

from ..textio import read_text

__all__ = ["PAD", "UNK", "CLS", "SEP", "MASK", "SPECIAL_TOKENS", "bert_special_layout", "load_vocab",
           "vocab_is_cased"]

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)


def bert_special_layout(num_unused: int = 99) -> list[str]:
    """The special tokens where BERT's own vocabularies have them: ``[PAD]`` at id 0,
    ``[unused0]`` ... at ids 1..num_unused, then ``[UNK] [CLS] [SEP] [MASK]``.

    With the default 99 unused slots the ids are BERT's (0, 100, 101, 102, 103);
    ``num_unused=0`` packs the five special tokens into ids 0-4.
    """
    return ["[PAD]", *(f"[unused{i}]" for i in range(num_unused)), "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def load_vocab(path: str | os.PathLike) -> list[str]:
    """Read a ``vocab.txt``: one token per line, the line number (from 0) is its id.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not UTF-8 (with the byte offset), empty, a token listed twice, an empty
            line or a token with whitespace around it (with the line number).
    """
    path = Path(path)
    lines = read_text(path, what="vocabulary file").split("\n")
    if lines and lines[-1] == "":
        lines.pop()                     # the file's final newline
    vocab = lines
    if not vocab:
        raise ValueError(f"{path}: the vocabulary file is empty; it needs one token per line.")
    seen: dict[str, int] = {}
    for i, token in enumerate(vocab):
        _check_vocab_line(path, i + 1, token)
        if token in seen:
            raise ValueError(f"{path}, line {i + 1}: token {token!r} is already on line "
                             f"{seen[token] + 1}; every token must be listed once.")
        seen[token] = i
    return vocab


def _describe_whitespace(chars: str, kind: str = "") -> str:
    """``"  \\t"`` -> ``"2 spaces and a tab"`` (with ``kind="trailing"``: ``"2 trailing spaces
    and a trailing tab"``): whitespace named, since it cannot be seen."""
    names = {" ": "space", "\t": "tab", "\u00a0": "no-break space", "\u3000": "ideographic space"}
    counts: dict[str, int] = {}
    for c in chars:
        name = names.get(c, f"U+{ord(c):04X}")
        counts[name] = counts.get(name, 0) + 1
    kind = f"{kind} " if kind else ""
    parts = [f"{n} {kind}{name}s" if n > 1 else f"a {kind}{name}" for name, n in counts.items()]
    return " and ".join(parts)


def _check_vocab_line(path: Path, line: int, token: str) -> None:
    """A vocabulary line is one token: no empty line, no whitespace around it.

    The basic tokenizer splits text at whitespace, so a token with a space is never
    produced, and a line ``"[PAD] "`` would leave the vocabulary without ``[PAD]``.
    """
    if token == "" or token.isspace():
        what = "empty" if token == "" else f"only whitespace ({_describe_whitespace(token)})"
        raise ValueError(f"{path}, line {line}: the line is {what}; a vocab.txt has one token on every "
                         f"line and no blank lines. Delete the line, or, to keep the ids of the lines "
                         f"after it (the vocabulary of a trained model), write a token there that is not "
                         f"yet in the file, such as an [unusedN].")
    stripped = token.strip()
    if stripped != token:
        lead, trail = token[:len(token) - len(token.lstrip())], token[len(token.rstrip()):]
        where = " and ".join(_describe_whitespace(ws, side)
                             for side, ws in (("leading", lead), ("trailing", trail)) if ws)
        raise ValueError(f"{path}, line {line}: token {token!r} has {where}; a vocab.txt has one token "
                         f"per line with nothing around it. Remove the whitespace (make the line "
                         f"{stripped!r}).")


def vocab_is_cased(vocab) -> bool:
    """True if any ordinary token (not a bracketed special one) has an uppercase letter."""
    return any(t != t.lower() for t in vocab if not (t.startswith("[") and t.endswith("]")))
