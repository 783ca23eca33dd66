"""Tiered hints, asked for one at a time: ``python -m exercises hint NAME [LEVEL]`` (or ``hint`` in a notebook).

Level 1 is the idea, level 2 the shapes and the bookkeeping, level 3 the
formula itself.  The stubs state what to compute and leave the derivation to
the student; whoever is stuck takes the next level, not the whole answer.
"""
from __future__ import annotations

LEVELS = ("the idea", "the shapes", "the formula")

HINTS: dict[str, tuple[str, ...]] = {
    "linear": (
        "Flatten every leading axis: x becomes X (N, in), dy becomes G (N, out). Then y = X W^T + b is one "
        "matrix product, and each gradient is another one.",
        "A gradient has the shape of what it is the gradient of: dx (..., in), dW (out, in), db (out,). "
        "b is added to every row, so db sums G over all N rows. Reshape dx back to x's shape at the end.",
        "dX = G W,   dW = G^T X,   db = G.sum(axis=0).",
    ),
    "embedding": (
        "The lookup copies rows; its backward adds each gradient row back into the row of W it was read "
        "from. A token that occurs twice was read twice, so it gets both gradients.",
        "dW starts as zeros of W's shape (V, H). Flatten ids to (B*T,) and dout to (B*T, H). "
        "With padding_idx, set that row of dW back to zero at the end.",
        "np.add.at(dW, ids.reshape(-1), dout.reshape(-1, H)) adds every occurrence; "
        "dW[ids] += dout does not (a repeated index is written once).",
    ),
    "layernorm": (
        "Each x_j of a row moves the row's mean and variance, and through them every xhat_i of that row. "
        "So dx has three paths: the direct one through xhat, one through mu and one through var. "
        "Start from g = dy * gamma, the gradient with respect to xhat.",
        "Keep xhat (..., H), r = 1 / sqrt(var + eps) (..., 1) and gamma in the cache. Every mean in the "
        "backward pass is over the last axis with keepdims=True; dgamma and dbeta sum over every axis "
        "but the last, giving (H,).",
        "dx = r * (g - mean(g) - xhat * mean(g * xhat)),   dgamma = sum(dy * xhat),   dbeta = sum(dy).\n"
        "Leaving out '- mean(g)' drops the path through mu; leaving out the last term drops the path "
        "through var.",
    ),
    "gelu": (
        "GELU(x) = x * Phi(x) is a product of two functions of x: use the product rule, and remember that "
        "the derivative of a cumulative distribution function is its density.",
        "Everything is elementwise: keep x (or x and Phi(x)) in the cache; dx has x's shape.",
        "d GELU / dx = Phi(x) + x * phi(x),   Phi(x) = (1 + erf(x / sqrt(2))) / 2,   "
        "phi(x) = exp(-x^2 / 2) / sqrt(2 pi).",
    ),
    "softmax": (
        "Every p_i depends on every x_j of its row (they share the denominator), so the backward pass is "
        "a Jacobian-vector product, row by row; you never need to build the C x C Jacobian.",
        "Keep p (..., C) in the cache. The correction term is one number per row: a sum over the last "
        "axis with keepdims=True.",
        "dp_i/dx_j = p_i (delta_ij - p_j), so dx = p * (dp - sum(dp * p, axis=-1, keepdims=True)).",
    ),
    "attention": (
        "Go backwards through the forward pass one line at a time: out = P v, P = softmax(S), "
        "S = q k^T / sqrt(D) + mask. The mask is a constant: it reaches the gradients only through P.",
        "S, P and dP are (B, A, T, T); q, k, v and their gradients (B, A, T, D). A transpose of the last "
        "two axes is .swapaxes(-1, -2). The softmax backward sums over the keys (the last axis).",
        "dv = P^T dout,   dP = dout v^T,   dS = P * (dP - sum_keys(dP * P)),\n"
        "dq = dS k / sqrt(D),   dk = dS^T q / sqrt(D).",
    ),
    "cross_entropy": (
        "Only labelled rows count, in the sum and in the count you divide by; an ignored row gets exactly "
        "zero gradient.",
        "Make a 0/1 mask (N,) of labelled rows and n_valid = mask.sum(). Replace ignored labels by 0 before "
        "indexing log p, then multiply by the mask.",
        "loss = -sum(mask * logp[arange(N), labels]) / n_valid;\n"
        "dlogits = dloss * (softmax(logits) - onehot(labels)) * mask[:, None] / n_valid.",
    ),
    "dropout": (
        "Inverted dropout scales at training time, so that evaluation is the identity. The backward pass "
        "must use the very mask the forward pass drew. Inside attention, dropout sits between the softmax "
        "and v.",
        "mask = (rng.random(x.shape) >= p) / (1 - p), x's shape. In attention the mask is (B, A, T, T), "
        "like P; keep both P (before dropout) and the dropped Pd in the cache.",
        "dropout: dx = dout * mask.  attention: dv = Pd^T dout, dPd = dout v^T, dP = dPd * mask,\n"
        "dS = P * (dP - sum_keys(dP * P)) with P before dropout, dq = dS k / sqrt(D), dk = dS^T q / sqrt(D).",
    ),
    "mlm_masking": (
        "Two random draws, one after the other: first WHICH positions are predicted (a fixed number of "
        "them, never a special token), then WHAT each chosen position shows (80/10/10).",
        "candidates = positions whose id is not special; n = min(max_predictions, max(1, "
        "round(len(ids) * mlm_probability))); choose min(n, len(candidates)) of them without replacement.",
        "for each chosen i: u = rng.random(); u < 0.8 -> mask_id; u < 0.9 -> a random ordinary id; "
        "else ids[i]. labels[i] = ids[i] for every chosen i (whatever it shows), -100 elsewhere.",
    ),
    "nsp_pairing": (
        "Decide the label first (IsNext only when A has a next sentence and a fair coin says so), then "
        "fetch B, then cut the pair to fit.",
        "A random other document: j = rng.integers(0, len(documents) - 1), plus 1 if j >= doc_index. "
        "The budget for A and B is max_len - 3 tokens ([CLS] and two [SEP]).",
        "while len(A) + len(B) > max_len - 3: drop the last token of the longer one (B on a tie).\n"
        "input = [CLS] + A + [SEP] + B + [SEP]; token_type_ids = 0 * (len(A) + 2) then 1 * (len(B) + 1).",
    ),
    "adamw": (
        "Two things happen in one step: the weights shrink on their own (decoupled decay, only where "
        "decay=True), and Adam moves them by a bias-corrected ratio of two running averages.",
        "m and v have the parameter's shape. Step t starts at 1, so the bias corrections 1 - beta^t are "
        "never zero. Decay uses the parameter before this step's Adam update.",
        "param *= 1 - lr * wd (if decay); m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;\n"
        "param -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).",
    ),
    "loss_scaler": (
        "The backward pass differentiated scale * loss, so every gradient is scale times too large: divide it "
        "out, then ask one question of all the gradients together (is anything inf or NaN?). The rule then "
        "shrinks the scale after an overflow and grows it after a long enough run without one.",
        "unscale_and_check returns a list with one array per gradient, each of its shape, and one bool. "
        "update_scale returns (scale, good_steps, take_step); good_steps counts the finite steps since the "
        "scale last changed, so it goes back to 0 whenever the scale changes.",
        "found_inf = not all(np.isfinite(g).all() for g in unscaled).  Overflow: (scale * backoff_factor, 0, "
        "False).  Finite: good_steps += 1; if good_steps >= growth_interval: (scale * growth_factor, 0, True); "
        "else (scale, good_steps, True).",
    ),
    "ring_allreduce": (
        "Each step, every rank sends one chunk to its right neighbour, all at once. In the first phase the "
        "receiver adds what it gets, so a chunk's running sum grows by one rank per step; in the second the "
        "finished sums travel round the ring and simply replace the copies.",
        "Copy the chunks into a state (R lists of R arrays). Per step, first collect every message "
        "(sender r, chunk index, a copy of the data), then deliver them to (r + 1) % R. R - 1 steps per phase.",
        "reduce-scatter step s: c = (r - s) % R; state[(r + 1) % R][c] = state[(r + 1) % R][c] + message.\n"
        "all-gather step s: c = (r + 1 - s) % R; state[(r + 1) % R][c] = message.",
    ),
}
