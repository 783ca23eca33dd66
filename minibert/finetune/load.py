"""The model to fine-tune: from a minibert run folder, or any folder in Hugging Face's BERT format.

A run folder (``minibert pretrain --out DIR``) holds its model in ``DIR/model``; a model folder holds
``config.json``, ``model.safetensors`` and ``vocab.txt``.  The weights may be a ``BertModel``'s (no
prefix), a ``BertForPreTraining``'s or ``BertForMaskedLM``'s (``bert.`` and their ``cls.`` heads, which
fine-tuning does not use) or a ``BertForSequenceClassification``'s.  Every encoder weight must be
there; the pooler may be missing (``BertForMaskedLM`` has none: it starts from N(0, 0.02), as in
transformers), and the classifier starts from N(0, 0.02) and zero unless the checkpoint has one of the
task's size.
"""
from __future__ import annotations

from pathlib import Path

from ..data.tokenizer import WordPieceTokenizer
from ..model.config import BertConfig
from ..model.hf_io import load_weights
from ..model.state_dict import canonical_name
from .model import CLASSIFIER, BertForSequenceClassification

OPTIONAL = ("bert.pooler.", CLASSIFIER + ".")      # what a checkpoint may lack


def model_folder(path: Path) -> Path:
    """The folder that holds the model: ``path`` itself, or a run folder's ``model/``."""
    path = Path(path)
    if (path / "config.json").is_file():
        return path
    if (path / "model" / "config.json").is_file():
        return path / "model"
    if not path.is_dir():
        raise FileNotFoundError(f"--model {path}: no such folder")
    raise FileNotFoundError(f"--model {path}: neither a model folder (config.json, model.safetensors, vocab.txt) "
                            f"nor a minibert run folder (model/ inside)")


def load(path: Path, num_labels: int, dtype="float32", device="cpu", seed=0, mixed_precision=False,
         kernels="reference", random_init=False) -> tuple:
    """(model, tokenizer, note): the note says what was not in the checkpoint and starts anew.
    ``random_init``: the folder's config and vocabulary, every weight drawn anew (by ``seed``): the start
    that pre-training is measured against."""
    folder = model_folder(path)
    vocab = folder / "vocab.txt"
    if not vocab.is_file():
        raise FileNotFoundError(f"{folder} has no vocab.txt: the model's vocabulary is needed to read the task")
    tokenizer = WordPieceTokenizer.from_vocab_file(vocab)
    config = BertConfig.from_json_file(folder / "config.json")
    if config.vocab_size != tokenizer.vocab_size:
        raise ValueError(f"{folder}: vocab.txt has {tokenizer.vocab_size} tokens, config.json's vocab_size is "
                         f"{config.vocab_size}")
    model = BertForSequenceClassification(config, num_labels=num_labels, seed=seed, dtype=dtype, device=device,
                                          mixed_precision=mixed_precision, kernels=kernels)
    if random_init:
        return model, tokenizer, f"every weight new, from N(0, {config.initializer_range}) (--random-init)"
    ours = model.state_dict()
    state = {}
    for key, value in load_weights(folder).items():
        name = canonical_name(model.prefix, key, model.head_prefixes)     # "bert." added where it belongs
        if name.startswith("cls.") or name.endswith("embeddings.position_ids"):
            continue                                        # the pre-training heads: not used here
        if name.startswith(CLASSIFIER + ".") and tuple(value.shape) != tuple(ours[name].shape):
            continue                                        # another task's classifier: a new one
        state[name] = value
    try:
        result = model.load_state_dict(state, strict=False)
    except ValueError as exc:
        raise ValueError(f"the weights in {folder} cannot be loaded: {exc}") from None
    lacking = [n for n in result.missing if not n.startswith(OPTIONAL)]
    if lacking or result.unexpected:
        raise ValueError(f"{folder} is not a BERT of this config: "
                         + "; ".join(f"{what} {', '.join(names[:6])}" + (" ..." if len(names) > 6 else "")
                                     for what, names in (("missing", lacking), ("unknown", result.unexpected))
                                     if names))
    new = sorted({n.rsplit(".", 2)[0] if n.startswith("bert.") else CLASSIFIER for n in result.missing})
    note = f"new, from N(0, {config.initializer_range}): {', '.join(new)}" if new else "every weight from the checkpoint"
    return model, tokenizer, note
