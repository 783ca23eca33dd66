"""One post-LN encoder layer put together from its pieces, and the MLM decoder tied to the word embeddings.

The layer is compared with minibert's own ``layer_forward`` and the tied
model with minibert's embedding lookup and ``heads_forward``, in float64;
then every gradient (dx, each parameter, dW_word) is checked end to end
against central differences of the student's own forward pass.
"""
from __future__ import annotations

import numpy as np

from minibert import ops as L
from minibert.model.config import BertConfig
from minibert.model.encoder import LayerWeights, Linear, Norm, layer_forward
from minibert.model.heads import HeadWeights, heads_forward

from ..calls import call_watched
from ..cases import encoder_layer as cases
from ..cases.layer_names import DENSE, LN1, LN2, NORM, QKV, head_shapes, layer_shapes
from ..harness import TOL, Forward, as_array, compare, fresh, grad_check
from ..report import Abort, Report
from .common import bwd, unpack

T = cases.TABLE
# batch, tokens, hidden, heads, intermediate (4H), vocabulary: no two of B, T, A and H / A alike, so that
# a reshape or transpose that mixes two of them up cannot give the right shape by chance
B, TT, H, A, I, V = 3, 5, 8, 2, 32, 11
KEY_BIAS = "attention.self.key.bias"


def _check_layers(r: Report) -> None:
    _check_layer(r, np.random.default_rng(23))


def _check_tied_model(r: Report) -> None:
    _check_tied(r, np.random.default_rng(29))


def random_params(rng, shapes) -> dict:
    """Weights of a useful size (about 1/sqrt(fan-in)), LayerNorm scales near 1, every bias non-zero."""
    params = {}
    for name, shape in shapes.items():
        if len(shape) == 2:
            params[name] = rng.standard_normal(shape) / np.sqrt(shape[1])
        elif "LayerNorm.weight" in name:
            params[name] = 1.0 + 0.3 * rng.standard_normal(shape)
        else:
            params[name] = 0.3 * rng.standard_normal(shape)
    return params


class DictForward(Forward):
    """``Forward`` whose dict arguments (the parameters) are copied too, value by value, at every call."""

    def __call__(self):
        args = [{k: fresh(v) for k, v in a.items()} if isinstance(a, dict) else fresh(a) for a in self.args]
        return self.func(*args, **self.kwargs)[0]


def dict_gradients(r: Report, func: str, args, slot: int, dout, h: float = 1e-5) -> dict:
    """Central differences of sum(func(*args)[0] * dout) with respect to every array of the dict
    ``args[slot]`` (the parameters): {name: gradient}.

    Each perturbed dict is one variant of a single batch, which a worker runs in one message (the
    gradient check's own batch, ``map_outputs``, with dicts in place of arrays); in this process
    each call gets copies of its arrays.
    """
    base = args[slot]
    variants, cells = [], []
    for name, value in base.items():
        for ix in np.ndindex(*value.shape):
            for step in (h, -h):
                moved = value.copy()
                moved[ix] += step
                variants.append({**base, name: moved})
            cells.append((name, ix))
    outs = _outputs(r, func, args, slot, variants)
    grads = {name: np.zeros_like(value) for name, value in base.items()}
    for k, (name, ix) in enumerate(cells):
        diff = np.asarray(outs[2 * k], dtype=np.float64) - np.asarray(outs[2 * k + 1], dtype=np.float64)
        grads[name][ix] = np.sum(diff * dout) / (2 * h)
    return grads


def _outputs(r: Report, func: str, args, slot: int, variants: list) -> list:
    """func(*args)[0] with each variant in place of args[slot]."""
    f = getattr(r.module, func)
    batch = getattr(f, "map_outputs", None)
    try:
        if batch is not None:
            return batch(list(args), {}, slot, variants, None)
        return [f(*[{k: fresh(a) for k, a in v.items()} if i == slot else fresh(a)
                    for i, a in enumerate(args)])[0] for v in variants]
    except Exception as exc:
        r.fail(f"{func}: the forward pass failed during the gradient check ({type(exc).__name__}: {exc})")
        raise Abort


def call_forward(r: Report, func: str, *args):
    """The student's forward on copies of the arrays, those inside the parameter dict included, each
    watched for a change in place; returns (out, cache)."""
    args = [{k: fresh(v) for k, v in a.items()} if isinstance(a, dict) else fresh(a) for a in args]
    roles = ["input" if isinstance(a, (np.ndarray, dict)) else None for a in args]
    return unpack(r, func, call_watched(r, func, *args, roles=roles), 2, "out, cache")


def gradients(r: Report, func: str, result, params: dict, first: str, first_shape):
    """The (d<first>, grads) a backward returned, grads a dict with a gradient of each parameter's shape."""
    d, grads = unpack(r, func, result, 2, f"{first}, grads")
    d = as_array(r, first, d, first_shape)
    if not isinstance(grads, dict):
        r.fail(f"{func} should return {first} and a dict of gradients, got a {type(grads).__name__}",
               "return the gradients in a dict, one for each key of the parameter dict, under the same name")
        raise Abort
    missing, unknown = [n for n in params if n not in grads], [repr(n) for n in grads if n not in params]
    if missing or unknown:
        wrong = ([f"lack {', '.join(missing)}"] if missing else []) + \
            ([f"have unknown {', '.join(unknown)}"] if unknown else [])
        r.fail(f"{func}'s grads " + "; ".join(wrong),
               "return one gradient for each key of the parameter dict, under the same name")
        raise Abort
    return d, {n: as_array(r, f"grads[{n!r}]", g, params[n].shape) for n, g in grads.items()}


# ------------------------------------------------------------------------------------------- the layer
def minibert_layer(x, p, mask):
    """minibert's post-LN layer (model/encoder.py) on these weights, dropout off."""
    lin = lambda n: Linear(p[n + ".weight"], p[n + ".bias"], None, None)
    norm = lambda n: Norm(p[n + ".weight"], p[n + ".bias"], None, None)
    qkv = Linear(np.concatenate([p[f"attention.self.{n}.weight"] for n in QKV]),
                 np.concatenate([p[f"attention.self.{n}.bias"] for n in QKV]), None, None)
    w = LayerWeights(qkv, lin("attention.output.dense"), norm(LN1), lin("intermediate.dense"),
                     lin("output.dense"), norm(LN2))
    config = BertConfig(vocab_size=V, hidden_size=H, num_attention_heads=A, intermediate_size=I)
    return layer_forward(L, x, w, L.attention_mask_bias(mask, np.float64), config, None, train=False)[0]


def _check_layer(r: Report, rng) -> None:
    x = rng.standard_normal((B, TT, H))
    params = random_params(rng, layer_shapes(H, I))
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0]])  # the second and third padded
    y, cache = call_forward(r, "encoder_layer_forward", x, params, mask, A)
    y = as_array(r, "y", y, x.shape, "y has x's shape (B, T, H)")
    compare(r, "layer forward vs minibert's layer_forward", y, minibert_layer(x, params, mask),
            known=T.known(lambda m: m.encoder_layer_forward(x, params, mask, A)[0]))

    dy = rng.standard_normal(x.shape)

    def grads(m):
        return m.encoder_layer_backward(dy, m.encoder_layer_forward(x, params, mask, A)[1])
    result = bwd(r, "encoder_layer_backward", dy, cache, hint=T.raised(grads))
    dx, dparams = gradients(r, "encoder_layer_backward", result, params, "dx", x.shape)
    f = DictForward(r.module, "encoder_layer_forward", (x, params, mask, A), {})
    of = "encoder_layer_backward"
    grad_check(r, "dx", f, x, dy, dx, known=T.known(lambda m: grads(m)[0], of=of))
    numerical = dict_gradients(r, "encoder_layer_forward", (x, params, mask, A), 1, dy)
    for name in params:
        if name == KEY_BIAS:
            _check_key_bias(r, dparams[name], numerical[name], np.abs(dparams["attention.self.key.weight"]).max())
            continue
        compare(r, f"d {name} vs numerical gradient", dparams[name], numerical[name],
                known=T.known(lambda m, n=name: grads(m)[1][n], of=of))


def _check_key_bias(r: Report, got, num, scale) -> None:
    """The key bias's gradient is 0: k = x W_k^T + b_k adds q . b_k to every score of query q's row, the
    same number for every key, and the softmax ignores it.  Its entries are rounding noise on both sides,
    so they are held to the size of the key weights' gradient instead of their own."""
    err = float(np.abs(got - num).max() / max(scale, 1e-300))
    r.expect(err < TOL, f"d {KEY_BIAS} is 0 (error {err:.1e} of d key.weight's size, must be < {TOL:.0e})",
             "the key bias adds q . b_k, the same number, to every score of a query's row, and the softmax "
             "ignores such a shift: its gradient, dk summed over the tokens, is 0. Look at dk and at how it "
             "goes back to (B, T, H)")


# ---------------------------------------------------------------------------------- the tied decoder
def minibert_tied(ids, W_word, head):
    """The word lookup, then minibert's MLM head (model/heads.py) with its decoder tied to W_word."""
    d, n = DENSE, NORM
    w = HeadWeights(dense=Linear(head[d + ".weight"], head[d + ".bias"], None, None),
                    norm=Norm(head[n + ".weight"], head[n + ".bias"], None, None),
                    decoder=Linear(W_word, head["bias"], None, None),
                    nsp=Linear(np.zeros((2, H)), np.zeros(2), None, None))
    config = BertConfig(vocab_size=V, hidden_size=H, num_attention_heads=A, intermediate_size=I)
    (logits, _, _), _ = heads_forward(L, W_word[ids], np.zeros((ids.shape[0], H)), w, config, None)
    return logits


def _check_tied(r: Report, rng) -> None:
    ids = np.array([[3, 1, 4, 1, 5, 9], [2, 6, 5, 3, 5, 8]])              # 1, 3 and 5 repeated; 0, 7, 10 absent
    W_word = rng.standard_normal((V, H))
    head = random_params(rng, head_shapes(H, V))
    logits, cache = call_forward(r, "tied_mlm_forward", ids, W_word, head)
    logits = as_array(r, "logits", logits, ids.shape + (V,), "logits are (B, T, V): one score per word of the "
                                                              "vocabulary, t W_word^T + b")
    compare(r, "tied model forward vs minibert's heads_forward", logits, minibert_tied(ids, W_word, head),
            known=T.known(lambda m: m.tied_mlm_forward(ids, W_word, head)[0]))

    dlogits = rng.standard_normal(logits.shape)

    def grads(m):
        return m.tied_mlm_backward(dlogits, m.tied_mlm_forward(ids, W_word, head)[1])
    result = bwd(r, "tied_mlm_backward", dlogits, cache, hint=T.raised(grads))
    dW, dhead = gradients(r, "tied_mlm_backward", result, head, "dW_word", W_word.shape)
    f = DictForward(r.module, "tied_mlm_forward", (ids, W_word, head), {})
    of = "tied_mlm_backward"
    grad_check(r, "dW_word (embedding and decoder)", f, W_word, dlogits, dW,
               known=T.known(lambda m: grads(m)[0], of=of))
    numerical = dict_gradients(r, "tied_mlm_forward", (ids, W_word, head), 2, dlogits)
    for name in head:
        compare(r, f"d {name} vs numerical gradient", dhead[name], numerical[name],
                known=T.known(lambda m, n=name: grads(m)[1][n], of=of))


# what each part checks: a notebook checks one function at a time (checks/__init__.py)
PARTS = ((("encoder_layer_forward", "encoder_layer_backward"), _check_layers),
         (("tied_mlm_forward", "tied_mlm_backward"), _check_tied_model))
