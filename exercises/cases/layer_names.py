"""The names and shapes of one encoder layer's parameters and of the tied MLM head's, as Hugging Face's
``BertForPreTraining`` names them: what the encoder_layer exercise's cases and its checker share."""
from __future__ import annotations

QKV = ("query", "key", "value")
LN1, LN2 = "attention.output.LayerNorm", "output.LayerNorm"
DENSE, NORM = "transform.dense", "transform.LayerNorm"      # the MLM head's, below cls.predictions.


def layer_shapes(H, I):
    """The layer's parameters by name, with their shapes."""
    shapes = {}
    for n in QKV:
        shapes[f"attention.self.{n}.weight"], shapes[f"attention.self.{n}.bias"] = (H, H), (H,)
    for name, (n_out, n_in) in (("attention.output.dense", (H, H)), ("intermediate.dense", (I, H)),
                                ("output.dense", (H, I))):
        shapes[name + ".weight"], shapes[name + ".bias"] = (n_out, n_in), (n_out,)
        if name != "intermediate.dense":
            norm = LN1 if name == "attention.output.dense" else LN2
            shapes[norm + ".weight"], shapes[norm + ".bias"] = (H,), (H,)
    return shapes


def head_shapes(H, V):
    """The tied model's head: the transform's dense and LayerNorm, and the decoder's own bias."""
    return {DENSE + ".weight": (H, H), DENSE + ".bias": (H,), NORM + ".weight": (H,), NORM + ".bias": (H,),
            "bias": (V,)}
