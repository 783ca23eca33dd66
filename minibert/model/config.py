"""BertConfig: the model's hyper-parameters, with Hugging Face's field names.

A ``config.json`` written by ``transformers`` loads here and the reverse, so a
minibert model directory is a Hugging Face model directory.
"""
from __future__ import annotations

import difflib
import json
import numbers
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

# google-research/bert's released sizes (L layers, H hidden, A heads); the
# feed-forward size is always 4H.
PRESETS = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
}

HIDDEN_ACTS = ("gelu", "gelu_new", "gelu_pytorch_tanh")


# config.json settings that change the arithmetic of a transformers BertModel
# away from the encoder minibert implements: (key, BERT's value, what it does)
_UNSUPPORTED = (
    ("is_decoder", False, "a causal attention mask"),
    ("add_cross_attention", False, "cross-attention to an encoder"),
    ("position_embedding_type", "absolute", "relative position embeddings"),
)


@dataclass
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0

    def __post_init__(self):
        self.validate()

    def validate(self):
        """Raise a ``ValueError`` naming the first field that is out of range.

        NumPy numbers (``np.int64(30522)``, ``np.float32(0.1)``) are accepted
        and stored as Python ints and floats, so the config writes to JSON.
        """
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            if self._int_field(name) < 1:
                raise ValueError(f"BertConfig.{name} must be a positive integer, got {getattr(self, name)!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"BertConfig.hidden_size ({self.hidden_size}) must be divisible by "
                f"num_attention_heads ({self.num_attention_heads}); each head gets "
                f"hidden_size / num_attention_heads dimensions")
        if not isinstance(self.hidden_act, str) or self.hidden_act not in HIDDEN_ACTS:
            raise ValueError(f"BertConfig.hidden_act must be one of {list(HIDDEN_ACTS)}, "
                             f"got {self.hidden_act!r}")
        self.hidden_act = str(self.hidden_act)
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            p = self._real_field(name)
            if p is None or not 0.0 <= p < 1.0:
                raise ValueError(f"BertConfig.{name} must be a number in [0, 1), got {getattr(self, name)!r}")
        for name in ("initializer_range", "layer_norm_eps"):
            v = self._real_field(name)
            if v is None or not 0 < v < float("inf"):
                raise ValueError(f"BertConfig.{name} must be a number > 0, got {getattr(self, name)!r}")
        if not 0 <= self._int_field("pad_token_id") < self.vocab_size:
            raise ValueError(f"BertConfig.pad_token_id must be in [0, vocab_size={self.vocab_size}), "
                             f"got {self.pad_token_id!r}")

    def _int_field(self, name) -> int:
        """The field as a Python int; a ``ValueError`` if it is not a whole-number type (bool, float, str...)."""
        value = getattr(self, name)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
            raise ValueError(f"BertConfig.{name} must be an int, got {type(value).__name__} {value!r}")
        setattr(self, name, int(value))
        return int(value)

    def _real_field(self, name):
        """The field as a Python float, or None if it is not a real number (bools are not)."""
        value = getattr(self, name)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            return None
        setattr(self, name, float(value))
        return float(value)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_preset(cls, name: str, vocab_size: int = 30522, **overrides) -> "BertConfig":
        """One of google-research/bert's sizes: tiny, mini, small, medium, base."""
        if not isinstance(name, str) or name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {list(PRESETS)}")
        layers, hidden, heads = PRESETS[name]
        kwargs = dict(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=heads, intermediate_size=4 * hidden)
        kwargs.update(overrides)
        return cls(**kwargs)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "BertConfig":
        """Build from a dict such as HF's config.json.

        Keys that do not change the encoder's arithmetic (``architectures``,
        ``torch_dtype``, ``use_cache``...) are ignored; settings that would
        make it a different model than the one minibert implements (a
        decoder's causal mask, cross-attention, relative positions) are
        refused rather than silently dropped.
        """
        if not isinstance(d, dict):
            raise TypeError(f"a BERT config must be a dict (a JSON object), got {type(d).__name__}")
        for key, plain, meaning in _UNSUPPORTED:
            if d.get(key, plain) not in (plain, None):
                raise ValueError(f"config {key}={d[key]!r} ({meaning}) is not supported: minibert "
                                 f"implements the BERT encoder ({key}={plain!r})")
        known = {f.name for f in fields(cls)}
        for key in d.keys() - known:          # a setting misspelt would leave the default in its place, unseen
            near = difflib.get_close_matches(str(key), known, n=1, cutoff=0.85)
            if near:
                raise ValueError(f"config key {key!r} is no setting of BERT's: did you mean {near[0]!r}? (as it "
                                 f"is, {near[0]} would keep its default, {getattr(cls(), near[0])!r})")
        return cls(**{k: v for k, v in d.items() if k in known})

    def to_json_file(self, path) -> None:
        """Write an HF-compatible ``config.json`` (after checking the fields again)."""
        path = as_path(path, "path")
        self.validate()
        d = {"architectures": ["BertForPreTraining"], "model_type": "bert", **self.to_dict()}
        path.write_text(json.dumps(d, indent=2, sort_keys=True) + "\n")

    @classmethod
    def from_json_file(cls, path) -> "BertConfig":
        """Read a ``config.json``; any problem with its contents is a ``ValueError`` naming the file."""
        path = as_path(path, "path")
        if not path.is_file():
            raise FileNotFoundError(f"config file not found: {path}")
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path} is not valid JSON: {exc}") from exc
        if not isinstance(d, dict):
            raise ValueError(f"{path} must hold a JSON object of settings, got a {type(d).__name__}")
        if d.get("model_type", "bert") != "bert":
            raise ValueError(f"{path} describes a {d['model_type']!r} model, not a BERT")
        try:
            return cls.from_dict(d)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: {exc}") from None


def as_path(value, name) -> Path:
    """``value`` as a ``Path``; a ``TypeError`` naming the argument if it is not a str or path-like."""
    if isinstance(value, (str, os.PathLike)):
        return Path(value)
    raise TypeError(f"{name} must be a path (a str or os.PathLike), got {type(value).__name__} {value!r}")
