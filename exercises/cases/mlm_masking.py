"""BERT's masked-LM corruption and its usual mistakes.

n = min(max_predictions, max(1, round(len(ids) * mlm_probability)), len(candidates))
different positions are chosen among the candidates (ids not in special_ids);
each becomes [MASK] with probability 0.8, a random ordinary id with 0.1 (the
original one included), and stays unchanged with 0.1; its label is the
original id, -100 everywhere else.  The checker measures a student's masking
over many sequences and names the case whose sign it sees.
"""
from __future__ import annotations

import functools
import math

from .table import Table


@functools.lru_cache(maxsize=4)
def _ordinary(vocab_size, special):
    return [t for t in range(vocab_size) if t not in special]


def _count(ids, p, max_predictions, n_candidates, ceil=False, cap=True, clamp=True):
    n = max(1, math.ceil(len(ids) * p) if ceil else int(round(len(ids) * p)))
    n = min(n, max_predictions) if cap else n
    return min(n, n_candidates) if clamp else n


def _mlm(all_mask=False, specials_ok=False, label_all=False, cap=True, bernoulli=False, one_fate=False,
         one_replacement=False, clamp=True, specials_first=False, ceil=False, fixed_p=False, replace=False,
         avoid_original=False, in_place=False, nested=False, shuffled=False):
    """mask_tokens with one usual mistake, or (nested, shuffled) written as google-research/bert does."""
    def mask_tokens(ids, rng, *, vocab_size, mask_id, special_ids, mlm_probability=0.15, max_predictions=20):
        special = set(special_ids)
        candidates = [i for i, t in enumerate(ids) if specials_ok or t not in special]
        p = 0.15 if fixed_p else mlm_probability
        n = _count(ids, p, max_predictions, len(candidates), ceil, cap, clamp)
        if bernoulli:
            chosen = [i for i in candidates if rng.random() < mlm_probability]
        elif shuffled:          # shuffle the candidates, take the first n
            chosen = rng.permutation(candidates)[:n]
        else:
            chosen = rng.choice(candidates, size=n, replace=replace)
        ordinary = _ordinary(vocab_size, frozenset(special))

        def replacement(original):
            if specials_first:      # as if the special ids were 0 .. len(special_ids) - 1
                return int(rng.integers(len(special), vocab_size))
            pool = [t for t in ordinary if t != original] if avoid_original else ordinary
            return int(pool[rng.integers(len(pool))])
        masked = ids if in_place else list(ids)
        labels = list(ids) if label_all else [-100] * len(ids)
        u_all, token_all = rng.random(), replacement(None)
        for pos in (int(i) for i in chosen):
            labels[pos] = ids[pos]
            u = u_all if one_fate else rng.random()
            if all_mask or u < 0.8:
                masked[pos] = mask_id
            elif nested:        # the other 20%: a second draw, half kept, half random
                if rng.random() >= 0.5:
                    masked[pos] = replacement(ids[pos])
            elif u < 0.9:
                masked[pos] = token_all if one_replacement else replacement(ids[pos])
        return masked, labels
    return mask_tokens


TABLE = Table("mlm_masking", mask_tokens=_mlm())


def case(name, hint, **flags):
    return TABLE.case(name, hint, mask_tokens=_mlm(**flags))


IN_PLACE = case("the caller's list changed", "build a new list (list(ids)) instead of changing the caller's",
                in_place=True)
ALL_MASK = case("every chosen token becomes [MASK]",
                "every chosen position became [MASK]: only 80% should; 10% random, 10% unchanged", all_mask=True)
SPECIALS = case("special tokens can be chosen", "candidates are the positions whose id is not in special_ids",
                specials_ok=True)
LABEL_ALL = case("labels everywhere", "labels must be -100 at every position that is not predicted: only the chosen "
                                      "~15% carry their original id", label_all=True)
NO_CAP = case("no cap on predictions", "n = min(max_predictions, ...): never more than max_predictions positions are "
                                       "chosen per sequence", cap=False)
WITH_REPLACEMENT = case("positions drawn with replacement",
                        "some sequences get fewer than n predictions: choose n DIFFERENT positions, rng.choice("
                        "candidates, n, replace=False); with replace=True a position can be drawn twice", replace=True)
COIN_FLIP = case("a coin flip per token", "choose exactly n = min(max_predictions, max(1, round(len(ids) * "
                                          "mlm_probability))) positions, not a coin flip per token", bernoulli=True)
CEIL = case("math.ceil instead of round", "n = min(max_predictions, max(1, round(len(ids) * mlm_probability))), "
                                          "counting every token ([PAD] too), rounded to the nearest integer (not "
                                          "math.ceil, not int())", ceil=True)
ONE_FATE = case("one 80/10/10 draw per sequence", "draw the 80/10/10 choice anew for EACH chosen position "
                                                  "(rng.random() inside the loop), not once per sequence",
                one_fate=True)
ONE_TOKEN = case("one random token per sequence", "draw a new random token for each position that gets one, inside "
                                                  "the loop", one_replacement=True)
AVOIDS_ORIGINAL = case("the random token is never the original",
                       "a random replacement is drawn from all ordinary ids, the original one included (BERT does not "
                       "exclude it): 10% unchanged plus half of the 10% random draws", avoid_original=True)
FEW_CANDIDATES = case("n not limited to the candidates", "n is at most the number of candidates: n = min("
                                                         "max_predictions, max(1, round(...)), len(candidates))",
                      clamp=False)
FIXED_P = case("mlm_probability ignored", "use the mlm_probability argument, not a fixed 0.15", fixed_p=True)
SMALLEST_SPECIALS = case("special ids taken to be the smallest",
                         "take the special ids from special_ids: they need not be the smallest ids (BERT's are 0 and "
                         "100 to 103), so draw from range(vocab_size) without them", specials_first=True)

TABLE.variant("nested 80/10/10 draws (google-research/bert)", mask_tokens=_mlm(nested=True))
TABLE.variant("candidates shuffled, the first n taken (google-research/bert)", mask_tokens=_mlm(shuffled=True))
