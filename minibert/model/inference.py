"""Using a pre-trained model: the top predictions for each ``[MASK]`` of a text."""
from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np

from ..backend import to_numpy
from ..checks import is_int
from .hf_io import PRE_LN_EXPORT

# the weights only next sentence prediction uses: a masked-LM checkpoint often lacks them
NOT_FOR_MLM = ("bert.pooler.", "cls.seq_relationship.")
# never the word behind a [MASK]: the special tokens, and the unused slots of BERT's vocabularies
NEVER_PREDICTED = re.compile(r"\[(PAD|UNK|CLS|SEP|MASK|unused\d+)\]")


def check_vocab_size(model, tokenizer, vocab_file="the tokenizer's vocabulary") -> None:
    """A vocabulary and a model of different sizes belong to different models: one line naming both sizes."""
    n_model, n_vocab = model.config.vocab_size, tokenizer.vocab_size
    if n_model != n_vocab:
        raise ValueError(f"{vocab_file} has {n_vocab:,} tokens but the model's vocabulary has {n_model:,} "
                         f"(vocab_size in its config.json): the two belong to different models; use the "
                         f"vocab.txt the model was trained with")


def load_for_fill_mask(directory, device="cpu"):
    """(model, tokenizer, note) from a model folder: config.json, the weights and vocab.txt.

    What masked-word prediction does not use may be absent (many published checkpoints,
    transformers' ``BertForMaskedLM`` among them, have no pooler and no next-sentence
    head); ``note`` then says so in one line (None when nothing was absent or unused).
    """
    from .bert import BertForPreTraining
    from .state_dict import name_list
    from ..data.tokenizer import WordPieceTokenizer
    d = Path(directory)
    if d.is_file():
        raise ValueError(f"{d} is a file; give the model's folder (the one holding config.json, "
                         f"model.safetensors and vocab.txt)")
    if not d.is_dir():
        if d.name == "model" and _is_pre_ln_run(d.parent):
            raise FileNotFoundError(_no_model_in_run(d.parent))
        raise FileNotFoundError(f"model folder not found: {d}")
    if not (d / "config.json").is_file() and ((d / "run.json").is_file() or (d / "metrics.jsonl").is_file()):
        raise FileNotFoundError(_no_model_in_run(d))
    if not (d / "vocab.txt").is_file():
        what = "is a folder, not a file" if (d / "vocab.txt").is_dir() else "not found"
        raise FileNotFoundError(f"{d / 'vocab.txt'} {what}: fill-mask needs the model's vocabulary beside it")
    tokenizer = WordPieceTokenizer.from_vocab_file(d / "vocab.txt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)       # what was left out is said below, once
        model = BertForPreTraining.from_pretrained(d, device=device, strict=False, kernels="fast")
    missing, unexpected = model.loading_info
    needed = [n for n in missing if not n.startswith(NOT_FOR_MLM)]
    if needed:
        raise ValueError(f"{d} lacks weights that fill-mask needs: {name_list(needed)} (a model with a "
                         f"masked-LM head is needed, such as BertForMaskedLM or BertForPreTraining)")
    check_vocab_size(model, tokenizer, d / "vocab.txt")
    _check_layers(d, model, unexpected)
    parts = [f"has no {name_list(missing)} (fill-mask does not use them)"] if missing else []
    parts += [f"holds weights fill-mask does not use: {name_list(unexpected)}"] if unexpected else []
    return model, tokenizer, (f"note: {d} " + "; ".join(parts)) if parts else None


def _check_layers(d: Path, model, unexpected) -> None:
    """Weights of more encoder layers than config.json names: the two are not of one model (a config edited by
    hand), and fill-mask would run the first layers alone, its predictions those of no trained model."""
    layers = model.config.num_hidden_layers
    extra = sorted({int(m.group(1)) for n in unexpected if (m := re.match(r"(?:bert\.)?encoder\.layer\.(\d+)\.", n))})
    if extra:
        raise ValueError(f"{d}: config.json says num_hidden_layers={layers}, but the weights hold layer"
                         f"{'s' * (len(extra) > 1)} {', '.join(map(str, extra))} too: the config and the weights "
                         f"are not of one model; set num_hidden_layers to {max(extra) + 1}, as they were trained")


def _is_pre_ln_run(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a pre-training run started with --pre-ln (its run.json says so)."""
    try:
        return json.loads((run_dir / "run.json").read_text())["args"]["pre_ln"] is True
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _no_model_in_run(run_dir: Path) -> str:
    """Why fill-mask finds no model in a pre-training run's folder, and where one is."""
    if _is_pre_ln_run(run_dir):
        # not a model still to come: the run's end does not export it either
        return (f"{run_dir} is the folder of a --pre-ln run, which has no model folder even when finished: "
                f"{PRE_LN_EXPORT}. Its weights are only in its checkpoints; for fill-mask, train without --pre-ln")
    if (run_dir / "model" / "config.json").is_file():
        return f"{run_dir} is the folder of a pre-training run; give its model folder, {run_dir / 'model'}"
    return (f"{run_dir} is the folder of a pre-training run; its model is {run_dir / 'model'}, "
            f"written when the run finishes")


def fill_mask(model, tokenizer, text: str, top_k: int = 5):
    """Top-k predictions for each ``[MASK]`` in ``text``: a list (one per mask) of (token, probability).

    The probabilities are the model's over its whole vocabulary; special tokens and
    ``[unusedN]`` slots are never among the predictions. Text past the model's positions
    is cut off, with a warning that says how much; a ``[MASK]`` there is an error:
    every ``[MASK]`` gets its predictions, or none does.
    """
    if not is_int(top_k) or top_k < 1:
        raise ValueError(f"top_k must be a positive int, got {top_k!r}")
    from .bert import BertForPreTraining
    if not isinstance(model, BertForPreTraining):
        raise TypeError(f"fill_mask needs a BertForPreTraining (its masked-LM head predicts the words), got "
                        f"{type(model).__name__}")
    if not hasattr(tokenizer, "mask_id"):
        raise TypeError(f"tokenizer must be a WordPieceTokenizer, got {type(tokenizer).__name__} (the arguments are "
                        "model, tokenizer, text)")
    if not isinstance(text, str):
        raise TypeError(f"text must be a str holding [MASK], got {type(text).__name__}")
    mask_id = tokenizer.mask_id             # (a vocabulary without [MASK] is named as such first)
    check_vocab_size(model, tokenizer)
    n_positions = model.config.max_position_embeddings
    enc = tokenizer.encode(text, max_length=n_positions)
    ids = np.asarray([enc["input_ids"]])
    positions = np.flatnonzero(ids[0] == mask_id)
    all_ids = tokenizer.tokenize_to_ids(text)
    n_masks = all_ids.count(mask_id)
    shown = repr(text) if len(text) <= 80 else repr(text[:60]) + f"... ({len(text):,} characters)"
    if n_masks == 0:
        capitals = " (in capitals: [mask] is read as a word)" if "[mask]" in text.lower() else ""
        raise ValueError(f"no [MASK] in {shown}: write [MASK] where a word should be predicted{capitals}")
    if positions.size < n_masks:
        lost = n_masks - positions.size
        raise ValueError(f"{lost:,} of the {n_masks:,} [MASK] tokens of {shown} "
                         f"{'lies' if lost == 1 else 'lie'} beyond the model's {n_positions} positions: "
                         f"only {positions.size:,} fit (the model reads at most {n_positions - 2} tokens "
                         f"between [CLS] and [SEP]); shorten the text or split it into several")
    dropped = len(all_ids) - (ids.shape[1] - 2)
    if dropped > 0:
        warnings.warn(f"the text is {len(all_ids):,} tokens long and the model reads {n_positions - 2}: its last "
                      f"{dropped:,} tokens were not read", UserWarning, stacklevel=2)
    out = model.forward(ids, np.asarray([enc["token_type_ids"]]), np.asarray([enc["attention_mask"]]),
                        train=False)
    model.release()
    logits = to_numpy(out.mlm_logits[0, positions]).astype(np.float64)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    allowed = np.array([not NEVER_PREDICTED.fullmatch(t) for t in tokenizer.vocab])
    result = []
    for p in probs:
        top = np.argsort(-np.where(allowed, p, -1.0), kind="stable")[:min(top_k, int(allowed.sum()))]
        result.append([(tokenizer.convert_ids_to_tokens([int(i)])[0], float(p[i])) for i in top])
    return result
