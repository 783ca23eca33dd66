"""Loading weights into a model by name: Hugging Face's names, checked all at once before any copy."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..backend import to_numpy
from ..checks import check_flag
from .inputs import host_array

LEGACY_SUFFIXES = {".gamma": ".weight", ".beta": ".bias"}   # LayerNorm in the original BERT


def canonical_name(prefix, key, heads=("cls.",)):
    """``key`` as the model names it: ``bert.`` as ``prefix`` says (not on a head's name, which starts with one
    of ``heads``), LayerNorm gamma/beta as weight/bias."""
    for old, new in LEGACY_SUFFIXES.items():
        if key.endswith("LayerNorm" + old):
            key = key[: -len(old)] + new
    if prefix and not key.startswith(prefix) and not key.startswith(heads):
        return prefix + key
    if not prefix and key.startswith("bert."):
        return key[len("bert."):]
    return key


def _checked(model, key, value, shape):
    """``value`` as an array in the model's dtype and on its device, or a string saying what is wrong."""
    try:
        arr = host_array(value)
    except TypeError as exc:
        return f"{key}: {exc}"
    if tuple(arr.shape) != tuple(shape):
        return f"{key}: expected shape {tuple(shape)}, got {tuple(arr.shape)}"
    if arr.dtype.kind != "f":
        return f"{key}: a weight must be floating point, got dtype {arr.dtype}"
    source = arr
    with np.errstate(over="ignore"):        # an overflow is reported just below
        arr = model.xp.asarray(arr, dtype=model.dtype)
    n_bad = int(model.xp.count_nonzero(~model.xp.isfinite(arr)))
    if n_bad:
        rounded = ("" if not bool(np.isfinite(source).all()) else
                   f" once rounded to the model's {model.dtype} (from {source.dtype})")
        return f"{key}: {n_bad} of {arr.size} values are NaN or infinite{rounded}"
    return arr


def _read(model, state, own, tied):
    """Every entry of ``state`` sorted out: values, tied aliases, unknown keys, problems, names given."""
    values, aliases, unknown, bad, given = {}, {}, [], [], {}
    for key, value in state.items():
        # a head's names have no "bert." prefix: the pre-training heads' "cls.", a classifier's own
        name = canonical_name(model.prefix, str(key), getattr(model, "head_prefixes", ("cls.",)))
        if name in given:
            bad.append(f"{key} repeats {given[name]!r} (the same parameter)")
            continue
        given[name] = key
        if name not in own and name not in tied:
            unknown.append(key)
            continue
        arr = _checked(model, key, value, own[tied.get(name, name)].shape)
        if isinstance(arr, str):
            bad.append(arr)
            continue
        (aliases if name in tied else values)[name] = arr
    for alias, arr in aliases.items():
        target = tied[alias]
        if target not in values:          # the alias alone carries the tied weight
            values[target] = arr
        elif not np.array_equal(to_numpy(arr), to_numpy(values[target])):
            bad.append(f"{alias} differs from {target}, but minibert ties them")
    return values, unknown, bad, given


class LoadResult(NamedTuple):
    """What a ``load_state_dict(..., strict=False)`` left out: the model's names the state lacked
    (kept as they were), and the state's names the model has no place for (not used)."""
    missing: list
    unexpected: list

    def __str__(self) -> str:
        parts = [f"{what}: {name_list(names)}" for what, names in
                 (("absent, left as initialised", self.missing), ("unused", self.unexpected)) if names]
        return "; ".join(parts) or "every weight loaded"


def name_list(names, most: int = 6) -> str:
    """Parameter names in one short line: ``bert.pooler.dense.{weight, bias}``, at most ``most`` groups."""
    groups: dict[str, list[str]] = {}
    for name in names:
        stem, _, leaf = str(name).rpartition(".")
        groups.setdefault(stem, []).append(leaf)
    shown = [f"{stem}.{leaves[0]}" if len(leaves) == 1 else f"{stem}.{{{', '.join(leaves)}}}" if stem
             else ", ".join(leaves) for stem, leaves in groups.items()]
    more = len(shown) - most
    return ", ".join(shown[:most]) + (f" and {more} more" if more > 0 else "")


MOST = 4           # the problems an error names, of each kind: one line, however many weights are wrong


def _some(keys: list) -> str:
    """The list as Python writes it, or its first ``MOST`` names and how many more."""
    return str(keys) if len(keys) <= MOST else f"{keys[:MOST]} and {len(keys) - MOST} more"


def load_state_dict(model, state, strict=True) -> LoadResult:
    """``model.load_state_dict``: see there."""
    if not hasattr(state, "items"):
        raise TypeError(f"state must be a dict of arrays, got {type(state).__name__}")
    strict = check_flag("strict", strict)
    own, tied = model.params.params, model._tied()
    values, unknown, bad, given = _read(model, state, own, tied)
    # a name given with a bad shape or bad values is reported above, not as missing
    provided = {tied.get(name, name) for name in given}
    missing = [n for n in own if n not in provided]
    problems = []
    if strict and missing:
        problems.append(f"missing keys: {_some(missing)}")
    if strict and unknown:
        problems.append(f"unknown keys: {_some(unknown)}")
    if bad:                 # a model of other sizes than the checkpoint's: the first few say enough
        problems.append("; ".join(bad[:MOST]) + (f"; and {len(bad) - MOST} more" if len(bad) > MOST else ""))
    if problems:
        raise ValueError("load_state_dict: " + "; ".join(problems))
    for name, arr in values.items():
        own[name][...] = arr
    return LoadResult(missing, unknown)
