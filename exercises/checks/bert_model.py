"""Stage (a) of the capstone: the student's BERT against minibert's on a small model, in float64.

The loss against ``BertForPreTraining``'s, every gradient against minibert's
(the word table's, with the tied decoder's share, included), then with dropout
on the gradients against central differences of the student's own forward pass
along a random direction (the same seed, so the same masks, at every call).
"""
from __future__ import annotations

import math

import numpy as np


from ..report import Abort
from .bert_diagnosis import backward_order, forward_mistake, gradient_hint
from .bert_outcome import DECODER, WORD, Outcome, _bound, _call, _grads, _host, _line, _pair, _rel, _scalar, _to

TOL = 1e-7                 # loss and gradients against minibert, float64
DIRECTIONAL_TOL = 1e-6     # a directional derivative against central differences
DROP = 0.1

# stage (a)'s model: every size different from every other, so that no transpose or wrong axis hides
SMALL = dict(vocab_size=31, hidden_size=12, num_hidden_layers=2, num_attention_heads=3, intermediate_size=20,
             max_position_embeddings=16, pad_token_id=0)


def student_config(config, p_hidden=0.0, p_attn=0.0) -> dict:
    """What ``bert_forward`` is told of the model: plain numbers, as the stub lists them."""
    return {"num_hidden_layers": config.num_hidden_layers, "num_attention_heads": config.num_attention_heads,
            "hidden_dropout_prob": p_hidden, "attention_probs_dropout_prob": p_attn,
            "layer_norm_eps": config.layer_norm_eps, "pad_token_id": config.pad_token_id}


def minibert_model(config, params=None):
    """minibert's ``BertForPreTraining`` in float64, with ``params`` (by name, the decoder tied) when given."""
    import minibert as mb
    model = mb.BertForPreTraining(config, seed=0, dtype="float64")
    if params is not None:
        model.load_state_dict({**params, DECODER + "weight": params[WORD],
                               DECODER + "bias": params["cls.predictions.bias"]})
    return model


def model_params(model) -> dict:
    """A model's parameters by Hugging Face's names, the tied decoder left out (it is the word table)."""
    return {k: np.array(v, dtype=np.float64) for k, v in model.state_dict().items() if not k.startswith(DECODER)}


def _reference(config, params, batch):
    """minibert's loss and gradients (by name, the decoder's share inside the word table's)."""
    model = minibert_model(config, params)
    out = model.forward(**batch, train=False)
    model.backward()
    grads = {k: np.array(v) for k, v in model.grad_state_dict().items() if not k.startswith(DECODER)}
    return float(out.loss), grads


def small_case(seed: int = 3):
    """Stage (a)'s config, parameters (weights of a useful size, every bias and LayerNorm non-trivial)
    and batch (a padded sequence, both segments, masked positions, both NSP labels)."""
    import minibert as mb
    config = mb.BertConfig(**SMALL, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    rng = np.random.default_rng(seed)
    params = {}
    for name, value in model_params(minibert_model(config)).items():
        if value.ndim == 2:
            params[name] = rng.standard_normal(value.shape) / math.sqrt(value.shape[1])
        elif "LayerNorm.weight" in name:
            params[name] = 1.0 + 0.3 * rng.standard_normal(value.shape)
        else:
            params[name] = 0.3 * rng.standard_normal(value.shape)
    B, T = 3, 7
    ids = rng.integers(4, SMALL["vocab_size"], (B, T))
    ids[:, 0] = 2                                          # a [CLS]-like first token
    mask = np.ones((B, T), dtype=np.int64)
    mask[1, 5:], ids[1, 5:] = 0, SMALL["pad_token_id"]     # the second sequence ends in padding
    # and the first holds [PAD]'s id where it is attended to: only there would its lookup row get a gradient
    ids[0, 3] = SMALL["pad_token_id"]
    types = np.zeros((B, T), dtype=np.int64)
    types[:, 4:] = 1
    labels = np.full((B, T), -100, dtype=np.int64)
    labels[0, 2], labels[1, 3], labels[2, 1], labels[2, 6] = 7, 9, 4, 11
    batch = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask, "mlm_labels": labels,
             "nsp_labels": np.array([0, 1, 0])}
    return config, params, batch


# ------------------------------------------------------------------------------ stage (a)
def model_stage(fns, xp=np) -> Outcome:
    """Stage (a) on the functions ``fns`` (bert_forward, bert_backward)."""
    out = Outcome()
    try:
        _model_stage(out, fns, xp)
    except Abort:
        pass
    return out


def _model_stage(out: Outcome, fns, xp) -> None:
    config, params, batch = small_case()
    want_loss, want = _reference(config, params, batch)
    cfg = student_config(config)
    given = _to(xp, {k: v.copy() for k, v in params.items()}), _to(xp, {k: v.copy() for k, v in batch.items()})
    loss, cache = _pair(out, _call(out, "bert_forward", fns["bert_forward"], *given, cfg))
    loss = _scalar(out, "the loss", _host(loss))
    err = abs(loss - want_loss) / abs(want_loss)
    out.measure(err < TOL, _line("the loss vs minibert's BertForPreTraining", f"rel. error {err:.1e} (yours {loss:.6f}, "
                                                                    f"minibert's {want_loss:.6f})"),
                forward_mistake(loss, config, params, batch)
                or "the loss is the MLM loss (the mean over the labelled positions) plus the NSP loss (the mean "
                   "over the pairs), both in nats: minibert's pieces in place of yours give minibert's loss, so look "
                   "at the order of the pieces in bert_forward (the list in the stub)")
    raw = _call(out, "bert_backward", fns["bert_backward"], cache)
    changed = [k for part, kept in zip(given, (params, batch)) for k in kept
               if not np.array_equal(_host(part[k]), kept[k])]
    out.require(not changed, f"bert_forward or bert_backward changed {changed[:1]} in place",
                "change no argument in place: the caller uses params and the batch again (compute new arrays)")
    got = _grads(out, {k: _host(v) for k, v in raw.items()} if isinstance(raw, dict) else raw, params)
    floor = 1e-6 * max(np.abs(g).max() for g in want.values())      # key.bias's gradient is 0 in exact arithmetic
    errors = {k: _rel(got[k], want[k], floor) for k in want}
    wrong = [k for k in backward_order(config) if k in want and errors[k] >= TOL]    # from the loss down
    worst = max(errors, key=errors.get)
    out.measure(not wrong, _line(f"all {len(want)} gradients vs minibert's",
                                 f"max_rel_error {errors[worst]:.1e} ({len(wrong)} wrong"
                                 + (f", the first on the way back {wrong[0]}" if wrong else "") + ")"),
                gradient_hint(wrong, got, want, config, params, batch) if wrong else None)
    if xp is np:
        _with_dropout(out, fns, config, params, batch, want_loss)


def _with_dropout(out: Outcome, fns, config, params, batch, want_loss) -> None:
    """Dropout on: the same seed gives the same masks, so the forward pass is a function to differentiate."""
    dcfg = student_config(config, DROP, DROP)

    def forward(what, seed, p=params):
        """The loss (checked to be one finite number) and the cache; ``seed`` None: evaluation."""
        rng = None if seed is None else np.random.default_rng(seed)
        loss, cache = _pair(out, _call(out, "bert_forward", fns["bert_forward"], p, batch, dcfg, rng))
        return _scalar(out, what, loss), cache

    first, _ = forward("the loss with dropout", 5)
    again, cache = forward("the loss with dropout", 5)
    other, _ = forward("the loss with dropout", 6)
    evaluated, _ = forward("the loss at evaluation", None)
    out.measure(abs(evaluated - want_loss) < TOL * abs(want_loss),
                "no dropout at evaluation (rng=None): the loss is minibert's",
                "with rng=None the model evaluates: every dropout is the identity, whatever the probabilities")
    out.measure(again == first and other != first,
                "dropout in training: the same seed gives the same loss, another seed another",
                "draw every mask from rng (hidden_dropout_prob after the embeddings and after each of a layer's "
                "two projections, attention_probs_dropout_prob on the attention weights)")
    got = _grads(out, _call(out, "bert_backward", fns["bert_backward"], cache), params)
    rng = np.random.default_rng(7)
    u = {k: rng.standard_normal(v.shape) for k, v in params.items()}
    u[WORD][config.pad_token_id] = 0.0       # [PAD]'s lookup row gets no gradient by BERT's rule, not by calculus
    h = 1e-5
    ends = []
    for sign in (1, -1):
        ends.append(forward("the loss", 5, {k: params[k] + sign * h * u[k] for k in params})[0])
    numerical = (ends[0] - ends[1]) / (2 * h)
    analytic = sum(float((got[k] * u[k]).sum()) for k in params)
    err = abs(numerical - analytic) / max(abs(numerical), abs(analytic), 1e-12)
    out.measure(err < DIRECTIONAL_TOL, _line("with dropout: gradients vs central differences",
                                       f"rel. error {err:.1e} ({_bound(err, DIRECTIONAL_TOL)}, along a random direction)"),
                "the backward pass must use the masks the forward pass drew: keep each dropout's cache and "
                "pass it to dropout_backward (attention's to attention_dropout_backward)")
