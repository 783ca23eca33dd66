"""The usual mistakes of every exercise, one table each (``table.py`` says how a case is used).

``TABLES[exercise]`` is that exercise's ``Table``: its cases, which the
checker recognises and the tests plant, and its right answers written
otherwise (``variants``), which the checker must pass.
"""
from . import adamw, attention, classifier_head, cross_entropy, dropout, embedding, encoder_layer, gelu, layernorm
from . import linear, loss_scaler, mlm_masking, nsp_pairing, pooler, ring_allreduce, schedule, seed_comparison, softmax
from . import step_flops, wordpiece
from .mutation import mutant_cases

TABLES = {m.TABLE.exercise: m.TABLE for m in (
    wordpiece, linear, embedding, layernorm, gelu, softmax, attention, cross_entropy, dropout, mlm_masking,
    nsp_pairing, pooler, adamw, schedule, step_flops, classifier_head, encoder_layer, loss_scaler,
    ring_allreduce, seed_comparison)}
for _table in TABLES.values():      # each table's mutants, made from the solution at their first use
    _table.mutate = mutant_cases
