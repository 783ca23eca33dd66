"""The checks on what a user hands the model: token ids, labels, flags, seeds, dtypes, gradients.

Each check turns a value into what the model computes with (an int64 array
on the model's device, a bool, a dtype) or raises one clear error naming
the argument; nested lists and PyTorch tensors are accepted where arrays are.
"""
from __future__ import annotations

import numpy as np

from ..backend import on_host, resolve_dtype, to_numpy
from ..checks import is_int, is_number
from ..ops.common import get_array_module
from ..constants import IGNORE_INDEX


def host_array(value):
    """A weight as an array: NumPy and CuPy arrays as they are, PyTorch tensors via NumPy."""
    value = untorch(value)
    if hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, np.generic):
        arr = value
    else:
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"not an array ({type(value).__name__}): {exc}") from None
    if arr.dtype.kind not in "fiub":
        raise TypeError(f"expected numbers, got an array of {arr.dtype}")
    return arr


def untorch(value):
    """A PyTorch tensor (a checkpoint's weight, a tokenizer's ``return_tensors="pt"``) as a NumPy array.

    bfloat16 is widened to float32 first (exact: a bfloat16 is the upper half
    of a float32), since NumPy has no bfloat16.
    """
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        t = value.detach().cpu()
        return (t.float() if str(t.dtype) == "torch.bfloat16" else t).numpy()
    return value


def check_loss_scale(loss_scale):
    """A ``ValueError`` unless ``loss_scale`` is a positive finite number, or a 0-d array on a
    device (a GPU's ``LossScaler`` keeps its scale there: reading it to check would stall the step)."""
    if not on_host(loss_scale) and getattr(loss_scale, "shape", None) == ():
        return
    if not is_number(loss_scale) or not (0 < loss_scale < float("inf")):
        raise ValueError(f"loss_scale must be a positive finite number, got {loss_scale!r}")


def check_loss_counts(loss_counts):
    """None, or (masked tokens, sequences) as two positive ints; a ``ValueError`` otherwise."""
    if loss_counts is None:
        return None
    if (not isinstance(loss_counts, (tuple, list)) or len(loss_counts) != 2
            or not all(is_int(n) and n >= 1 for n in loss_counts)):
        raise ValueError(f"loss_counts must be None or (masked tokens, sequences), two positive ints, "
                         f"got {loss_counts!r}")
    return int(loss_counts[0]), int(loss_counts[1])


def is_seed(value):
    return is_int(value) and value >= 0


def check_dtype(dtype):
    """The model's dtype from "float32"/"float64" (or the NumPy types); names the choices otherwise."""
    choices = "dtype must be one of ['float32', 'float64']"
    if dtype is None or not isinstance(dtype, (str, type, np.dtype)):
        raise ValueError(f"{choices}, got {dtype!r}")
    try:
        return resolve_dtype(dtype)
    except TypeError:
        raise ValueError(f"{choices}, got {dtype!r}") from None


def check_ids(xp, config, name, value, shape=None, upper=None, allowed=None):
    """Turn ``value`` into an int array of ``xp`` (NumPy or CuPy) and check it.

    ``shape``: the shape it must have (that of input_ids), or None for input_ids
    itself (2-D, at most ``config.max_position_embeddings`` long); ``upper``: the
    values must be in [0, upper); ``allowed``: or among these values.
    A host array is checked on the host, before it is copied: a GPU step never waits for the checks.
    """
    value = int_array(config, name, value, shape, upper, allowed)
    return None if value is None else xp.asarray(value, dtype=xp.int64)


def int_array(config, name, value, shape=None, upper=None, allowed=None):
    """``check_ids``'s checks on ``value``, which stays where it is (a list becomes a NumPy array)."""
    if value is None:
        return None
    value = untorch(value)
    if isinstance(value, (list, tuple)):
        try:
            value = np.asarray(value)
        except ValueError as exc:
            raise ValueError(f"{name} must be a rectangular (batch, seq_len) array of ints; "
                             f"the rows of the nested list have different lengths") from exc
        if value.size == 0:      # [] and [[]]: no tokens, not floats (NumPy's default dtype)
            value = value.astype(np.int64)
    if not hasattr(value, "dtype") or not hasattr(value, "shape"):
        raise TypeError(f"{name} must be an array or a nested list of ints, got {type(value).__name__}")
    if value.dtype.kind not in "iu":
        if value.dtype.kind == "b" and name == "attention_mask":
            value = value.astype(np.int64)
        else:
            raise TypeError(f"{name} must hold integers, got dtype {value.dtype}"
                            + (" (token ids are indices: convert with .astype(int) "
                               "if the values are whole numbers)" if value.dtype.kind == "f" else ""))
    if shape is None:
        if value.ndim != 2:
            raise ValueError(f"{name} must be 2-D (batch, seq_len), got shape {tuple(value.shape)}; "
                             f"wrap a single sequence in a list: [[...]]")
        B, T = value.shape
        if B == 0 or T == 0:
            raise ValueError(f"{name} must have at least one sequence and one token, "
                             f"got shape {tuple(value.shape)}")
        if T > config.max_position_embeddings:
            raise ValueError(f"{name} has sequences of length {T}, longer than "
                             f"max_position_embeddings={config.max_position_embeddings}; "
                             f"truncate them to at most that")
    elif tuple(value.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(value.shape)} but input_ids has shape "
                         f"{tuple(shape)}; they must match")
    if value.size:
        lo, hi = int(value.min()), int(value.max())
        if allowed is not None:
            bad = set(to_numpy(get_array_module(value).unique(value)).tolist()) - set(allowed)
            if bad:
                raise ValueError(f"{name} may only hold {sorted(allowed)}, found {sorted(bad)[:5]}")
        elif upper is not None and (lo < 0 or hi >= upper):
            raise ValueError(f"{name} must be in [0, {upper}), found values from {lo} to {hi}")
    return value


def prepare_inputs(xp, config, input_ids, token_type_ids, attention_mask):
    """input_ids, token_type_ids, attention_mask checked, as int64 arrays of ``xp`` (the two
    optional ones filled in: segment 0 everywhere, every position attended)."""
    c = config
    if input_ids is None:            # the one input a forward cannot do without
        raise TypeError("input_ids is required: a (batch, seq_len) array or nested list of token ids")
    ids = check_ids(xp, c, "input_ids", input_ids, upper=c.vocab_size)
    shape = ids.shape
    types = check_ids(xp, c, "token_type_ids", token_type_ids, shape, upper=c.type_vocab_size)
    mask = check_ids(xp, c, "attention_mask", attention_mask, shape, allowed=(0, 1))
    if types is None:
        types = xp.zeros(shape, dtype=xp.int64)
    if mask is None:
        mask = xp.ones(shape, dtype=xp.int64)
    return ids, types, mask


def check_labels(xp, config, mlm_labels, nsp_labels, shape):
    """{"mlm": (B, T) int64 or None, "nsp": (B,) int64 or None, "positions": (N,) or None}, checked
    against the batch ``shape``.  "positions" are the flat indices of the labelled tokens, found on
    the host when the labels come from there (None otherwise: the model finds them)."""
    V = config.vocab_size
    out = {"mlm": None, "nsp": None, "positions": None}
    if mlm_labels is not None:
        m = int_array(config, "mlm_labels", mlm_labels, shape)  # range checked below (-100 allowed)
        bad = (m != IGNORE_INDEX) & ((m < 0) | (m >= V))
        if m.size and bool(bad.any()):
            raise ValueError(f"mlm_labels must be -100 (ignored) or a token id in [0, {V}), "
                             f"found {int(m[bad][0])}")
        if on_host(m):
            out["positions"] = xp.asarray(np.flatnonzero(m.reshape(-1) != IGNORE_INDEX))
        out["mlm"] = xp.asarray(m, dtype=xp.int64)
    if nsp_labels is not None:
        n = untorch(nsp_labels)
        if isinstance(n, (list, tuple)):
            n = np.asarray(n)
        if not hasattr(n, "dtype") or n.dtype.kind not in "iu":
            raise TypeError(f"nsp_labels must be an array of ints, got "
                            f"{getattr(n, 'dtype', type(n).__name__)}")
        if tuple(n.shape) != (shape[0],):
            raise ValueError(f"nsp_labels must have shape ({shape[0]},) (one per sequence), "
                             f"got {tuple(n.shape)}")
        if n.size and (int(n.min()) < 0 or int(n.max()) > 1):
            raise ValueError("nsp_labels must be 0 (B follows A) or 1 (B is random)")
        out["nsp"] = xp.asarray(n, dtype=xp.int64)
    return out


def as_grad(xp, dtype, name, g, shape):
    """An upstream gradient given to ``backward``: an array of numbers of ``shape``, as ``dtype`` on ``xp``."""
    g = untorch(g)
    if getattr(g, "dtype", np.dtype(float)).kind not in "fiu":
        raise TypeError(f"{name} must be an array of numbers, got {getattr(g, 'dtype', type(g).__name__)}")
    try:
        g = xp.asarray(g, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of numbers, got {type(g).__name__} ({exc})") from None
    if tuple(g.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)} (that of the forward output), "
                         f"got {tuple(g.shape)}")
    return g
    return g
