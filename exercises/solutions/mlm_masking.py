"""Solution: BERT's masked-LM corruption of one sequence."""
import numpy as np


def mask_tokens(ids, rng, *, vocab_size, mask_id, special_ids, mlm_probability=0.15,
                max_predictions=20):
    special = set(special_ids)
    candidates = [i for i, t in enumerate(ids) if t not in special]
    n_predict = min(max_predictions, max(1, int(round(len(ids) * mlm_probability))), len(candidates))
    chosen = rng.choice(candidates, size=n_predict, replace=False) if n_predict else []
    ordinary = np.array([t for t in range(vocab_size) if t not in special])

    masked = list(ids)
    labels = [-100] * len(ids)
    for pos in chosen:
        pos = int(pos)
        labels[pos] = ids[pos]
        u = rng.random()
        if u < 0.8:
            masked[pos] = mask_id                       # 80%: [MASK]
        elif u < 0.9:
            masked[pos] = int(rng.choice(ordinary))     # 10%: a random ordinary token
        # else 10%: left unchanged
    return masked, labels
