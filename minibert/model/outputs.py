"""What the models' forward passes return (arrays on the model's device)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


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
