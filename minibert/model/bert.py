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

import numpy as np

from ..accel.counter_rng import CounterUniform
from ..backend import get_xp, is_cupy
from ..checks import check_flag
from ..kernels import select_ops
from .config import BertConfig
from .encoder import (backward_linear, embedding_weights, embeddings_backward, embeddings_forward, embeddings_specs,
                      encoder_backward, encoder_forward, layer_specs, layer_weights, layernorm_specs, linear_specs,
                      linear_weights, norm_weights)
from .heads import head_specs, head_weights, heads_backward, heads_forward
from .inputs import as_grad, check_dtype, check_labels, check_loss_counts, check_loss_scale, is_seed, prepare_inputs
from .outputs import BertOutput, PreTrainingOutput
from .params import ParamStore
from .state_dict import load_state_dict

FINAL_NORM = "encoder.LayerNorm"     # a pre-LN model's last LayerNorm (no BERT checkpoint has it)


class BertModel:
    """BERT encoder: ``forward(input_ids, token_type_ids, attention_mask, train)``.

    Args:
        config: a ``BertConfig``.
        seed: fixes the initial weights and the dropout masks.
        dtype: "float32" (default) or "float64" (for checks).
        device: "cpu" (NumPy) or "cuda" (CuPy).
        mixed_precision: the products of every linear layer (against a float16
            copy of the float32 master weights, made at each forward) and of
            attention in float16 (``ops.half_matmul``); everything else
            (embeddings, LayerNorm, GELU, softmax, the losses, the
            gradients, AdamW) stays float32.  Fast on a GPU's
            tensor cores; on the CPU the same numbers, emulated more slowly.
            Train it with a loss scale (``backward(loss_scale=...)`` and
            ``optim.LossScaler``): small gradients underflow in float16.
        pre_ln: pre-LayerNorm layers and a last LayerNorm (``encoder.LayerNorm``)
            instead of BERT's post-LN ones; ``save_pretrained`` refuses such a model.
        kernels: "reference" (default: ``minibert.ops``, the definition) or
            "fast" (the accelerated kernels for the device and dtype, as the
            command line runs them); the model calls ``self.ops`` alone.
    """

    prefix = ""  # HF's BertModel names have no prefix; BertForPreTraining's start with "bert."
    training = False  # what forward(train=None) does: the encoder defaults to inference
    def __init__(self, config: BertConfig, seed: int = 0, dtype="float32", device: str = "cpu",
                 mixed_precision: bool = False, kernels="reference", pre_ln: bool = False):
        if not isinstance(config, BertConfig):
            raise TypeError(f"config must be a minibert.BertConfig, got {type(config).__name__}")
        config.validate()
        if not is_seed(seed):
            raise ValueError(f"seed must be an int >= 0, got {type(seed).__name__} {seed!r}")
        seed = int(seed)
        self.dtype = check_dtype(dtype)
        mixed_precision = check_flag("mixed_precision", mixed_precision)
        self.config = BertConfig(**config.to_dict())   # a copy: the weights are made for these sizes
        self.pre_ln = check_flag("pre_ln", pre_ln)     # before the parameters: it adds the final LayerNorm
        self.xp = get_xp(device)
        self.device, self.seed = device, seed
        if mixed_precision and self.dtype != np.float32:
            raise ValueError(f"mixed_precision keeps float32 master weights: it needs dtype='float32', "
                             f"got {self.dtype}")
        self.ops = select_ops(kernels, device, self.dtype)
        self.params = ParamStore(self._param_specs(), self.xp, self.dtype, self.ops)
        word = self.prefix + "embeddings.word_embeddings.weight"
        self.params.init(seed, config.initializer_range, padding_rows=[(word, config.pad_token_id)])
        self.seed_dropout(seed)
        self._cache = None
        self.mixed_precision = mixed_precision
        if mixed_precision:
            self.params.enable_half()
        # the weights by role: views into self.params (float16 copies of the matrices in mixed precision)
        self.embeddings = embedding_weights(self.params, self.prefix + "embeddings.")
        self.layers = [layer_weights(self.params, f"{self.prefix}encoder.layer.{i}.", mixed_precision)
                       for i in range(config.num_hidden_layers)]
        self.pooler = linear_weights(self.params, self.prefix + "pooler.dense", mixed_precision)
        self.final_norm = norm_weights(self.params, self.prefix + FINAL_NORM) if self.pre_ln else None

    # ------------------------------------------------------------------ mode
    def train(self, mode: bool = True):
        """Make ``forward(train=None)`` run with dropout (``mode=True``) or without; returns the model."""
        self.training = check_flag("mode", mode)
        return self

    def eval(self):
        """Inference mode: ``forward(train=None)`` runs without dropout; returns the model."""
        return self.train(False)

    def _mode(self, train):
        if train is None:
            return self.training
        return check_flag("train", train, "True, False or None (the model's mode)")

    # ------------------------------------------------------------------ parameters
    def _param_specs(self):
        c, p = self.config, self.prefix
        specs = embeddings_specs(p + "embeddings.", c)
        for i in range(c.num_hidden_layers):
            specs += layer_specs(f"{p}encoder.layer.{i}.", c.hidden_size, c.intermediate_size)
        if self.pre_ln:     # the residual stream normalised once, after the last layer
            specs += layernorm_specs(p + FINAL_NORM, c.hidden_size)
        return specs + linear_specs(p + "pooler.dense", c.hidden_size, c.hidden_size)

    def num_parameters(self) -> int:
        """Number of trainable scalars (a tied matrix counted once)."""
        return self.params.num_parameters()

    # --------------------------------------------------------------------- dropout
    def seed_dropout(self, seed):
        """Re-seed the dropout masks: an int, or a tuple of ints such as (run_seed, step).

        The trainer calls it before every step, so that the masks depend only on
        the run's seed and the step number, and a resumed run draws the same ones.
        """
        if not (is_seed(seed) or (isinstance(seed, tuple) and seed and all(map(is_seed, seed)))):
            raise ValueError(f"seed_dropout(): seed must be an int >= 0 or a tuple of them, got {seed!r}")
        # a stream of its own, distinct from the one that drew the initial weights
        child = np.random.SeedSequence(seed).spawn(1)[0]
        if is_cupy(self.xp):
            # counter-based: each dropout kernel computes its own uniforms from a key (accel/counter_rng.py)
            old = getattr(self, "_uniform", None)     # (reseeded: a captured graph reads the same base array)
            self._uniform = old if isinstance(old, CounterUniform) else CounterUniform(0, self.xp, self.dtype)
            self._uniform.reseed(int(child.generate_state(1, np.uint64)[0]))
        else:
            rng = self._dropout_rng = np.random.default_rng(child)
            self._uniform = lambda shape: self.ops.uniform(rng, shape, self.dtype)

    # --------------------------------------------------------------------- encoder
    def _encode(self, ids, types, mask, train):
        """ids, types, mask: (B, T) int  ->  hidden (B, T, H), pooled (B, H), caches."""
        c, ops, caches = self.config, self.ops, {"shape": ids.shape}
        if self.mixed_precision:
            self.params.refresh_half()   # the float16 weights follow the master weights' last update
        x, caches["embeddings"] = embeddings_forward(ops, ids, types, self.embeddings, c, self._uniform, train)
        # the transformer layers (encoder.py), and a pre-LN model's last LayerNorm
        bias = ops.attention_mask_bias(mask, self.dtype)
        x, caches["encoder"] = encoder_forward(ops, x, self.layers, self.final_norm, bias, c, self._uniform, train)

        # pooler: dense + tanh on the hidden state of [CLS] (position 0)
        pooled, caches["pool_lin"] = ops.linear_forward(x[:, 0], self.pooler.weight, None)   # tanh adds the bias
        pooled, caches["pool_tanh"] = ops.tanh_forward(pooled, bias=self.pooler.bias)
        return x, pooled, caches

    def _encode_backward(self, dx, dpooled, caches):
        """dx: (B, T, H) gradient of the last hidden state, dpooled: (B, H) or None."""
        ops, add = self.ops, self.params.add_grad  # the one way a gradient reaches its buffer
        if dpooled is not None:
            # (float16 in mixed precision: the add below widens it)
            dcls = backward_linear(ops, ops.tanh_backward(dpooled, caches["pool_tanh"]), caches["pool_lin"],
                                   self.pooler, add, half_dx=True)
            dx = dx.copy()
            dx[:, 0] += dcls
        dx = encoder_backward(ops, dx, caches["encoder"], self.layers, self.final_norm, add)
        embeddings_backward(ops, dx, caches["embeddings"], self.embeddings, self.config, add)
        self.params.apply_grads()    # on a GPU the adds were kept for this: a launch or two, not one each

    # ----------------------------------------------------------------- public API
    def forward(self, input_ids, token_type_ids=None, attention_mask=None, train=None) -> BertOutput:
        """input_ids, token_type_ids, attention_mask: (B, T) ints (arrays or nested lists).

        Returns ``BertOutput(last_hidden_state (B, T, H), pooler_output (B, H))``.
        ``train=True`` turns dropout on; ``None`` follows the model's mode
        (``model.training``, set by ``train()``/``eval()``).
        """
        train = self._mode(train)
        ids, types, mask = prepare_inputs(self.xp, self.config, input_ids, token_type_ids, attention_mask)
        h, pooled, caches = self._encode(ids, types, mask, train)
        self._cache = caches
        return BertOutput(h, pooled)

    __call__ = forward

    def backward(self, d_last_hidden_state, d_pooler_output=None, accumulate=False):
        """Back-propagate through the last forward; gradients go to ``self.params.grads``.

        d_last_hidden_state: (B, T, H); d_pooler_output: (B, H) or None.
        ``accumulate=True`` adds to the stored gradients instead of overwriting them.
        """
        accumulate = check_flag("accumulate", accumulate)
        if self._cache is None:
            raise RuntimeError("backward() needs a forward() first (each forward allows one backward)")
        B, T = self._cache["shape"]
        H = self.config.hidden_size
        dh = as_grad(self.xp, self.dtype, "d_last_hidden_state", d_last_hidden_state, (B, T, H))
        dp = None if d_pooler_output is None else as_grad(self.xp, self.dtype, "d_pooler_output",
                                                          d_pooler_output, (B, H))
        caches, self._cache = self._cache, None     # spent only once the arguments are accepted
        self._begin_backward(accumulate)
        self._encode_backward(dh, dp, caches)

    def _begin_backward(self, accumulate):   # every gradient is added: to 0, or to what is there
        if not accumulate:
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

    def load_state_dict(self, state: dict, strict: bool = True):
        """Copy weights in from ``{name: array}`` (NumPy, CuPy, PyTorch or anything ``np.asarray`` takes).

        Names may carry HF's ``bert.`` prefix or not, and LayerNorm parameters
        may use the original BERT names ``gamma``/``beta`` (as transformers
        accepts).  A tied alias (``cls.predictions.decoder.weight``/``.bias``)
        stands in for the weight it is tied to when that one is absent, and
        must equal it when both are given.  Unknown, missing or repeated names,
        wrong shapes, tensors that are not floating point (bool, int) and NaN
        or infinite values (also those that only overflow in the model's
        dtype) raise one ``ValueError`` listing them all; the model is left
        unchanged in that case.  ``strict=False`` allows missing and unknown
        names; the ``LoadResult`` returned lists them (``.missing``, ``.unexpected``).
        """
        return load_state_dict(self, state, strict)

    # ----------------------------------------------------------------- save / load
    def save_pretrained(self, directory) -> None:
        """Write ``config.json`` and ``model.safetensors`` in Hugging Face's format."""
        from .hf_io import save_pretrained
        save_pretrained(self, directory)

    @classmethod
    def from_pretrained(cls, directory, dtype="float32", device="cpu", seed=0, mixed_precision=False, strict=True,
                        kernels="reference"):
        """Load a directory written by ``save_pretrained`` (minibert's or transformers'), in inference mode
        (``model.train()`` to train it).  ``strict=False`` loads a checkpoint that lacks some weights (those
        keep their initial values) or holds others: a warning names them, ``model.loading_info`` lists them.
        """
        from .hf_io import from_pretrained
        return from_pretrained(cls, directory, dtype=dtype, device=device, seed=seed,
                               mixed_precision=mixed_precision, strict=strict, kernels=kernels)


class BertForPreTraining(BertModel):
    """BERT with its masked-LM and next-sentence-prediction heads.

    ``forward(input_ids, token_type_ids, attention_mask, mlm_labels, nsp_labels, train=None)``;
    ``backward()`` after a forward with labels fills ``self.params.grads``.
    A new model is in training mode (dropout on); one from ``from_pretrained``
    is in inference mode, as in transformers.  ``train()``/``eval()`` switch.
    """

    prefix = "bert."
    training = True   # a pre-training model defaults to training (dropout on)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.heads = head_weights(self.params, self.mixed_precision)

    def _param_specs(self):
        return super()._param_specs() + head_specs(self.config.hidden_size, self.config.vocab_size)

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
        train = self._mode(train)
        ids, types, mask = prepare_inputs(self.xp, self.config, input_ids, token_type_ids, attention_mask)
        labels = check_labels(self.xp, self.config, mlm_labels, nsp_labels, ids.shape)
        return self._forward(ids, types, mask, labels, train)

    __call__ = forward

    def _forward(self, ids, types, mask, labels, train):
        """``forward`` on checked inputs on the device; ``labels`` as ``check_labels`` makes them, or with
        "targets" at "positions" (``train/graph_step.py`` pads them to a fixed count, -100 there)."""
        h, pooled, caches = self._encode(ids, types, mask, train)
        (mlm_logits, nsp_logits, positions), caches["heads"] = heads_forward(
            self.ops, h, pooled, self.heads, self.config, labels["mlm"], labels["positions"])
        out = PreTrainingOutput(mlm_logits=mlm_logits, nsp_logits=nsp_logits, mlm_positions=positions,
                                nsp_targets=labels["nsp"])
        losses = []
        if labels["mlm"] is not None:
            given = labels.get("targets")
            out.mlm_targets = labels["mlm"].reshape(-1)[positions] if given is None else given
            out.mlm_loss, caches["mlm_ce"] = self.ops.softmax_cross_entropy_forward(mlm_logits, out.mlm_targets)
            losses.append(out.mlm_loss)
        if labels["nsp"] is not None:
            out.nsp_loss, caches["nsp_ce"] = self.ops.softmax_cross_entropy_forward(nsp_logits, labels["nsp"])
            losses.append(out.nsp_loss)
        out.loss = sum(losses[1:], losses[0]) if losses else None
        self._cache = caches if losses else None
        return out

    def backward(self, accumulate=False, loss_scale=1.0, loss_counts=None):
        """Gradients of ``loss`` (from the last forward with labels) into ``self.params.grads``.

        ``loss_scale``: differentiate ``loss_scale * loss`` instead, so that
        small gradients survive float16 in mixed precision; divide the
        gradients by it before the optimiser step (``optim.LossScaler``).
        ``loss_counts``: a global batch's (masked tokens, sequences), this batch a
        slice of it: each loss is its rows' sum over that count (data parallelism).
        """
        check_loss_scale(loss_scale), check_loss_counts(loss_counts)
        accumulate = check_flag("accumulate", accumulate)
        if self._cache is None:
            raise RuntimeError("backward() needs a forward() with mlm_labels and/or nsp_labels first "
                               "(there is no loss to differentiate; each forward allows one backward)")
        caches, self._cache = self._cache, None
        self._begin_backward(accumulate)
        dh, dpooled = heads_backward(self.ops, caches["heads"], caches.get("mlm_ce"), caches.get("nsp_ce"), self.heads,
                                     loss_scale, self.params.add_grad, self.dtype, loss_counts)
        self._encode_backward(dh, dpooled, caches)
