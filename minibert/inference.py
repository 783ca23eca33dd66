"""Using a pre-trained model: the top predictions for each ``[MASK]`` of a text."""
from __future__ import annotations

import numpy as np

from .backend import to_numpy


def fill_mask(model, tokenizer, text: str, top_k: int = 5):
    """Top-k predictions for each ``[MASK]`` in ``text``: a list (one per mask) of (token, probability).

    Text past the model's positions is cut off, but a ``[MASK]`` there is an error: every
    ``[MASK]`` gets its predictions, or none does.
    """
    mask_id = tokenizer.mask_id
    n_positions = model.config.max_position_embeddings
    enc = tokenizer.encode(text, max_length=n_positions)
    ids = np.asarray([enc["input_ids"]])
    positions = np.flatnonzero(ids[0] == mask_id)
    n_masks = tokenizer.tokenize_to_ids(text).count(mask_id)
    shown = repr(text) if len(text) <= 80 else repr(text[:60]) + f"... ({len(text):,} characters)"
    if n_masks == 0:
        raise ValueError(f"no [MASK] in {shown}: write [MASK] where a word should be predicted")
    if positions.size < n_masks:
        lost = n_masks - positions.size
        raise ValueError(f"{lost:,} of the {n_masks:,} [MASK] tokens of {shown} "
                         f"{'lies' if lost == 1 else 'lie'} beyond the model's {n_positions} positions: "
                         f"only {positions.size:,} fit (the model reads at most {n_positions - 2} tokens "
                         f"between [CLS] and [SEP]); shorten the text or split it into several")
    out = model.forward(ids, np.asarray([enc["token_type_ids"]]), np.asarray([enc["attention_mask"]]),
                        train=False)
    model.release()
    logits = to_numpy(out.mlm_logits[0, positions]).astype(np.float64)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    result = []
    for p in probs:
        top = np.argsort(-p)[:top_k]
        result.append([(tokenizer.convert_ids_to_tokens([int(i)])[0], float(p[i])) for i in top])
    return result

