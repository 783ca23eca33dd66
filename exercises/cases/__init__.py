"""The usual mistakes of every exercise, one table each (``table.py`` says how a case is used).

``TABLES[exercise]`` is that exercise's ``Table``: its cases, which the
checker recognises and the tests plant, and its right answers written
otherwise (``variants``), which the checker must pass.
"""
from . import adamw, attention, cross_entropy, dropout, embedding, gelu, layernorm, linear, mlm_masking, nsp_pairing
from . import pooler, softmax
from . import wordpiece
from . import schedule, seed_comparison
from . import classifier_head, step_flops

TABLES = {m.TABLE.exercise: m.TABLE for m in (linear, embedding, layernorm, gelu, softmax, attention, cross_entropy,
                                               dropout, mlm_masking, nsp_pairing, pooler, adamw)}
TABLES[wordpiece.TABLE.exercise] = wordpiece.TABLE
TABLES.update({m.TABLE.exercise: m.TABLE for m in (schedule, seed_comparison)})
TABLES.update({m.TABLE.exercise: m.TABLE for m in (step_flops, classifier_head)})
