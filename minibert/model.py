"""The BERT encoder and its pre-training heads, forward and backward by hand.

``BertModel`` is the encoder (embeddings, L post-LayerNorm transformer
layers, tanh pooler on [CLS]).  ``BertForPreTraining`` adds the two
pre-training heads: masked language modelling (dense + GELU + LayerNorm, then
a decoder tied to the word embeddings plus its own bias) and next sentence
prediction (a 2-way linear layer on the pooled output).

Parameters are named and laid out exactly as in Hugging Face's
``BertForPreTraining`` (a Linear weight is [out, in]), so weights move both
ways.  Every forward keeps the caches its backward needs; ``backward()``
writes the gradients into ``model.params.grads`` (same names).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import dispatch as D   # the ops of minibert.ops, run by the reference or an accelerated kernel
from .backend import get_xp, is_cupy, resolve_dtype, to_numpy
from .config import BertConfig
from .params import ParamSpec, ParamStore


def _host_array(value):
    """A weight as an array: NumPy and CuPy arrays as they are, PyTorch tensors via NumPy."""
    value = _untorch(value)
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


def _untorch(value):
    """A PyTorch tensor (a checkpoint's weight, a tokenizer's ``return_tensors="pt"``) as a NumPy array.

    bfloat16 is widened to float32 first (exact: a bfloat16 is the upper half
    of a float32), since NumPy has no bfloat16.
    """
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        t = value.detach().cpu()
        return (t.float() if str(t.dtype) == "torch.bfloat16" else t).numpy()
    return value


def _check_flag(name, value):
    """A ``TypeError`` unless ``value`` is True or False (NumPy's bools too); returns it as a bool."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _is_seed(value):
    return (isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
            and value >= 0)


def _check_dtype(dtype):
    """The model's dtype from "float32"/"float64" (or the NumPy types); names the choices otherwise."""
    choices = "dtype must be one of ['float32', 'float64']"
    if dtype is None or not isinstance(dtype, (str, type, np.dtype)):
        raise ValueError(f"{choices}, got {dtype!r}")
    try:
        return resolve_dtype(dtype)
    except TypeError:
        raise ValueError(f"{choices}, got {dtype!r}") from None


@dataclass
class BertOutput:
    last_hidden_state: object   # (B, T, H)
    pooler_output: object       # (B, H)


@dataclass
class PreTrainingOutput:
    mlm_logits: object                 # (B, T, V), or (N, V) at the N labelled positions
    nsp_logits: object                 # (B, 2)
    loss: Optional[object] = None      # mlm_loss + nsp_loss (those given)
    mlm_loss: Optional[object] = None
    nsp_loss: Optional[object] = None
    mlm_positions: Optional[object] = None  # (N,) flat indices b*T + t of the labelled positions
    mlm_targets: Optional[object] = None    # (N,) the labels at those positions, on the model's device
    nsp_targets: Optional[object] = None    # (B,) the NSP labels, on the model's device


def _gelu_kind(hidden_act):
    return "none" if hidden_act == "gelu" else "tanh"


class BertModel:
    """BERT encoder: ``forward(input_ids, token_type_ids, attention_mask, train)``.

    Args:
        config: a ``BertConfig``.
        seed: fixes the initial weights and the dropout masks.
        dtype: "float32" (default) or "float64" (for checks).
        device: "cpu" (NumPy) or "cuda" (CuPy).
        mixed_precision: run every linear layer's products in float16
            (``layers.half_matmul``) against a float16 copy of the weights,
            refreshed from the float32 master weights at each forward;
            everything else (embeddings, LayerNorm, GELU, softmax, the
            losses, the gradients, AdamW) stays float32.  Fast on a GPU's
            tensor cores; on the CPU the same numbers, emulated more slowly.
            Train it with a loss scale (``backward(loss_scale=...)`` and
            ``optim.LossScaler``): small gradients underflow in float16.
    """

    prefix = ""  # HF's BertModel names have no prefix; BertForPreTraining's start with "bert."
    training = False  # what forward(train=None) does: the encoder defaults to inference

    def __init__(self, config: BertConfig, seed: int = 0, dtype="float32", device: str = "cpu",
                 mixed_precision: bool = False):
        if not isinstance(config, BertConfig):
            raise TypeError(f"config must be a minibert.BertConfig, got {type(config).__name__}")
        config.validate()
        if not _is_seed(seed):
            raise ValueError(f"seed must be an int >= 0, got {type(seed).__name__} {seed!r}")
        seed = int(seed)
        self.dtype = _check_dtype(dtype)
        mixed_precision = _check_flag("mixed_precision", mixed_precision)
        self.config = config
        self.xp = get_xp(device)
        self.device = device
        self.seed = seed
        if mixed_precision and self.dtype != np.float32:
            raise ValueError(f"mixed_precision keeps float32 master weights: it needs dtype='float32', "
                             f"got {self.dtype}")
        self.params = ParamStore(self._param_specs(), self.xp, self.dtype)
        word = self.prefix + "embeddings.word_embeddings.weight"
        self.params.init(seed, config.initializer_range, padding_rows=[(word, config.pad_token_id)])
        self.seed_dropout(seed)
        self._cache = None
        self.mixed_precision = mixed_precision
        if mixed_precision:
            self.params.enable_half()

    # ------------------------------------------------------------------ mode
    def train(self, mode: bool = True):
        """Make ``forward(train=None)`` run with dropout (``mode=True``) or without; returns the model."""
        self.training = _check_flag("mode", mode)
        return self

    def eval(self):
        """Inference mode: ``forward(train=None)`` runs without dropout; returns the model."""
        return self.train(False)

    def _mode(self, train):
        if train is None:
            return self.training
        if not isinstance(train, (bool, np.bool_)):
            raise TypeError(f"train must be True, False or None (the model's mode), got {train!r}")
        return bool(train)

    # ------------------------------------------------------------------ parameters
    def _param_specs(self):
        c, p = self.config, self.prefix
        H, I = c.hidden_size, c.intermediate_size

        def linear(name, n_out, n_in):
            return [ParamSpec(f"{name}.weight", (n_out, n_in), "normal", True),
                    ParamSpec(f"{name}.bias", (n_out,), "zeros", False)]

        def layernorm(name):
            return [ParamSpec(f"{name}.weight", (H,), "ones", False),
                    ParamSpec(f"{name}.bias", (H,), "zeros", False)]

        e = p + "embeddings."
        specs = [ParamSpec(e + "word_embeddings.weight", (c.vocab_size, H), "normal", True),
                 ParamSpec(e + "position_embeddings.weight", (c.max_position_embeddings, H), "normal", True),
                 ParamSpec(e + "token_type_embeddings.weight", (c.type_vocab_size, H), "normal", True),
                 *layernorm(e + "LayerNorm")]
        for i in range(c.num_hidden_layers):
            ly = f"{p}encoder.layer.{i}."
            # query, key, value registered back to back: the store keeps them
            # adjacent, and the layer uses them as one fused (3H, H) matrix
            qkv = [linear(ly + f"attention.self.{n}", H, H) for n in ("query", "key", "value")]
            specs += [q[0] for q in qkv] + [q[1] for q in qkv]
            specs += linear(ly + "attention.output.dense", H, H)
            specs += layernorm(ly + "attention.output.LayerNorm")
            specs += linear(ly + "intermediate.dense", I, H)
            specs += linear(ly + "output.dense", H, I)
            specs += layernorm(ly + "output.LayerNorm")
        specs += linear(p + "pooler.dense", H, H)
        return specs

    def num_parameters(self) -> int:
        """Number of trainable scalars (a tied matrix counted once)."""
        return self.params.num_parameters()

    def _matrices(self):
        """The weight matrices the linear layers multiply by: float16 copies in mixed precision."""
        return self.params.halves if self.mixed_precision else self.params.params

    def _layer_weights(self, i):
        """The weights of layer i, with Q, K, V fused into one (3H, H) matrix."""
        ly = f"{self.prefix}encoder.layer.{i}."
        P = self.params
        qkv = [ly + f"attention.self.{n}" for n in ("query", "key", "value")]
        return dict(
            Wqkv=P.fused([n + ".weight" for n in qkv], "half" if self.mixed_precision else "data"),
            bqkv=P.fused([n + ".bias" for n in qkv]),
            dWqkv=P.fused([n + ".weight" for n in qkv], "grad"),
            dbqkv=P.fused([n + ".bias" for n in qkv], "grad"),
            names=dict(Wqkv=qkv, ao=ly + "attention.output.dense", ln1=ly + "attention.output.LayerNorm",
                       inter=ly + "intermediate.dense", out=ly + "output.dense", ln2=ly + "output.LayerNorm"))

    # --------------------------------------------------------------------- dropout
    def seed_dropout(self, seed):
        """Re-seed the dropout masks: an int, or a tuple of ints such as (run_seed, step).

        The trainer calls it before every step, so that the masks depend only on
        the run's seed and the step number, and a resumed run draws the same ones.
        """
        if not (_is_seed(seed) or (isinstance(seed, tuple) and seed and all(map(_is_seed, seed)))):
            raise ValueError(f"seed_dropout(): seed must be an int >= 0 or a tuple of them, got {seed!r}")
        # a stream of its own, distinct from the one that drew the initial weights
        child = np.random.SeedSequence(seed).spawn(1)[0]
        if is_cupy(self.xp):
            self._dropout_rng = self.xp.random.RandomState(int(child.generate_state(1)[0]))
        else:
            self._dropout_rng = np.random.default_rng(child)
        self._uniform = lambda shape: D.uniform(self._dropout_rng, shape, self.dtype)

    # ---------------------------------------------------------------------- inputs
    def _check_ids(self, name, value, shape=None, upper=None, allowed=None):
        """Turn ``value`` into an int array on the host-or-device and check it."""
        xp = self.xp
        if value is None:
            return None
        value = _untorch(value)
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
            if T > self.config.max_position_embeddings:
                raise ValueError(f"{name} has sequences of length {T}, longer than "
                                 f"max_position_embeddings={self.config.max_position_embeddings}; "
                                 f"truncate them to at most that")
        elif tuple(value.shape) != tuple(shape):
            raise ValueError(f"{name} has shape {tuple(value.shape)} but input_ids has shape "
                             f"{tuple(shape)}; they must match")
        if value.size:
            lo, hi = int(value.min()), int(value.max())
            if allowed is not None:
                bad = set(to_numpy(xp.unique(xp.asarray(value))).tolist()) - set(allowed)
                if bad:
                    raise ValueError(f"{name} may only hold {sorted(allowed)}, found {sorted(bad)[:5]}")
            elif upper is not None and (lo < 0 or hi >= upper):
                raise ValueError(f"{name} must be in [0, {upper}), found values from {lo} to {hi}")
        return xp.asarray(value, dtype=xp.int64)

    def _prepare(self, input_ids, token_type_ids, attention_mask):
        c = self.config
        ids = self._check_ids("input_ids", input_ids, upper=c.vocab_size)
        shape = ids.shape
        types = self._check_ids("token_type_ids", token_type_ids, shape, upper=c.type_vocab_size)
        mask = self._check_ids("attention_mask", attention_mask, shape, allowed=(0, 1))
        if types is None:
            types = self.xp.zeros(shape, dtype=self.xp.int64)
        if mask is None:
            mask = self.xp.ones(shape, dtype=self.xp.int64)
        return ids, types, mask

    # --------------------------------------------------------------------- encoder
    def _encode(self, ids, types, mask, train):
        """ids, types, mask: (B, T) int  ->  hidden (B, T, H), pooled (B, H), caches."""
        c, P, xp = self.config, self.params.params, self.xp
        if self.mixed_precision:
            self.params.refresh_half()   # the float16 weights follow the master weights' last update
        W = self._matrices()
        p_h, p_a = c.hidden_dropout_prob, c.attention_probs_dropout_prob
        gelu = _gelu_kind(c.hidden_act)
        e = self.prefix + "embeddings."
        B, T = ids.shape
        caches = {}

        # embeddings: word + position + segment, then LayerNorm and dropout
        x_word, caches["word"] = D.embedding_forward(ids, P[e + "word_embeddings.weight"])
        x = x_word + P[e + "position_embeddings.weight"][:T] + P[e + "token_type_embeddings.weight"][types]
        x, caches["emb_ln"] = D.layernorm_forward(x, P[e + "LayerNorm.weight"], P[e + "LayerNorm.bias"],
                                                  c.layer_norm_eps)
        x, caches["emb_drop"] = D.dropout_forward(x, p_h, self._uniform, train)
        caches["types"] = types

        bias = D.attention_mask_bias(mask, self.dtype)
        A = c.num_attention_heads
        caches["layers"] = []
        for i in range(c.num_hidden_layers):
            w = self._layer_weights(i)
            n = w["names"]
            lc = {}
            # self-attention: one matmul gives Q, K and V
            qkv, lc["qkv"] = D.linear_forward(x, w["Wqkv"], w["bqkv"])           # (B, T, 3H)
            # (B, T, 3, A, D) -> (3, B, A, T, D), copied once so that each head's (T, D)
            # block is contiguous: the batched products below then run at full speed
            q, k, v = xp.ascontiguousarray(qkv.reshape(B, T, 3, A, c.head_dim).transpose(2, 0, 3, 1, 4))
            ctx, lc["att"] = D.attention_forward(q, k, v, bias, p_a, self._uniform, train)
            a, lc["ao"] = D.linear_forward(D.merge_heads(ctx), W[n["ao"] + ".weight"], P[n["ao"] + ".bias"])
            a, lc["drop1"] = D.dropout_forward(a, p_h, self._uniform, train)
            # post-LN residual: LayerNorm(x + sublayer(x))
            h, lc["ln1"] = D.layernorm_forward(a + x, P[n["ln1"] + ".weight"], P[n["ln1"] + ".bias"],
                                               c.layer_norm_eps)
            # feed-forward: H -> I -> H with GELU
            f, lc["inter"] = D.linear_forward(h, W[n["inter"] + ".weight"], P[n["inter"] + ".bias"])
            f, lc["gelu"] = D.gelu_forward(f, gelu)
            f, lc["out"] = D.linear_forward(f, W[n["out"] + ".weight"], P[n["out"] + ".bias"])
            f, lc["drop2"] = D.dropout_forward(f, p_h, self._uniform, train)
            x, lc["ln2"] = D.layernorm_forward(f + h, P[n["ln2"] + ".weight"], P[n["ln2"] + ".bias"],
                                               c.layer_norm_eps)
            caches["layers"].append(lc)

        # pooler: dense + tanh on the hidden state of [CLS] (position 0)
        pl = self.prefix + "pooler.dense"
        pooled, caches["pool_lin"] = D.linear_forward(x[:, 0], W[pl + ".weight"], P[pl + ".bias"])
        pooled, caches["pool_tanh"] = D.tanh_forward(pooled)
        caches["shape"] = (B, T)
        return x, pooled, caches

    def _encode_backward(self, dx, dpooled, caches):
        """dx: (B, T, H) gradient of the last hidden state, dpooled: (B, H) or None."""
        c = self.config
        put = self._put_grad
        B, T = caches["shape"]
        A = c.num_attention_heads
        if dpooled is not None:
            pl = self.prefix + "pooler.dense"
            d = D.tanh_backward(dpooled, caches["pool_tanh"])
            dcls, dW, db = D.linear_backward(d, caches["pool_lin"])
            put(pl + ".weight", dW)
            put(pl + ".bias", db)
            dx = dx.copy()
            dx[:, 0] += dcls

        for i in reversed(range(c.num_hidden_layers)):
            lc = caches["layers"][i]
            w = self._layer_weights(i)
            n = w["names"]
            dsum, dg, db = D.layernorm_backward(dx, lc["ln2"])
            put(n["ln2"] + ".weight", dg)
            put(n["ln2"] + ".bias", db)
            df = D.dropout_backward(dsum, lc["drop2"])
            df, dW, db = D.linear_backward(df, lc["out"])
            put(n["out"] + ".weight", dW)
            put(n["out"] + ".bias", db)
            df = D.gelu_backward(df, lc["gelu"])
            dh, dW, db = D.linear_backward(df, lc["inter"])
            put(n["inter"] + ".weight", dW)
            put(n["inter"] + ".bias", db)
            dh += dsum  # the residual path around the feed-forward block
            dsum, dg, db = D.layernorm_backward(dh, lc["ln1"])
            put(n["ln1"] + ".weight", dg)
            put(n["ln1"] + ".bias", db)
            da = D.dropout_backward(dsum, lc["drop1"])
            dctx, dW, db = D.linear_backward(da, lc["ao"])
            put(n["ao"] + ".weight", dW)
            put(n["ao"] + ".bias", db)
            # dq, dk, dv written side by side into one (3, B, A, T, D) array, then
            # (3, B, A, T, D) -> (B, T, 3, A, D) -> (B, T, 3H): the inverse of the forward split
            d3 = self.xp.empty((3, B, A, T, c.head_dim), dtype=self.dtype)
            D.attention_backward(D.split_heads(dctx, A), lc["att"], out=d3)
            dqkv = d3.transpose(1, 3, 0, 2, 4).reshape(B, T, 3 * c.hidden_size)
            dx, dW, db = D.linear_backward(dqkv, lc["qkv"])
            self._put_fused(w["dWqkv"], dW)
            self._put_fused(w["dbqkv"], db)
            dx += dsum  # the residual path around the attention block

        e = self.prefix + "embeddings."
        dx = D.dropout_backward(dx, caches["emb_drop"])
        dx, dg, db = D.layernorm_backward(dx, caches["emb_ln"])
        put(e + "LayerNorm.weight", dg)
        put(e + "LayerNorm.bias", db)
        # the position embedding of position t receives the gradient of every sequence at t
        dpos = self.xp.zeros_like(self.params.params[e + "position_embeddings.weight"])
        dpos[:T] = dx.sum(axis=0)
        put(e + "position_embeddings.weight", dpos)
        put(e + "token_type_embeddings.weight",
            D.embedding_backward(dx, (caches["types"], (c.type_vocab_size, c.hidden_size))))
        # added into the gradient buffer, which may already hold the tied MLM decoder's share
        D.embedding_backward(dx, caches["word"], padding_idx=c.pad_token_id,
                             out=self.params.grads[e + "word_embeddings.weight"])

    def _put_grad(self, name, g):
        self._put_fused(self.params.grads[name], g)

    def _put_fused(self, target, g):
        if self._accumulate:
            target += g
        else:
            target[...] = g

    # ----------------------------------------------------------------- public API
    def forward(self, input_ids, token_type_ids=None, attention_mask=None, train=None) -> BertOutput:
        """input_ids, token_type_ids, attention_mask: (B, T) ints (arrays or nested lists).

        Returns ``BertOutput(last_hidden_state (B, T, H), pooler_output (B, H))``.
        ``train=True`` turns dropout on; ``None`` follows the model's mode
        (``model.training``, set by ``train()``/``eval()``).
        """
        train = self._mode(train)
        ids, types, mask = self._prepare(input_ids, token_type_ids, attention_mask)
        h, pooled, caches = self._encode(ids, types, mask, train)
        self._cache = caches
        return BertOutput(h, pooled)

    __call__ = forward

    def backward(self, d_last_hidden_state, d_pooler_output=None, accumulate=False):
        """Back-propagate through the last forward; gradients go to ``self.params.grads``.

        d_last_hidden_state: (B, T, H); d_pooler_output: (B, H) or None.
        ``accumulate=True`` adds to the stored gradients instead of overwriting them.
        """
        accumulate = _check_flag("accumulate", accumulate)
        if self._cache is None:
            raise RuntimeError("backward() needs a forward() first (each forward allows one backward)")
        B, T = self._cache["shape"]
        H = self.config.hidden_size
        dh = self._as_grad("d_last_hidden_state", d_last_hidden_state, (B, T, H))
        dp = None if d_pooler_output is None else self._as_grad("d_pooler_output", d_pooler_output, (B, H))
        caches, self._cache = self._cache, None     # spent only once the arguments are accepted
        self._begin_backward(accumulate)
        self._encode_backward(dh, dp, caches)

    def _as_grad(self, name, g, shape):
        g = _untorch(g)
        if getattr(g, "dtype", np.dtype(float)).kind not in "fiu":
            raise TypeError(f"{name} must be an array of numbers, got {getattr(g, 'dtype', type(g).__name__)}")
        try:
            g = self.xp.asarray(g, dtype=self.dtype)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be an array of numbers, got {type(g).__name__} ({exc})") from None
        if tuple(g.shape) != tuple(shape):
            raise ValueError(f"{name} must have shape {tuple(shape)} (that of the forward output), "
                             f"got {tuple(g.shape)}")
        return g

    def _begin_backward(self, accumulate):
        self._accumulate = accumulate
        if not accumulate:
            # parameters a backward may not touch (e.g. an unused head) must read 0
            self.params.zero_grad()

    def release(self):
        """Forget the caches of the last forward (its activations), e.g. after an evaluation."""
        self._cache = None

    def zero_grad(self):
        self.params.zero_grad()

    # ------------------------------------------------------------------ state dict
    def _tied(self):
        """Extra HF names that alias stored parameters: {alias: stored name}."""
        return {}

    def state_dict(self) -> dict:
        """{HF name: array} of the live parameters (views: copy before changing them)."""
        d = dict(self.params.params)
        d.update({alias: d[name] for alias, name in self._tied().items()})
        return d

    def grad_state_dict(self) -> dict:
        """{HF name: gradient} from the last backward, same names and layouts as ``state_dict``."""
        d = dict(self.params.grads)
        d.update({alias: d[name] for alias, name in self._tied().items()})
        return d

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        """Copy weights in from ``{name: array}`` (NumPy, CuPy, PyTorch or anything ``np.asarray`` takes).

        Names may carry HF's ``bert.`` prefix or not, and LayerNorm parameters
        may use the original BERT names ``gamma``/``beta`` (as transformers
        accepts).  A tied alias (``cls.predictions.decoder.weight``/``.bias``)
        stands in for the weight it is tied to when that one is absent, and
        must equal it when both are given.  Unknown, missing or repeated names,
        wrong shapes, tensors that are not floating point (bool, int) and NaN
        or infinite values (also those that only overflow in the model's
        dtype) raise one ``ValueError`` listing them all; the model is left
        unchanged in that case.
        """
        if not hasattr(state, "items"):
            raise TypeError(f"state must be a dict of arrays, got {type(state).__name__}")
        strict = _check_flag("strict", strict)
        own = self.params.params
        tied = self._tied()
        values, aliases, unknown, bad, given = {}, {}, [], [], {}
        for key, value in state.items():
            name = self._canonical_name(str(key))
            if name in given:
                bad.append(f"{key} repeats {given[name]!r} (the same parameter)")
                continue
            given[name] = key
            if name not in own and name not in tied:
                unknown.append(key)
                continue
            try:
                arr = _host_array(value)
            except TypeError as exc:
                bad.append(f"{key}: {exc}")
                continue
            target = tied.get(name, name)
            if tuple(arr.shape) != tuple(own[target].shape):
                bad.append(f"{key}: expected shape {tuple(own[target].shape)}, got {tuple(arr.shape)}")
                continue
            if arr.dtype.kind != "f":
                bad.append(f"{key}: a weight must be floating point, got dtype {arr.dtype}")
                continue
            source = arr
            with np.errstate(over="ignore"):        # an overflow is reported just below
                arr = self.xp.asarray(arr, dtype=self.dtype)
            n_bad = int(self.xp.count_nonzero(~self.xp.isfinite(arr)))
            if n_bad:
                rounded = ("" if not bool(np.isfinite(source).all()) else
                           f" once rounded to the model's {self.dtype} (from {source.dtype})")
                bad.append(f"{key}: {n_bad} of {arr.size} values are NaN or infinite{rounded}")
                continue
            (aliases if name in tied else values)[name] = arr
        for alias, arr in aliases.items():
            target = tied[alias]
            if target not in values:          # the alias alone carries the tied weight
                values[target] = arr
            elif not np.array_equal(to_numpy(arr), to_numpy(values[target])):
                bad.append(f"{alias} differs from {target}, but minibert ties them")
        # a name given with a bad shape or bad values is reported above, not as missing
        provided = {tied.get(name, name) for name in given}
        missing = [n for n in own if n not in provided]
        problems = []
        if strict and missing:
            problems.append(f"missing keys: {missing}")
        if strict and unknown:
            problems.append(f"unknown keys: {unknown}")
        if bad:
            problems.append("; ".join(bad))
        if problems:
            raise ValueError("load_state_dict: " + "; ".join(problems))
        for name, arr in values.items():
            own[name][...] = arr

    _LEGACY_SUFFIXES = {".gamma": ".weight", ".beta": ".bias"}   # LayerNorm in the original BERT

    def _canonical_name(self, key):
        for old, new in self._LEGACY_SUFFIXES.items():
            if key.endswith("LayerNorm" + old):
                key = key[: -len(old)] + new
        if self.prefix and not key.startswith(self.prefix) and not key.startswith("cls."):
            return self.prefix + key
        if not self.prefix and key.startswith("bert."):
            return key[len("bert."):]
        return key

    # ----------------------------------------------------------------- save / load
    def save_pretrained(self, directory) -> None:
        """Write ``config.json`` and ``model.safetensors`` in Hugging Face's format."""
        from .hf_io import save_pretrained
        save_pretrained(self, directory)

    @classmethod
    def from_pretrained(cls, directory, dtype="float32", device="cpu", seed=0, mixed_precision=False):
        """Load a directory written by ``save_pretrained`` (minibert's or transformers').

        The model comes back in inference mode (``model.training`` False: no
        dropout unless a forward asks for it); ``model.train()`` to train it.
        """
        from .hf_io import from_pretrained
        return from_pretrained(cls, directory, dtype=dtype, device=device, seed=seed,
                               mixed_precision=mixed_precision)


class BertForPreTraining(BertModel):
    """BERT with its masked-LM and next-sentence-prediction heads.

    ``forward(input_ids, token_type_ids, attention_mask, mlm_labels, nsp_labels, train=None)``;
    ``backward()`` after a forward with labels fills ``self.params.grads``.
    A new model is in training mode (dropout on); one from ``from_pretrained``
    is in inference mode, as in transformers.  ``train()``/``eval()`` switch.
    """

    prefix = "bert."
    training = True   # a pre-training model defaults to training (dropout on)

    def _param_specs(self):
        H, V = self.config.hidden_size, self.config.vocab_size
        return super()._param_specs() + [
            ParamSpec("cls.predictions.transform.dense.weight", (H, H), "normal", True),
            ParamSpec("cls.predictions.transform.dense.bias", (H,), "zeros", False),
            ParamSpec("cls.predictions.transform.LayerNorm.weight", (H,), "ones", False),
            ParamSpec("cls.predictions.transform.LayerNorm.bias", (H,), "zeros", False),
            ParamSpec("cls.predictions.bias", (V,), "zeros", False),
            ParamSpec("cls.seq_relationship.weight", (2, H), "normal", True),
            ParamSpec("cls.seq_relationship.bias", (2,), "zeros", False),
        ]

    def _tied(self):
        # the decoder reuses the word embeddings, and its bias is cls.predictions.bias
        return {"cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
                "cls.predictions.decoder.bias": "cls.predictions.bias"}

    def forward(self, input_ids, token_type_ids=None, attention_mask=None,
                mlm_labels=None, nsp_labels=None, train=None) -> PreTrainingOutput:
        """input_ids, token_type_ids, attention_mask, mlm_labels: (B, T) ints; nsp_labels: (B,).

        mlm_labels: the original token id at the positions to predict, -100 elsewhere.
        nsp_labels: 0 = B follows A, 1 = B is a random sentence.

        Without ``mlm_labels`` the decoder runs at every position and
        ``mlm_logits`` is (B, T, V).  With them it runs only at the N
        labelled positions (row-major order) and ``mlm_logits`` is (N, V):
        in training the vocabulary projection dominates the cost, and the
        other positions do not enter the loss.
        """
        c, P, xp = self.config, self.params.params, self.xp
        train = self._mode(train)
        ids, types, mask = self._prepare(input_ids, token_type_ids, attention_mask)
        B, T = ids.shape
        labels = self._check_labels(mlm_labels, nsp_labels, (B, T))
        h, pooled, caches = self._encode(ids, types, mask, train)
        W = self._matrices()

        # MLM head, only where it is needed
        if labels["mlm"] is not None:
            flat = labels["mlm"].reshape(-1)
            positions = xp.flatnonzero(flat != -100)
            hm = h.reshape(B * T, c.hidden_size)[positions]            # (N, H)
        else:
            positions = None
            hm = h
        t, caches["mlm_dense"] = D.linear_forward(hm, W["cls.predictions.transform.dense.weight"],
                                                  P["cls.predictions.transform.dense.bias"])
        t, caches["mlm_gelu"] = D.gelu_forward(t, _gelu_kind(c.hidden_act))
        t, caches["mlm_ln"] = D.layernorm_forward(t, P["cls.predictions.transform.LayerNorm.weight"],
                                                  P["cls.predictions.transform.LayerNorm.bias"],
                                                  c.layer_norm_eps)
        mlm_logits, caches["decoder"] = D.linear_forward(t, W["bert.embeddings.word_embeddings.weight"],
                                                         P["cls.predictions.bias"])
        # NSP head on the pooled [CLS]
        nsp_logits, caches["nsp"] = D.linear_forward(pooled, W["cls.seq_relationship.weight"],
                                                     P["cls.seq_relationship.bias"])

        out = PreTrainingOutput(mlm_logits=mlm_logits, nsp_logits=nsp_logits, mlm_positions=positions,
                                nsp_targets=labels["nsp"])
        losses = []
        if labels["mlm"] is not None:
            out.mlm_targets = flat[positions]
            out.mlm_loss, caches["mlm_ce"] = D.softmax_cross_entropy_forward(mlm_logits, out.mlm_targets)
            losses.append(out.mlm_loss)
        if labels["nsp"] is not None:
            out.nsp_loss, caches["nsp_ce"] = D.softmax_cross_entropy_forward(nsp_logits, labels["nsp"])
            losses.append(out.nsp_loss)
        if losses:
            out.loss = sum(losses[1:], losses[0])
            caches["positions"] = positions
            self._cache = caches
        else:
            self._cache = None
        return out

    __call__ = forward

    def _check_labels(self, mlm_labels, nsp_labels, shape):
        xp, V = self.xp, self.config.vocab_size
        out = {"mlm": None, "nsp": None}
        if mlm_labels is not None:
            m = self._check_ids("mlm_labels", mlm_labels, shape)  # range checked below (-100 allowed)
            bad = (m != -100) & ((m < 0) | (m >= V))
            if m.size and bool(bad.any()):
                raise ValueError(f"mlm_labels must be -100 (ignored) or a token id in [0, {V}), "
                                 f"found {int(m[bad][0])}")
            out["mlm"] = m
        if nsp_labels is not None:
            n = _untorch(nsp_labels)
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

    def backward(self, accumulate=False, loss_scale=1.0):
        """Gradients of ``loss`` (from the last forward with labels) into ``self.params.grads``.

        ``loss_scale``: differentiate ``loss_scale * loss`` instead, so that
        small gradients survive float16 in mixed precision; divide the
        gradients by it before the optimiser step (``optim.LossScaler``).
        """
        number = isinstance(loss_scale, (int, float, np.integer, np.floating))
        if not number or isinstance(loss_scale, (bool, np.bool_)) or not (0 < loss_scale < float("inf")):
            raise ValueError(f"loss_scale must be a positive finite number, got {loss_scale!r}")
        accumulate = _check_flag("accumulate", accumulate)
        if self._cache is None:
            raise RuntimeError("backward() needs a forward() with mlm_labels and/or nsp_labels first "
                               "(there is no loss to differentiate; each forward allows one backward)")
        caches, self._cache = self._cache, None
        c, xp = self.config, self.xp
        B, T = caches["shape"]
        H = c.hidden_size
        self._begin_backward(accumulate)
        put = self._put_grad

        dpooled = None
        if "nsp_ce" in caches:
            dnsp = D.softmax_cross_entropy_backward(loss_scale, caches["nsp_ce"])
            dpooled, dW, db = D.linear_backward(dnsp, caches["nsp"])
            put("cls.seq_relationship.weight", dW)
            put("cls.seq_relationship.bias", db)

        dh = xp.zeros((B, T, H), dtype=self.dtype)
        if "mlm_ce" in caches:
            dlogits = D.softmax_cross_entropy_backward(loss_scale, caches["mlm_ce"])
            dt, dW_dec, db = D.linear_backward(dlogits, caches["decoder"])
            # the tied decoder's share of the word-embedding gradient (the embedding adds its own later)
            put("bert.embeddings.word_embeddings.weight", dW_dec)
            del dW_dec, dlogits   # (V, H) and (n_masked, V): freed before the encoder's backward
            put("cls.predictions.bias", db)
            dt, dg, db = D.layernorm_backward(dt, caches["mlm_ln"])
            put("cls.predictions.transform.LayerNorm.weight", dg)
            put("cls.predictions.transform.LayerNorm.bias", db)
            dt = D.gelu_backward(dt, caches["mlm_gelu"])
            dhm, dW, db = D.linear_backward(dt, caches["mlm_dense"])
            put("cls.predictions.transform.dense.weight", dW)
            put("cls.predictions.transform.dense.bias", db)
            # positions are distinct, so a plain indexed assignment scatters the rows back
            dh.reshape(B * T, H)[caches["positions"]] = dhm

        self._encode_backward(dh, dpooled, caches)
