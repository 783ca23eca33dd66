"""The capstone: BERT for pre-training, built from YOUR pieces, and trained by YOUR loop.

Every piece of BERT is one of your earlier exercises.  Here you put them
together into ``BertForPreTraining`` (the masked-LM and next-sentence losses
of a whole BERT), write its backward pass, and train it on minibert's
built-in corpus with your own AdamW, schedule and clipping.  Notebook 13 walks
through it.

The imports below take the pieces from your own files (exercises/stubs/).
Call them by these names: when a stage fails, the checker puts minibert's
version of one piece in place of yours at a time, and tells you the first one
whose swap makes the stage pass.  (To hand the file in on its own, paste your
pieces into it under the same names.)

The model, in BERT's order (the paper's Figure 1, notebook 02's picture):

* embeddings: the word, the position (0 .. T-1) and the segment
  (token_type_ids) embeddings added, then LayerNorm, then dropout;
* num_hidden_layers post-LN encoder layers, each: the query, key and value
  projections split into num_attention_heads heads; attention with the
  padding mask and dropout on its weights; the heads merged; the output
  projection, dropout, then LayerNorm of the residual sum; the intermediate
  projection, the exact GELU, the output projection, dropout, then LayerNorm
  of the residual sum (notebook 09's exercise, with dropout now);
* the pooler and the NSP head on the last layer's [CLS] (your pooler exercise);
* the MLM head on the last layer's every position: a dense layer, GELU,
  LayerNorm, then the decoder, whose weight is the word-embedding table itself
  (tied) and whose bias is cls.predictions.bias;
* the loss: the MLM cross-entropy (labels -100 are not predicted) plus the
  NSP cross-entropy.

Derive the backward pass yourself, from the end: each value used twice (a
residual input, the last layer's output, the word table) gets the sum of its
gradients.  BERT's word lookup leaves the [PAD] row out of its gradient
(``embedding_backward``'s padding_idx); the decoder's share still reaches it.

Two rules, as in every exercise: float64 throughout, and no argument changed
in place.

Check your work with:   python -m exercises check bert
"""
import numpy as np

from exercises.stubs.adamw import adamw_step
from exercises.stubs.cross_entropy import softmax_cross_entropy_backward, softmax_cross_entropy_forward
from exercises.stubs.dropout import (attention_dropout_backward, attention_dropout_forward, dropout_backward,
                                     dropout_forward)
from exercises.stubs.embedding import embedding_backward, embedding_forward
from exercises.stubs.gelu import gelu_backward, gelu_forward
from exercises.stubs.layernorm import layernorm_backward, layernorm_forward
from exercises.stubs.linear import linear_backward, linear_forward
from exercises.stubs.pooler import nsp_head_backward, nsp_head_forward, pooler_backward, pooler_forward
from exercises.stubs.schedule import clip_by_global_norm, learning_rate


def bert_forward(params, batch, config, rng=None):
    """The loss of BertForPreTraining on one batch.

    Args:
        params: {name: float64 array} by Hugging Face's names, e.g.
            "bert.embeddings.word_embeddings.weight" (V, H),
            "bert.encoder.layer.0.attention.self.query.weight" (H, H),
            "bert.pooler.dense.weight" (H, H), "cls.predictions.bias" (V,),
            "cls.seq_relationship.weight" (2, H); print sorted(params) to see them all.
            There is no decoder weight: it is the word table.
        batch: {"input_ids": (B, T) ints, "token_type_ids": (B, T) 0 or 1,
            "attention_mask": (B, T) 1 for a token and 0 for padding,
            "mlm_labels": (B, T) the original id where a token is to be predicted, -100 elsewhere,
            "nsp_labels": (B,) 0 when B follows A, 1 when it is random}
        config: {"num_hidden_layers", "num_attention_heads", "hidden_dropout_prob",
            "attention_probs_dropout_prob", "layer_norm_eps", "pad_token_id"}
        rng: a np.random.Generator to draw every dropout mask from (training), or None
            (evaluation: no dropout at all)

    Returns:
        loss: a float, the MLM loss plus the NSP loss
        cache: whatever bert_backward needs
    """
    raise NotImplementedError


def bert_backward(cache):
    """The gradient of the loss with respect to every parameter.

    Returns:
        grads: {name: float64 array}, the same keys and shapes as params
    """
    raise NotImplementedError


def train(params, batches, config, *, peak_lr, warmup_steps, weight_decay=0.01, max_grad_norm=1.0, seed=0):
    """Pre-train: one step per batch, as minibert's pretrain does.

    Each step, numbered from 0: the forward pass on that step's batch (dropout
    from one np.random.default_rng(seed) made before the first step), the
    backward pass, the gradients clipped by their global norm (max_grad_norm),
    the learning rate of this step (warm-up over warmup_steps, then linear
    decay to 0 at len(batches)), then an AdamW step for every parameter (its
    step count t from 1; BERT decays weights only: no bias, no LayerNorm).

    Returns:
        params: the trained parameters, a new dict by the same names (the given one unchanged)
        losses: the loss of each step's forward pass, a list of len(batches) floats
    """
    raise NotImplementedError
