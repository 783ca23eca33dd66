"""The BERT model: its configuration, its weights, the encoder and the two pre-training heads.

``bert`` (``BertModel``, ``BertForPreTraining``: the public API) runs ``encoder``
(the embeddings and one transformer layer, the weights by role) and ``heads`` (masked
LM and next sentence prediction) on the set of ops chosen once (``minibert.kernels``).
Around them: ``config`` (``BertConfig``, the presets), ``params`` (every parameter a
view of one flat buffer), ``inputs`` (checks of what a user passes), ``outputs`` (what
a forward returns), ``state_dict`` and ``hf_io`` (weights by Hugging Face name, and
its file format) and ``inference`` (``fill_mask``).
"""
from .bert import BertForPreTraining, BertModel
from .config import PRESETS, BertConfig
from .outputs import BertOutput, PreTrainingOutput

__all__ = ["BertConfig", "BertForPreTraining", "BertModel", "BertOutput", "PRESETS", "PreTrainingOutput"]
