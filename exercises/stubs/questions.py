"""The graded questions: predict, then check.

One question (or more) per notebook, where a number or a choice is the
lesson.  Work the answer out before you run the cell that shows it: each
function returns your answer, nothing else.  The checker compares it with
what minibert's own code computes; a wrong answer gets a hint, never the
answer.  A number may be an int or a float (a stated tolerance applies), a
choice is one letter.

Check one with:   python -m exercises check snowman
All of them:      python -m exercises check snowman layernorm_sum ... (see python -m exercises list)
"""


def snowman():
    """Notebook 1.  A vocabulary holds "token" and "##ization" and no piece for the snowman. What does
    BERT's tokenizer (basic split, then WordPiece) make of "tokenization\u2603" (the snowman glued to the
    word), and of "tokenization \u2603" (with a space)?

    Returns:
        two lists of str, the pieces of each: (pieces_glued, pieces_spaced)
    """
    # TODO: your answer
    raise NotImplementedError


def layernorm_sum():
    """Notebook 2.  For any row x, any gamma and beta and any upstream gradient dy, what is the sum over
    the H features of the gradient LayerNorm passes to its input, sum_i dL/dx_i?

        a: 0
        b: sum_i gamma_i dy_i
        c: sum_i dy_i
        d: no fixed value: it depends on x

    Returns:
        one letter
    """
    # TODO: your answer
    raise NotImplementedError


def unscaled_softmax():
    """Notebook 3.  Queries and keys with independent N(0, 1) entries, head size D = 64, 16 keys: how big
    is the softmax's Jacobian (the gradient it lets through) on the raw scores q.k, against the scaled
    ones q.k / sqrt(D)?

        a: about the same (more than 0.8 times)
        b: smaller, but of the same order (between 0.2 and 0.8 times)
        c: about 0 (less than 0.2 times): the gradient vanishes

    Returns:
        one letter
    """
    # TODO: your answer
    raise NotImplementedError


def masked_count():
    """Notebook 4.  How many positions does minibert's mask_tokens choose in sequences of 10, of 70 and of
    200 tokens ([CLS] and [SEP] included), with masked_lm_prob=0.15 and max_predictions_per_seq=20?

    Returns:
        three whole numbers: (k for 10 tokens, k for 70, k for 200)
    """
    # TODO: your answer
    raise NotImplementedError


def isnext_share():
    """Notebook 5.  Over a corpus of documents of one to six sentences, what share of the instances that
    create_training_instances (BERT's own pairing) makes are IsNext?

        a: one half, within 3 points: the coin is fair
        b: clearly less than one half
        c: clearly more than one half

    Returns:
        one letter
    """
    # TODO: your answer
    raise NotImplementedError


def untrained_loss():
    """Notebook 6a.  A BertForPreTraining with a vocabulary of V = 2,000 tokens, initialised as BERT is
    (weights N(0, 0.02^2), biases 0), before any training: what are its MLM loss and its NSP loss on a
    batch, in nats? (Within 2%.)

    Returns:
        two numbers: (mlm_loss, nsp_loss)
    """
    # TODO: your answer
    raise NotImplementedError


def nsp_prior():
    """Notebook 6b.  docs-bert-h64's training pairs are NotNext with probability p (the share notebook 6b
    prints, about 68.6%); its held-out pairs are balanced. A model that has learned only this prior answers
    P(NotNext) = p for every pair. What NSP loss (cross-entropy in nats) does it get on the training pairs, and
    on the held-out pairs? (Within 0.2%.)

    Returns:
        two numbers: (training_loss, heldout_loss)
    """
    # TODO: your answer
    raise NotImplementedError


def standard_errors():
    """Notebook 6b.  At step 5,000 docs-bert-h64 answers 62.6% of its 238 held-out NSP pairs right (the
    accuracy notebook 6b prints). A model that has learned nothing would score 50% plus noise. How many standard
    errors of that noise is 62.6% above 50%? (Within 1%.)

    Returns:
        one number
    """
    # TODO: your answer
    raise NotImplementedError


def longer_sequences():
    """Notebook 7.  BERT-base (L 12, H 768, I 3072, V 30522), the same number of sequences, 15% of the
    tokens labelled: how many times the FLOPs of a training step at 128 tokens per sequence does a step
    at 512 tokens cost? (Within 1%.)

    Returns:
        one number
    """
    # TODO: your answer
    raise NotImplementedError


def finetune_rows():
    """Notebook 8.  Fine-tuning: BertModel (no pre-training heads) and a classifier on the pooled output.
    One batch without padding, forward and backward: which rows of the word-embedding table get a gradient
    that is not 0?

        a: exactly the rows of the tokens in the batch
        b: every row of the table
        c: none of them
        d: some other set of rows

    Returns:
        one letter
    """
    # TODO: your answer
    raise NotImplementedError


def pre_ln_growth():
    """Notebook 9.  24 random encoder layers in the pre-LN order (x + Attention(LN(x)), then
    x + FFN(LN(x))), width 64, weights of standard deviation 1 / sqrt(fan-in), LayerNorms at gamma 1 and
    beta 0, the input of RMS size 1. The RMS size of the hidden state after the 24th layer is closest to:

        a: 1
        b: 5
        c: 24
        d: 600

    Returns:
        one letter
    """
    # TODO: your answer
    raise NotImplementedError


def float16_total():
    """Notebook 10a.  10,000 terms of 1e-4 are added into a running sum that is rounded to float16 after
    every addition (np.cumsum(..., dtype=np.float16)). Where does the sum end? (Within 0.1%.)

    Returns:
        one number
    """
    # TODO: your answer
    raise NotImplementedError


def mixed_bound():
    """Notebook 10b.  On the H200, minibert's float32 step of BERT-base at seq-len 512 spends a share f of its
    time in its products (its MFU against its process's float32 ceiling, which notebook 10b prints, about 63%),
    and the float16 ceiling is r times the float32 one (printed too, about 12). If mixed precision made the
    products run at the float16 ceiling and left the rest of the step as it was, how many times as fast would
    the step be? (Within 1%.)

    Returns:
        one number
    """
    # TODO: your answer
    raise NotImplementedError


def attention_share():
    """Notebook 10b.  BERT-base (H = 768, I = 3,072, 12 layers, 12 heads), a training step on sequences of 512
    tokens: what share of its FLOPs (the matrix products, forward and backward) are the attention products
    q k^T and P v? In percent. (Within 6%: the nearest whole percent will do.)

    Returns:
        one number, a percentage
    """
    # TODO: your answer
    raise NotImplementedError


def ring_bytes():
    """Notebook 11.  Four workers allreduce a vector of S = 8,000 bytes (1,000 float64 numbers). How many
    bytes does each worker send in all in the ring allreduce? And how many bytes would worker 0 receive if
    it gathered every other worker's whole vector (the central scheme)?

    Returns:
        two whole numbers: (sent_per_worker_in_the_ring, received_by_the_central_worker)
    """
    # TODO: your answer
    raise NotImplementedError


def t_quantile():
    """Notebook 12.  The 99% t interval of a mean paired difference, d_bar +- t * s_d / sqrt(n): what is t
    with n = 3 seeds, and with n = 5? (Within 0.1%.)

    Returns:
        two numbers: (t for 3 seeds, t for 5 seeds)
    """
    # TODO: your answer
    raise NotImplementedError


def word_rows():
    """Notebook 13.  The capstone's BertForPreTraining (a vocabulary of 31 tokens) and its batch, which
    holds 12 distinct tokens: after one forward and backward pass, how many rows of the word-embedding
    table's gradient are not zero?

    Returns:
        one whole number
    """
    # TODO: your answer
    raise NotImplementedError
