"""Hugging Face's on-disk format: ``config.json`` + ``model.safetensors``.

Written with the ``safetensors`` package's NumPy API, so saving and loading
never needs PyTorch.  Tied weights are stored once, as transformers does: the
MLM decoder is the word-embedding matrix and is not written again.
"""
from __future__ import annotations

import errno
import json
import os
import re
import secrets
import warnings
from pathlib import Path

import numpy as np

from ..backend import to_numpy
from .config import BertConfig, as_path

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
# buffers some transformers versions save that are not parameters
_IGNORED = ("embeddings.position_ids",)
# why a pre-LN model is not written in this format: its parameters are BERT's (and one LayerNorm
# more), so transformers would load them without a complaint into layers that compute another function
PRE_LN_EXPORT = ("a pre-LN model (--pre-ln) cannot be saved as Hugging Face's BertForPreTraining, whose "
                 "layers are post-LN: LayerNorm(x + sublayer(x)), not x + sublayer(LayerNorm(x))")


def save_pretrained(model, directory) -> None:
    from safetensors.numpy import save_file

    if getattr(model, "pre_ln", False):
        raise ValueError(PRE_LN_EXPORT)
    directory = as_path(directory, "directory")
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(f"save_pretrained writes a folder (config.json and {WEIGHTS_NAME}); "
                                 f"{directory} is a file")
    directory.mkdir(parents=True, exist_ok=True)
    model.config.to_json_file(directory / CONFIG_NAME)
    tensors = {name: np.ascontiguousarray(to_numpy(a)) for name, a in model.params.params.items()}
    # write to a temporary file and rename, so a crash never leaves half a file
    tmp = str(directory / f".tmp-{os.getpid()}-{secrets.token_hex(4)}.safetensors")
    try:
        try:
            save_file(tensors, tmp, metadata={"format": "pt"})
        except OSError:
            raise
        except Exception as exc:     # safetensors reports a failed write (a full disk, say) as its own error
            raise _as_os_error(exc, tmp) from None
        os.chmod(tmp, 0o666 & ~_umask())   # safetensors makes the file private; other files of a model are not
        os.replace(tmp, directory / WEIGHTS_NAME)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _umask() -> int:
    """The process's umask, read without changing it (Linux); 0o022, the usual one, elsewhere."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            return next(int(line.split()[1], 8) for line in f if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError):
        return 0o022


def _as_os_error(exc: Exception, path: str) -> OSError:
    """safetensors' "... I/O error: No space left on device (os error 28)" as the OSError it stands for."""
    found = re.search(r"os error (\d+)", str(exc))
    code = int(found.group(1)) if found else errno.EIO
    return OSError(code, os.strerror(code) if found else str(exc), path)


INDEX_NAME = "model.safetensors.index.json"     # a checkpoint split into shards


def load_weights(directory) -> dict:
    """{name: NumPy array} from ``directory/model.safetensors`` (or its shards)."""
    directory = as_path(directory, "directory")
    path, index = directory / WEIGHTS_NAME, directory / INDEX_NAME
    if path.is_file():
        return read_safetensors(path)
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            files = sorted(set(weight_map.values()))
            if not files or not all(isinstance(f, str) and f for f in files):
                raise ValueError("every weight_map entry must name a file")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{index} is not a safetensors index (a weight_map of files): {exc!r}") from None
        state, source = {}, {}
        for name in files:
            if Path(name).name != name:
                raise ValueError(f"{index} names a file outside {directory}: {name!r}")
            for key, value in read_safetensors(directory / name).items():
                if key in source:       # which copy is meant? neither silently wins
                    raise ValueError(f"{key} is in both {source[key]} and {name} (in {directory}); "
                                     f"each tensor of a sharded checkpoint belongs to one shard")
                state[key], source[key] = value, name
        return state
    other = [p.name for p in directory.glob("*.bin")]
    hint = (f" (found {other}: re-save it with safetensors, e.g. transformers' "
            f"save_pretrained(..., safe_serialization=True))" if other else "")
    raise FileNotFoundError(f"no {WEIGHTS_NAME} in {directory}{hint}")


def read_safetensors(path) -> dict:
    """{name: NumPy array} from one safetensors file; bfloat16 tensors come back as float32.

    NumPy has no bfloat16, so the ``safetensors`` NumPy API refuses such
    files.  A bfloat16 number is the upper 16 bits of the float32 with the
    same sign, exponent and leading mantissa bits, so widening it is exact:
    shift the raw 16-bit words left by 16 and read them as float32.
    """
    from safetensors import SafetensorError, safe_open

    path = as_path(path, "path")
    if not path.is_file():
        raise FileNotFoundError(f"weights file not found: {path}")
    try:
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n)) if 0 < n < 100_000_000 else None
        if not isinstance(header, dict):
            raise ValueError("no safetensors header")
        out = {}
        with safe_open(str(path), framework="numpy") as f:
            for name in f.keys():
                info = header[name]
                if info["dtype"] != "BF16":
                    out[name] = f.get_tensor(name)
                    continue
                begin, end = info["data_offsets"]
                raw = np.fromfile(path, dtype="<u2", count=(end - begin) // 2, offset=8 + n + begin)
                out[name] = (raw.astype(np.uint32) << 16).view(np.float32).reshape(info["shape"])
        return out
    except (SafetensorError, OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is not a readable safetensors file: {exc}") from exc


def from_pretrained(cls, directory, dtype="float32", device="cpu", seed=0, mixed_precision=False, strict=True,
                    kernels="reference"):
    directory = as_path(directory, "directory")
    if not directory.is_dir():
        raise FileNotFoundError(f"model directory not found: {directory}")
    config = BertConfig.from_json_file(directory / CONFIG_NAME)
    # the arguments are checked before the weights are read
    model = cls(config, seed=seed, dtype=dtype, device=device, mixed_precision=mixed_precision, kernels=kernels)
    state = {k: v for k, v in load_weights(directory).items() if not k.endswith(_IGNORED)}
    if model.prefix == "":
        # a bare encoder ignores the pre-training heads of a BertForPreTraining checkpoint
        state = {k: v for k, v in state.items() if not k.startswith("cls.")}
    try:
        # refuses wrong shapes, non-floating tensors (bool, int) and NaN or infinite values
        result = model.load_state_dict(state, strict=strict)
    except ValueError as exc:
        hint = (" (a checkpoint saved without some of them, such as transformers' BertForMaskedLM without the "
                "pooler and the next-sentence head, loads with strict=False)" if strict and "missing keys" in
                str(exc) else "")
        raise ValueError(f"the weights in {directory} cannot be loaded: {exc}{hint}") from None
    model.loading_info = result
    if result.missing or result.unexpected:
        # many published BERT checkpoints lack the heads their task does not use: say so, in one line
        warnings.warn(f"{directory}: {result}", UserWarning, stacklevel=3)
    return model.eval()         # as transformers: a loaded model predicts, without dropout
