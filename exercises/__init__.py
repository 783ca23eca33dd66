"""minibert's exercises: write BERT's pieces by hand, then check them.

    python -m exercises list             the exercises, in a good order
    python -m exercises check NAME       check one (e.g. layernorm)
    python -m exercises check all        check them all

Your files are in exercises/stubs/.  See exercises/README.md.
"""

# name -> one-line description, in the order to do them
EXERCISES = {
    "wordpiece": "BERT's tokenizer: the basic split, then greedy longest-match-first WordPiece",
    "linear": "the fully connected layer y = x W^T + b, forward and backward",
    "embedding": "the embedding lookup and its backward pass (repeated ids, [PAD])",
    "layernorm": "layer normalisation, forward and backward",
    "gelu": "the exact GELU activation and its derivative",
    "softmax": "a numerically stable softmax and its backward pass",
    "attention": "scaled dot-product attention with a padding mask, forward and backward",
    "cross_entropy": "softmax cross-entropy that ignores the label -100",
    "dropout": "inverted dropout, alone and on the attention weights, forward and backward",
    "mlm_masking": "BERT's 15% / 80-10-10 masked-LM corruption",
    "nsp_pairing": "a next-sentence-prediction example: IsNext or a random other document",
    "pooler": "BERT's pooler (tanh on [CLS]) and the NSP head, forward and backward",
    "adamw": "one AdamW step with decoupled weight decay",
    "schedule": "the warm-up then linear decay learning rate, and clipping by the global norm",
    "step_flops": "the FLOPs of one training step, and model FLOPs utilisation",
    "classifier_head": "the fine-tuning classifier on the pooled [CLS] vector: logits, loss and gradients",
    "encoder_layer": "one post-LN encoder layer from the pieces, forward and backward, and the MLM decoder tied to "
                     "the word embeddings",
    "loss_scaler": "dynamic loss scaling: unscale, look for inf/NaN, grow or back off the scale",
    "ring_allreduce": "the ring allreduce over simulated ranks: reduce-scatter, then all-gather",
    "seed_comparison": "an ablation against the default over seeds: mean and spread, paired differences",
}

# the capstone, after the pieces: BERT put together from them and trained (notebook 13)
CAPSTONE = {
    "bert": "the capstone: BERT for pre-training from your own pieces, forward, backward and its training loop",
}
CHECKABLE = {**EXERCISES, **CAPSTONE}
