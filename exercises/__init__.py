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

# the graded questions, one or more per notebook: predict a number or a choice, then check it.  Their answers
# are functions of one file, questions.py (each returns the answer), so that a class hands in one file for all
QUESTIONS = {
    "snowman": "01: what WordPiece makes of a word with one character it has no piece for",
    "layernorm_sum": "02: what LayerNorm's input gradient sums to over a token's features",
    "unscaled_softmax": "03: how much gradient an unscaled softmax passes at head size 64",
    "masked_count": "04: how many positions mask_tokens chooses in sequences of 10, 70 and 200 tokens",
    "isnext_share": "05: the share of IsNext pairs under BERT's pairing rule",
    "untrained_loss": "06a: the MLM and NSP losses of BERT before any training",
    "nsp_prior": "06b: the NSP losses of a model that knows only the class prior, on training and held-out pairs",
    "standard_errors": "06b: how many standard errors above chance a held-out NSP accuracy is",
    "longer_sequences": "07: the FLOPs of a step at 512 tokens against 128",
    "finetune_rows": "08: which rows of the word table a fine-tuning step changes",
    "pre_ln_growth": "09: the size of the hidden state after 24 pre-LN layers",
    "float16_total": "10a: where a float16 running sum of 10,000 terms of 1e-4 stops",
    "mixed_bound": "10b: the most a step can gain from products 12 times as fast (Amdahl's law)",
    "attention_share": "10b: the share of BERT-base's step FLOPs in attention's products at 512 tokens",
    "ring_bytes": "11: the bytes each worker sends in a ring allreduce, and a central worker receives",
    "t_quantile": "12: the 99% t interval's multiplier with 3 seeds and with 5",
    "word_rows": "13: how many rows of the tied word table get a gradient from one batch",
}
QUESTIONS_FILE = "questions"

# the capstone, after the pieces: BERT put together from them and trained (notebook 13)
CAPSTONE = {
    "bert": "the capstone: BERT for pre-training from your own pieces, forward, backward and its training loop",
}
CHECKABLE = {**EXERCISES, **QUESTIONS, **CAPSTONE}


def file_of(name: str) -> str:
    """The file (without .py) that holds exercise ``name``'s functions: questions.py for every question."""
    return QUESTIONS_FILE if name in QUESTIONS else name
