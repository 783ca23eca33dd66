"""The usual mistakes of every exercise, one table each (``table.py`` says how a case is used).

``TABLES[exercise]`` is that exercise's ``Table``: its cases, which the
checker recognises and the tests plant, and its right answers written
otherwise (``variants``), which the checker must pass.
"""
from . import adamw, attention, cross_entropy, dropout, embedding, gelu, layernorm, linear, mlm_masking, nsp_pairing
from . import softmax
from . import loss_scaler, ring_allreduce

TABLES = {m.TABLE.exercise: m.TABLE for m in (linear, embedding, layernorm, gelu, softmax, attention, cross_entropy,
                                               dropout, mlm_masking, nsp_pairing, adamw)}
TABLES.update({m.TABLE.exercise: m.TABLE for m in (loss_scaler, ring_allreduce)})
