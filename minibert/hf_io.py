"""Hugging Face's on-disk format: ``config.json`` + ``model.safetensors``.

Written with the ``safetensors`` package's NumPy API, so saving and loading
never needs PyTorch.  Tied weights are stored once, as transformers does: the
MLM decoder is the word-embedding matrix and is not written again.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from .backend import to_numpy
from .config import BertConfig

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
# buffers some transformers versions save that are not parameters
_IGNORED = ("embeddings.position_ids",)


def save_pretrained(model, directory) -> None:
    from safetensors.numpy import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model.config.to_json_file(directory / CONFIG_NAME)
    tensors = {name: np.ascontiguousarray(to_numpy(a)) for name, a in model.params.params.items()}
    # write to a temporary file and rename, so a crash never leaves half a file
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".safetensors")
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata={"format": "pt"})
        os.replace(tmp, directory / WEIGHTS_NAME)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load_weights(directory) -> dict:
    """{name: NumPy array} from ``directory/model.safetensors``."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    path = Path(directory) / WEIGHTS_NAME
    if not path.is_file():
        other = [p.name for p in Path(directory).glob("*.bin")]
        hint = (f" (found {other}: re-save it with safetensors, e.g. transformers' "
                f"save_pretrained(..., safe_serialization=True))" if other else "")
        raise FileNotFoundError(f"no {WEIGHTS_NAME} in {directory}{hint}")
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise ValueError(f"{path} is not a readable safetensors file: {exc}") from exc


def from_pretrained(cls, directory, dtype="float32", device="cpu", seed=0, mixed_precision=False):
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"model directory not found: {directory}")
    config = BertConfig.from_json_file(directory / CONFIG_NAME)
    state = {k: v for k, v in load_weights(directory).items() if not k.endswith(_IGNORED)}
    model = cls(config, seed=seed, dtype=dtype, device=device, mixed_precision=mixed_precision)
    if model.prefix == "":
        # a bare encoder ignores the pre-training heads of a BertForPreTraining checkpoint
        state = {k: v for k, v in state.items() if not k.startswith("cls.")}
    model.load_state_dict(state)
    return model
