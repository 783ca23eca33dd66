"""ParamStore: all parameters of a model in one flat buffer, and their gradients in another.

Each named parameter (Hugging Face's state-dict name) is a *view* into the
flat ``data`` array, and its gradient a view into ``grad`` at the same offset.
This buys three things:

* the optimiser updates every parameter with a handful of whole-buffer
  operations instead of one small operation per tensor;
* parameters that weight decay must skip (biases, LayerNorm) are stored
  together at the end, so the two AdamW groups are two contiguous slices;
* tensors registered one after the other are adjacent in memory, so the
  query, key and value weights of a layer can be used as one fused (3H, H)
  matrix without any copy.

Never rebind a view (``store[name] = x``); write into it (``store[name][...] = x``).
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np


@dataclass(frozen=True)
class ParamSpec:
    name: str
    shape: tuple
    init: str          # "normal", "zeros" or "ones"
    decay: bool        # does weight decay apply to it?


class ParamStore:
    def __init__(self, specs, xp, dtype, ops=None):
        self.specs = list(specs)
        self.xp = xp
        # the set of ops its model runs (the optimiser's update rule is one of them)
        if ops is None:
            from .. import ops
        self.ops = ops
        self.dtype = np.dtype(dtype)
        # weight-decayed parameters first, the rest after: two contiguous groups
        ordered = [s for s in self.specs if s.decay] + [s for s in self.specs if not s.decay]
        self.offsets = {}
        offset = 0
        for s in ordered:
            self.offsets[s.name] = (offset, offset + prod(s.shape))
            offset += prod(s.shape)
        self.size = offset
        self.decay_size = sum(prod(s.shape) for s in self.specs if s.decay)
        self.data = xp.zeros(self.size, dtype=self.dtype)
        self.grad = xp.zeros(self.size, dtype=self.dtype)
        self.params = {s.name: self._view(self.data, s) for s in self.specs}
        self.grads = {s.name: self._view(self.grad, s) for s in self.specs}
        self.half = None     # float16 copy of the weight matrices, see enable_half
        self.halves = {}
        self._pending = []   # gradient adds not yet made (add_grad)
        self.defer_adds = xp is not np

    def _view(self, flat, spec):
        start, stop = self.offsets[spec.name]
        return flat[start:stop].reshape(spec.shape)

    def fused(self, names, which="data"):
        """One view over consecutive parameters, stacked along their first axis.

        e.g. the query, key and value weights (H, H) each -> a (3H, H) view.
        ``which``: "data", "grad" or "half" (the float16 copy).
        """
        starts = [self.offsets[n] for n in names]
        for (a0, a1), (b0, _) in zip(starts, starts[1:]):
            if a1 != b0:
                raise RuntimeError(f"parameters {names} are not adjacent in the store")
        shapes = [self.params[n].shape for n in names]
        if any(s[1:] != shapes[0][1:] for s in shapes):
            raise RuntimeError(f"parameters {names} do not stack: {shapes}")
        flat = {"data": self.data, "grad": self.grad, "half": self.half}[which]
        rows = sum(s[0] for s in shapes)
        return flat[starts[0][0]:starts[-1][1]].reshape((rows,) + shapes[0][1:])

    def init(self, seed, initializer_range, padding_rows=()):
        """BERT's initialisation: weights N(0, initializer_range), biases 0, LayerNorm 1/0.

        The draws come from a NumPy generator on the host in float64, in the
        order the parameters were registered, and are then cast and copied to
        the device: the same seed gives the same model on CPU and GPU and in
        float32 and float64.  ``padding_rows`` lists (name, row) pairs set to 0
        (the embedding of [PAD], as in HF).
        """
        rng = np.random.default_rng(seed)
        for s in self.specs:
            if s.init == "normal":
                value = rng.normal(0.0, initializer_range, size=s.shape)
            elif s.init == "ones":
                value = np.ones(s.shape)
            else:
                value = np.zeros(s.shape)
            for name, row in padding_rows:
                if name == s.name:
                    value[row] = 0.0
            with np.errstate(over="ignore"):
                value = value.astype(self.dtype)
            if s.init == "normal" and not np.isfinite(value).all():
                raise ValueError(f"initializer_range={initializer_range!r} is too large for {self.dtype}: "
                                 f"the initial weights of {s.name} would be infinite")
            self.params[s.name][...] = self.xp.asarray(value)

    def enable_half(self):
        """Keep a float16 copy of the weight-decayed parameters (every weight matrix) for mixed precision.

        ``data`` stays the float32 master copy that the optimiser updates;
        ``half`` (flat) and ``halves`` (the same names, views) are its
        float16 rounding, made again by ``refresh_half`` before each forward.
        Biases and LayerNorm are not copied: they enter only float32 sums.
        """
        if self.half is None:
            self.half = self.xp.empty(self.decay_size, dtype=np.float16)
            self.halves = {s.name: self._view(self.half, s) for s in self.specs if s.decay}
        self.refresh_half()

    def refresh_half(self):
        """half <- float16(data[:decay_size]), one pass (round to nearest even; beyond 65504 -> inf)."""
        with np.errstate(over="ignore"):
            self.half[...] = self.data[:self.decay_size]

    def add_grad(self, buffer, g):
        """Add ``g`` to ``buffer``, a gradient view (or to its first ``len(g)`` rows: a table's first T).

        On the CPU at once.  On a GPU the add waits for ``apply_grads``, at the end of the backward,
        which adds every pending gradient in one launch or a few (``ops.add_grads``) instead of one
        launch each: at small sizes a GPU step's time is its launches.  Until then ``g`` is kept."""
        rows = buffer[:len(g)]
        if self.defer_adds:
            self._pending.append((rows, g))
        else:
            rows += g       # in place on the view (``buffer[:n] += g`` would also copy the slice onto itself)

    def apply_grads(self):
        """The pending adds of ``add_grad``, in the order they were asked for."""
        if self._pending:
            pending, self._pending = self._pending, []
            self.ops.add_grads([d for d, _ in pending], [g for _, g in pending])

    def zero_grad(self):
        self._pending = []      # what a backward that failed half-way left
        self.grad.fill(0)

    def num_parameters(self) -> int:
        return self.size
