"""A second opinion on the mutants: each exercise's functions on inputs of their own, not the checks'.

Two mutants that give the same results on every input a check tries may be
the same slip written twice (the cache holding gamma in place of rstd, and
the backward pass reading gamma in place of rstd), or two slips the check's
inputs cannot tell apart (an axis that is the same axis for the check's
shapes).  ``ORACLE[exercise](module, rng)`` runs the exercise's functions on
fresh random inputs of other sizes and returns what they give, so that
``families.py`` can tell the two apart: the same results here too, an
equivalent; different results here, a gap in the check's inputs.
"""
from __future__ import annotations

import numpy as np

from .layer_names import head_shapes, layer_shapes


def _linear(m, rng):
    x, W, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((5, 4)), rng.standard_normal(5)
    y, cache = m.linear_forward(x, W, b)
    return [y, *m.linear_backward(rng.standard_normal(y.shape), cache)]


def _embedding(m, rng):
    ids, W = np.array([[1, 4, 1, 0], [2, 0, 6, 4]]), rng.standard_normal((7, 3))
    out, cache = m.embedding_forward(ids, W)
    dout = rng.standard_normal(out.shape)
    return [out, m.embedding_backward(dout, cache), m.embedding_backward(dout, cache, padding_idx=0)]


def _layernorm(m, rng):
    x, g, b = rng.standard_normal((2, 3, 5)) * 2 + 1, rng.standard_normal(5), rng.standard_normal(5)
    y, cache = m.layernorm_forward(x, g, b, 1e-3)
    return [y, *m.layernorm_backward(rng.standard_normal(x.shape), cache),
            m.layernorm_forward(x[0] * 1e-3, g, b)[0]]


def _unary(forward, backward):
    def run(m, rng):
        x = rng.standard_normal((3, 4, 6)) * 2
        y, cache = getattr(m, forward)(x)
        return [y, getattr(m, backward)(rng.standard_normal(y.shape), cache)]
    return run


def _attention(m, rng):
    q, k, v = (rng.standard_normal((2, 2, 5, 3)) for _ in range(3))
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])          # 1 for a token, 0 for padding
    out, cache = m.attention_forward(q, k, v, mask)
    return [out, *m.attention_backward(rng.standard_normal(out.shape), cache)]


def _cross_entropy(m, rng):
    logits, labels = rng.standard_normal((6, 5)), np.array([1, -100, 4, 0, -100, 2])
    loss, cache = m.softmax_cross_entropy_forward(logits, labels)
    return [loss, m.softmax_cross_entropy_backward(1.7, cache)]


def _dropout(m, rng):
    x = rng.standard_normal((3, 4, 5))
    y, cache = m.dropout_forward(x, 0.3, np.random.default_rng(1), train=True)
    y0, cache0 = m.dropout_forward(x, 0.3, np.random.default_rng(1), train=False)
    q, k, v = (rng.standard_normal((2, 2, 4, 3)) for _ in range(3))
    mask = np.array([[1, 1, 1, 1], [1, 1, 1, 0]])
    out, c = m.attention_dropout_forward(q, k, v, mask, 0.25, np.random.default_rng(2), train=True)
    dy = rng.standard_normal(x.shape)
    return [y, m.dropout_backward(dy, cache), y0, m.dropout_backward(dy, cache0), out,
            *m.attention_dropout_backward(rng.standard_normal(out.shape), c)]


def _pooler(m, rng):
    hidden, W, b = rng.standard_normal((3, 4, 5)), rng.standard_normal((5, 5)), rng.standard_normal(5)
    pooled, cache = m.pooler_forward(hidden, W, b)
    W2, b2 = rng.standard_normal((2, 5)), rng.standard_normal(2)
    logits, c2 = m.nsp_head_forward(pooled, W2, b2)
    return [pooled, *m.pooler_backward(rng.standard_normal(pooled.shape), cache), logits,
            *m.nsp_head_backward(rng.standard_normal(logits.shape), c2)]


def _classifier_head(m, rng):
    pooled, W, b, labels = rng.standard_normal((5, 4)), rng.standard_normal((3, 4)), rng.standard_normal(3), \
        np.array([2, 0, 1, 2, 2])
    loss, probs = m.classifier_head_forward(pooled, W, b, labels)
    return [loss, probs, *m.classifier_head_backward(1.3, pooled, W, np.array(probs, copy=True), labels)]


def _encoder_layer(m, rng):
    H, I, V = 6, 10, 9
    x = rng.standard_normal((2, 4, H))
    params = {k: rng.standard_normal(s) * 0.5 for k, s in layer_shapes(H, I).items()}
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0]])
    y, cache = m.encoder_layer_forward(x, params, mask, 3)
    dx, dparams = m.encoder_layer_backward(rng.standard_normal(y.shape), cache)
    ids, W = np.array([[2, 5, 2], [7, 0, 5]]), rng.standard_normal((V, H))
    head = {k: rng.standard_normal(s) * 0.5 for k, s in head_shapes(H, V).items()}
    logits, c = m.tied_mlm_forward(ids, W, head)
    dW, dhead = m.tied_mlm_backward(rng.standard_normal(logits.shape), c)
    return [y, dx, *(dparams[k] for k in sorted(dparams)), logits, dW, *(dhead[k] for k in sorted(dhead))]


def _adamw(m, rng):
    out = []
    for decay in (True, False):
        p, mm, v = rng.standard_normal(4), np.zeros(4), np.zeros(4)
        for t in range(1, 4):
            p, mm, v = m.adamw_step(p, rng.standard_normal(4), mm, v, t, lr=0.1, decay=decay, weight_decay=0.3)
            out += [p, mm, v]
    return out


def _schedule(m, rng):
    rates = [m.learning_rate(s, peak_lr=0.5, warmup_steps=w, total_steps=20)
             for w in (0, 4, 20) for s in (0, 1, 3, 4, 5, 19, 20, 25)]
    grads = [rng.standard_normal((2, 3)), rng.standard_normal(4)]
    norm = float(np.sqrt(sum((g * g).sum() for g in grads)))
    clipped = [m.clip_by_global_norm([g.copy() for g in grads], c) for c in (norm / 3, norm, 3 * norm)]
    return [rates, *[x for c in clipped for x in (*c[0], c[1])]]


def _step_flops(m, rng):
    return [m.training_step_flops(*s) for s in ((2, 6, 11, 29, 3, 5, 4), (1, 10, 7, 13, 2, 9, 1))] + \
        [m.mfu(3e12, 0.7, 9e12)]


def _loss_scaler(m, rng):
    grads = [rng.standard_normal(3), rng.standard_normal((2, 2))]
    out = []
    for g in (grads, [grads[0], np.array([[1.0, np.nan], [0.0, 1.0]])], [np.array([np.inf, 1.0, 2.0]), grads[1]]):
        unscaled, found = m.unscale_and_check([a * 8.0 for a in g], 8.0)
        out += [*unscaled, found]
    scale, good = 1024.0, 0
    for found in [False] * 4 + [True] + [False] * 5:
        scale, good, take = m.update_scale(scale, found, good, growth_interval=3, growth_factor=4.0,
                                           backoff_factor=0.25)
        out.append([scale, good, take])
    return out


def _ring(m, rng):
    R = 3
    chunks = [[rng.standard_normal(2) for _ in range(R)] for _ in range(R)]
    return [x for row in m.reduce_scatter(chunks) for x in row] + [x for row in m.all_gather(chunks) for x in row]


def _seed_comparison(m, rng):
    return [m.mean_and_spread([1.5, None, 0.0, 2.25, -1.0]),
            m.paired_differences([0.5, None, 1.0, 2.0, 0.0], [0.25, 1.0, None, 2.0, 0.5])]


def _mlm(m, rng):
    out = []
    for seed in range(12):
        ids = [2] + rng.integers(5, 40, 9).tolist() + [3] + rng.integers(5, 40, 6).tolist() + [3, 0, 0]
        out += list(m.mask_tokens(ids, np.random.default_rng(seed), vocab_size=40, mask_id=4,
                                  special_ids=[0, 1, 2, 3, 4], mlm_probability=0.3, max_predictions=4))
    return out


def _nsp(m, rng):
    docs = [[rng.integers(10, 90, int(rng.integers(1, 7))).tolist() for _ in range(n)] for n in (3, 1, 4, 2)]
    return [m.make_nsp_example(docs, d, s, np.random.default_rng(seed), cls_id=1, sep_id=2, max_len=10)
            for seed in range(8) for d, s in ((0, 0), (0, 2), (2, 1), (3, 1), (1, 0))]


def _wordpiece(m, rng):
    vocab = {"un", "##aff", "##able", "a", "##b", "b", "##ab", "x", "##y", "##s", "play", "##ing"}
    texts = ["Héllo, wörld!", "un\taffable\u3000x", "A\x0bB\x85c d\u00ad", "東京 tower's", "  playing  "]
    return [m.basic_tokenize(t) for t in texts] + [m.basic_tokenize("HeLLo Wörld", do_lower_case=False)] + \
        [m.wordpiece_word(w, vocab) for w in ("unaffable", "abab", "xyy", "plays", "q", "playing")] + \
        [m.wordpiece_word("a" * 9, vocab, max_chars=8), m.wordpiece_word("zz", vocab, unk_token="<u>")]


ORACLE = {"linear": _linear, "embedding": _embedding, "layernorm": _layernorm,
          "gelu": _unary("gelu_forward", "gelu_backward"), "softmax": _unary("softmax_forward", "softmax_backward"),
          "attention": _attention, "cross_entropy": _cross_entropy, "dropout": _dropout, "pooler": _pooler,
          "classifier_head": _classifier_head, "encoder_layer": _encoder_layer, "adamw": _adamw,
          "schedule": _schedule, "step_flops": _step_flops, "loss_scaler": _loss_scaler, "ring_allreduce": _ring,
          "seed_comparison": _seed_comparison, "mlm_masking": _mlm, "nsp_pairing": _nsp, "wordpiece": _wordpiece}
