"""What a capstone whose pieces are right but whose model is wrong got wrong: the assembly's mistakes.

When no swap of a piece mends stage (a), the mistake is in how the pieces are
put together.  Two clues remain, the loss and the gradients:

* **the loss**: ``forward_mistake`` recomputes BERT's loss with one usual
  mistake of the assembly at a time (the LayerNorm before the residual sum, the
  positions counted from 1, the padding mask left out, the losses summed...), with
  minibert's ops, and names the one whose loss is the student's;
* **the gradients**: ``gradient_hint`` walks the parameters in the order the
  backward pass reaches them, from the loss down to the embeddings, and names
  the first wrong one after the last right one, with what joins there (a
  residual sum, the two heads on the last layer, the head split and merge).
"""
from __future__ import annotations

import numpy as np

from minibert import ops as L
from minibert.gradcheck import max_rel_error

from .bert_outcome import WORD

EMB, LAYER, MLM = "bert.embeddings.", "bert.encoder.layer.", "cls.predictions."
QKV = ("query", "key", "value")

# mistake -> the hint that names it; each is a switch of ``_loss``
FORWARD_MISTAKES = {
    "pre_ln": "your loss is that of a pre-LN model, x + f(LayerNorm(x)): BERT normalises after the residual sum, "
              "LayerNorm(x + f(x)) (post-LN)",
    "norm_then_sum": "your loss is that of LayerNorm(f(x)) + x: BERT normalises the residual sum, LayerNorm(x + f(x))",
    "no_residual": "your loss is that of a model without the residual connections: each sub-layer's output is "
                   "LayerNorm(x + f(x)), its input added back",
    "positions_from_1": "your loss is that of positions counted from 1: the first token's position is 0",
    "no_positions": "your loss is that of a model without the position embeddings: add the word, position and "
                    "segment embeddings",
    "no_segments": "your loss is that of a model without the segment (token type) embeddings: add the word, "
                   "position and segment embeddings",
    "no_embedding_norm": "your loss is that of embeddings without their LayerNorm: the sum of the three tables is "
                         "normalised before the first layer",
    "no_mask": "your loss is that of attention without the padding mask: pass attention_mask to the attention",
    "eps": "your loss is that of LayerNorm with PyTorch's default eps 1e-5: use config['layer_norm_eps'] (1e-12)",
    "no_transform": "your loss is that of an MLM head without its transform: dense, GELU and LayerNorm come before "
                    "the decoder",
    "pooler_last": "your loss is that of a pooler on the last position: BERT pools the first, [CLS]",
    "mlm_over_all": "your loss averages the MLM loss over every position: average over the labelled ones only "
                    "(the labels -100 count in neither the sum nor the count)",
    "summed": "your loss sums the MLM and NSP losses over their positions and pairs: each is a mean",
    "mlm_only": "your loss is the MLM loss alone: add the NSP loss",
    "nsp_only": "your loss is the NSP loss alone: add the MLM loss",
}


def _cross_entropy(logits, labels):
    """(the sum of -log p over the labelled rows, their count)"""
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    at = labels != -100
    return float(-logp[np.flatnonzero(at), labels[at]].sum()), int(at.sum())


def _heads_input(params, batch, config, mistake=None):
    """(the last layer's output h (B, T, H), the MLM head's transform of h, and ``lin``, the linear
    layer of these parameters by name, for the heads): BERT at evaluation, written with minibert's
    ops, with one of ``FORWARD_MISTAKES`` (or none)."""
    P, heads = params, config.num_attention_heads
    eps = 1e-5 if mistake == "eps" else config.layer_norm_eps
    ids, types, mask = batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
    T = ids.shape[1]

    def lin(x, name):
        return L.linear_forward(x, P[name + ".weight"], P[name + ".bias"])[0]

    def norm(x, name):
        return L.layernorm_forward(x, P[name + ".weight"], P[name + ".bias"], eps)[0]

    e = P[WORD][ids]
    if mistake != "no_positions":
        e = e + P[EMB + "position_embeddings.weight"][np.arange(T) + (mistake == "positions_from_1")]
    if mistake != "no_segments":
        e = e + P[EMB + "token_type_embeddings.weight"][types]
    h = e if mistake == "no_embedding_norm" else norm(e, EMB + "LayerNorm")
    bias = L.attention_mask_bias(np.ones_like(mask) if mistake == "no_mask" else mask, h.dtype)
    for layer in range(config.num_hidden_layers):
        p = f"{LAYER}{layer}."

        def attention(x, p=p):
            q, k, v = (L.split_heads(lin(x, f"{p}attention.self.{n}"), heads) for n in QKV)
            return lin(L.merge_heads(L.attention_forward(q, k, v, bias)[0]), p + "attention.output.dense")

        def ffn(x, p=p):
            return lin(L.gelu_forward(lin(x, p + "intermediate.dense"))[0], p + "output.dense")

        for block, name in ((attention, p + "attention.output.LayerNorm"), (ffn, p + "output.LayerNorm")):
            if mistake == "pre_ln":
                h = h + block(norm(h, name))
            elif mistake == "norm_then_sum":
                h = h + norm(block(h), name)
            elif mistake == "no_residual":
                h = norm(block(h), name)
            else:
                h = norm(h + block(h), name)
    t = h if mistake == "no_transform" else norm(L.gelu_forward(lin(h, MLM + "transform.dense"))[0],
                                                  MLM + "transform.LayerNorm")
    return h, t, lin


def _loss(params, batch, config, mistake=None) -> float:
    """BERT's loss at evaluation, with one of ``FORWARD_MISTAKES`` (or none)."""
    h, t, lin = _heads_input(params, batch, config, mistake)
    B, T = batch["input_ids"].shape
    pooled = np.tanh(lin(h[:, -1 if mistake == "pooler_last" else 0], "bert.pooler.dense"))
    nsp, pairs = _cross_entropy(lin(pooled, "cls.seq_relationship"), batch["nsp_labels"])
    logits = t.reshape(B * T, -1) @ params[WORD].T + params[MLM + "bias"]
    mlm, labelled = _cross_entropy(logits, batch["mlm_labels"].reshape(-1))
    if mistake == "summed":
        return mlm + nsp
    mlm /= B * T if mistake == "mlm_over_all" else labelled
    nsp /= pairs
    return {"mlm_only": mlm, "nsp_only": nsp}.get(mistake, mlm + nsp)


def decoder_share(config, params, batch) -> np.ndarray:
    """The word table's gradient through the tied decoder alone: the MLM logits' gradient times the
    transformed hidden states (what a backward pass that forgets the tie leaves out)."""
    _, t, _ = _heads_input(params, batch, config)
    labels = batch["mlm_labels"].reshape(-1)
    at = labels != -100
    t = t.reshape(len(labels), -1)[at]
    logits = t @ params[WORD].T + params[MLM + "bias"]
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(p)), labels[at]] -= 1.0
    return p.T @ t / at.sum()


def forward_mistake(loss: float, config, params, batch) -> str | None:
    """The hint of the usual assembly mistake whose loss is ``loss``, or None."""
    for mistake, hint in FORWARD_MISTAKES.items():
        theirs = _loss(params, batch, config, mistake)
        if abs(theirs - loss) <= 1e-9 * abs(theirs):
            return hint
    return None


# ------------------------------------------------------------------------------ the gradients
def backward_order(config) -> list[str]:
    """The parameters in the order the backward pass reaches them, from the loss down."""
    names = ["cls.seq_relationship.weight", "cls.seq_relationship.bias", MLM + "bias",
             MLM + "transform.LayerNorm.weight", MLM + "transform.LayerNorm.bias",
             MLM + "transform.dense.weight", MLM + "transform.dense.bias",
             "bert.pooler.dense.weight", "bert.pooler.dense.bias"]
    for layer in reversed(range(config.num_hidden_layers)):
        p = f"{LAYER}{layer}."
        for part in ("output.LayerNorm", "output.dense", "intermediate.dense", "attention.output.LayerNorm",
                     "attention.output.dense", "attention.self.value", "attention.self.key", "attention.self.query"):
            names += [f"{p}{part}.weight", f"{p}{part}.bias"]
    return names + [EMB + "LayerNorm.weight", EMB + "LayerNorm.bias", EMB + "token_type_embeddings.weight",
                    EMB + "position_embeddings.weight", WORD]


def _where(first: str, right_before: str | None, config) -> str:
    """What joins at the first wrong gradient on the way back."""
    top = f"{LAYER}{config.num_hidden_layers - 1}.output.LayerNorm"
    if first.startswith(top) and right_before and right_before.startswith("bert.pooler"):
        return ("the heads and the pooler are right, the last layer is not: the gradient of the last layer's "
                "output is the SUM of the MLM head's (every position) and the pooler's ([CLS] only)")
    if ".output.LayerNorm" in first and "attention" not in first and first.startswith(LAYER):
        return ("the layer above is right inside, this one is not: the gradient leaving a layer through its input "
                "x is the SUM of the three projections' (query, key, value) and the residual sum's (x + a)")
    if "attention.output.LayerNorm" in first:
        return ("the feed-forward block is right, the attention block below it is not: h feeds the feed-forward "
                "block and the residual sum h + f, so its gradient is the SUM of both")
    if "attention.self." in first:
        return ("the output projection is right, the query, key and value projections are not: look between them, "
                "at the merge of the heads (its backward is the split, and the split's is the merge) and at "
                "attention's backward")
    if "intermediate.dense" in first:
        return "the second projection of the feed-forward block is right, the first is not: look at GELU's backward"
    if first.startswith(EMB + "LayerNorm"):
        return ("every layer is right, the embeddings' LayerNorm is not: the gradient leaving the first layer "
                "through its input is the SUM of the projections' and the residual sum's")
    if first.startswith(EMB):
        return "everything above the lookups is right: look at the three tables' backward (embedding_backward)"
    return ""


def gradient_hint(wrong, got, want, config, params, batch) -> str:
    """A hint for the gradients that differ from minibert's while the loss agrees."""
    if wrong == [WORD]:
        share = decoder_share(config, params, batch)
        if max_rel_error(got[WORD], want[WORD] - share) < 1e-6:
            return ("the word embeddings' gradient lacks the decoder's share: the MLM decoder is tied to the "
                    "word embeddings, so the gradient of its weight is added to the lookup's")
        if max_rel_error(got[WORD], want[WORD] + share) < 1e-6:
            return "the decoder's share is added twice to the word embeddings' gradient"
        pad = config.pad_token_id
        rows = np.abs(got[WORD] - want[WORD]).max(axis=1) > 1e-9 * np.abs(want[WORD]).max()
        if rows.any() and np.flatnonzero(rows).tolist() == [pad]:
            return (f"only the [PAD] row ({pad}) of the word embeddings' gradient differs: BERT's lookup leaves "
                    f"it out (embedding_backward's padding_idx=config['pad_token_id']); the decoder's share "
                    f"still reaches it")
    order = [n for n in backward_order(config) if n in want]
    bad = set(wrong)
    first = next(n for n in order if n in bad)
    # key.bias's gradient is 0 whatever comes before it: it says nothing of the way back
    right = [n for n in order[:order.index(first)] if n not in bad and not n.endswith("key.bias")]
    where = _where(first, right[-1] if right else None, config)
    return (f"on the way back from the loss, the first wrong gradient is {first}"
            + (f", after {right[-1]} (right)" if right else " (none before it is right)")
            + (f": {where}" if where else ""))
