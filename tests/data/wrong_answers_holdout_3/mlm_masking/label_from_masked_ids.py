# slip: the label of a chosen position is set after the corruption from masked_ids[i], so it holds [MASK] or the random token instead of the original id
# names it: labels[i] = ids[i] | label & original & [mask] | label & masked_ids | label & corrupted | label & shows & original
"""Exercise: BERT's masked-language-model corruption of one sequence.

BERT's rule (google-research/bert, create_pretraining_data.py), as minibert
applies it, with two departures marked (*):

1. Positions holding a special token are never chosen: every id in
   special_ids (*: create_pretraining_data.py leaves out [CLS] and [SEP] only;
   its sequences have no [PAD] yet, and an [UNK] there can be chosen).
2. Exactly  n = min(max_predictions, max(1, round(len(ids) * mlm_probability)))
   positions are chosen, uniformly at random among the others (all of them if
   there are fewer than n).  15% of the tokens, at most 20 per sequence of 128.
3. Each chosen position independently becomes
       [MASK]                            with probability 0.8,
       a random ordinary token           with probability 0.1 (*: there, any
                                         entry of the vocabulary, [MASK] and
                                         the special tokens included),
       itself (unchanged)                with probability 0.1.
4. The label of a chosen position is its ORIGINAL id; every other label is -100.

So 15% x 80% = 12% of the tokens show [MASK], 1.5% a random token, and 1.5%
are predicted while left unchanged.

Check your work with:   python -m exercises check mlm_masking
"""
import numpy as np


def mask_tokens(ids, rng, *, vocab_size, mask_id, special_ids, mlm_probability=0.15,
                max_predictions=20):
    """Mask one sequence.

    Args:
        ids: list of int token ids, e.g. [CLS] a b c [SEP] d e [SEP]  (do not modify it)
        rng: a numpy.random.Generator; draw ALL randomness from it
            (rng.choice, rng.random, rng.integers) so that a seed reproduces the result
        vocab_size: ids are in [0, vocab_size)
        mask_id: the id of [MASK]
        special_ids: ids never chosen and never used as a random replacement
            (e.g. [PAD], [UNK], [CLS], [SEP], [MASK])
        mlm_probability: the share of tokens to predict (BERT: 0.15)
        max_predictions: the most positions chosen in one sequence (BERT: 20 at length 128)

    Returns:
        masked_ids: a new list, len(ids), the corrupted input
        labels: a list, len(ids): the original id at chosen positions, -100 elsewhere

    Hints:
        * the random replacement is uniform over the ordinary ids:
          range(vocab_size) without special_ids.
        * "replace 10% of the tokens with [MASK]" is not the rule; 15% are
          *chosen*, and of those 80% are masked.
    """
    # TODO: 1. candidate positions, 2. how many to choose and which,
    #       3. the 80/10/10 corruption, 4. the labels.
    special = set(special_ids)
    # 1. the positions that may be chosen
    candidates = [i for i, t in enumerate(ids) if t not in special]
    # 2. how many, and which
    n = min(max_predictions, max(1, round(len(ids) * mlm_probability)))
    n = min(n, len(candidates))
    chosen = rng.choice(candidates, size=n, replace=False) if n > 0 else []
    ordinary = [t for t in range(vocab_size) if t not in special]

    masked_ids = list(ids)
    labels = [-100] * len(ids)
    for i in chosen:
        i = int(i)
        # 3. 80 / 10 / 10
        u = rng.random()
        if u < 0.8:
            masked_ids[i] = mask_id
        elif u < 0.9:
            masked_ids[i] = int(ordinary[rng.integers(0, len(ordinary))])
        # else: left unchanged
        # 4. the label is the original id
        labels[i] = masked_ids[i]
    return masked_ids, labels
