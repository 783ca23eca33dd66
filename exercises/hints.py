"""Tiered hints, asked for one at a time: ``python -m exercises hint NAME [LEVEL]`` (or ``hint`` in a notebook).

Level 1 is the idea, level 2 the shapes and the bookkeeping, level 3 the
formula itself.  The stubs state what to compute and leave the derivation to
the student; whoever is stuck takes the next level, not the whole answer.
"""
from __future__ import annotations

LEVELS = ("the idea", "the shapes", "the formula")

HINTS: dict[str, tuple[str, ...]] = {
    "wordpiece": (
        "Two passes. basic_tokenize goes character by character: delete, replace by a space or keep each one, "
        "then split on whitespace, then cut each chunk at every punctuation mark. wordpiece_word is a greedy "
        "search that never goes back: at each position, the longest piece wins.",
        "basic_tokenize returns a flat list of str, without empty strings; a punctuation mark is a word of its own. "
        "wordpiece_word keeps a position start (0 at first) and tries end = len(word) down to start + 1; "
        "the candidate is word[start:end], with '##' in front when start > 0.",
        "accents: ''.join(c for c in unicodedata.normalize('NFD', w.lower()) if unicodedata.category(c) != 'Mn').\n"
        "punctuation: 33 <= ord(c) <= 47 or 58 <= ord(c) <= 64 or 91 <= ord(c) <= 96 or 123 <= ord(c) <= 126 or "
        "unicodedata.category(c).startswith('P').\n"
        "WordPiece: take the first candidate that is in vocab, append it, start = end; if none is, "
        "return [unk_token] (the whole word).",
    ),
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
    "pooler": (
        "The pooler reads one row of each sequence, [CLS] at position 0, through a dense layer and tanh; the "
        "NSP head is a plain 2-way linear layer on top. Going back, what was not read gets no gradient.",
        "Cache pooled (B, H) and hidden[:, 0] (B, H). dhidden starts as zeros of hidden's shape (B, T, H) and "
        "only dhidden[:, 0] is filled. dW has W's layout (out, in); db sums over the batch. The head's "
        "dlogits is (B, 2), its W (2, H).",
        "dz = dpooled * (1 - pooled**2);  dhidden[:, 0] = dz @ W;  dW = dz.T @ hidden[:, 0];  db = dz.sum(0).\n"
        "Head: logits = pooled @ W.T + b;  dpooled = dlogits @ W;  dW = dlogits.T @ pooled;  db = dlogits.sum(0).",
    ),
    "schedule": (
        "Two functions apart. The rate is piecewise linear in the step: up from 0 to the peak over the warm-up, "
        "down from the peak to 0 at total_steps, and flat at 0 after that. Clipping measures ONE norm for all the "
        "arrays together and, when it is too large, scales every array by the same factor.",
        "learning_rate returns one float; test step < warmup_steps first (never true when warmup_steps is 0, so "
        "nothing is divided by 0). clip_by_global_norm: the norm is one float summed over every array; the "
        "clipped list has one array per input, with its shape, in its place; the norm returned is the one "
        "measured before scaling.",
        "rate = peak_lr * step / warmup_steps if step < warmup_steps,\n"
        "       else peak_lr * max(0, (total_steps - step) / max(1, total_steps - warmup_steps));\n"
        "norm = sqrt(sum((g ** 2).sum() for g in grads)); coef = max_norm / (norm + 1e-6); if coef < 1: g * coef.",
    ),
    "seed_comparison": (
        "A setting is summarised by the mean of its seeds and their spread. Pairing compares the two settings "
        "seed by seed, where everything but the flag is the same, and summarises the differences the same way.",
        "Both functions take plain lists with None where a run has no number. Leave out the Nones first (for the "
        "pairs: the seeds where either side is None, before subtracting). The differences are an array, one "
        "entry per seed kept; the means and spreads are floats, nan when nothing is left.",
        "mean = x.mean(), spread = x.std(ddof=1) (divide by n - 1);\n"
        "differences = [f - d for f, d in zip(flag, default) if f is not None and d is not None].",
    ),
    "step_flops": (
        "Only matrix products count, 2 m n k each; the backward pass of a product is two more of the same "
        "size, so a step is 3 x its forward products. Go through the model and ask, for each weight matrix, "
        "how many rows it multiplies: every token, every sequence, or only the labelled positions.",
        "Per layer: Q, K, V and the output are H x H, the feed-forward H x I and I x H, all at the B T tokens; "
        "attention's q k^T and P v are (T, H) x (H, T) and (T, T) x (T, H) per sequence, heads together. "
        "The pooler (H x H) runs once per sequence, the MLM transform (H x H) and decoder (H x V) at the "
        "n_labelled positions. MFU divides a rate by a rate.",
        "FLOPs = 3 * (L * (2 B T (4 H^2 + 2 H I) + 2 * 2 B T^2 H) + 2 B H^2 + 2 n_labelled (H^2 + H V));\n"
        "mfu = flops_per_step / seconds_per_step / peak_flops.",
    ),
    "classifier_head": (
        "The head is a linear layer and the cross-entropy of notebook 3, one label per sentence. Backward, "
        "the softmax and the log cancel into one simple gradient for the logits; the linear layer does the rest.",
        "z and probs are (B, C); W is (C, H), so z = pooled @ W.T + b. Every gradient has the shape of what it "
        "is the gradient of: dpooled (B, H), dW (C, H), db (C,). The mean over the batch puts 1/B in dz.",
        "loss = -mean_j (z_j - max z_j - log sum exp(z_j - max z_j))[y_j];  dz = dloss * (probs - onehot(y)) / B;\n"
        "dpooled = dz @ W,  dW = dz.T @ pooled,  db = dz.sum(axis=0).",
    ),
    "encoder_layer": (
        "Write the forward as the chain of pieces and keep each piece's cache under its own name. The backward "
        "runs the chain in reverse, and wherever a value was used twice its gradient is the SUM of both uses: "
        "h (the FFN and the skip to h + f), x (three projections and the skip to x + a), W_word (the "
        "embedding lookup and the decoder).",
        "split: (B, T, H) -reshape-> (B, T, A, D) -swapaxes(1, 2)-> (B, A, T, D); merge is the reverse, and "
        "each one's backward is the other. The padding mask is a bias on the keys: "
        "L.attention_mask_bias(attention_mask, x.dtype) is (B, 1, 1, T). The embedding's share of dW_word "
        "(V, H) scatters de (B, T, H) into the rows of ids; the decoder's is dlogits^T t summed over (B, T).",
        "layer backward: ds2 = LN_2'(dy); dh = FFN'(ds2) + ds2; ds1 = LN_1'(dh); "
        "dq, dk, dv = attention'(split(dense_o'(ds1)));\n"
        "dx = ds1 + sum over q, k, v of linear'(merge(d)).   "
        "tied: dW_word = dlogits^T t + (np.add.at(zeros, ids.ravel(), de.reshape(-1, H))).",
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
    "bert": (
        "Write the forward pass as notebook 13's list of pieces, in order, keeping every piece's cache under "
        "a name of its own; the backward pass walks the same list backwards. Three values are used twice and "
        "collect two gradients each: every residual input, the last layer's output (the pooler reads [CLS], "
        "the MLM head reads every position), and the word table (the lookup and the decoder). The training "
        "loop is notebook 06's loop, with your functions in place of minibert's.",
        "The MLM head runs at every position, (B, T, H) -> (B * T, V) logits, and the labels -100 leave the "
        "other positions out of the loss; the two losses are added, so each backward starts from 1.0. "
        "Split (B, T, H) -> (B, A, T, D) for attention and merge back, as in exercise encoder_layer. "
        "In train, keep m and v per parameter, zeros at first; clip all the gradients together, then update "
        "each parameter with its own decay flag.",
        "dt, dW_decoder, db = linear_backward(dlogits, decoder cache); ...; d_last = d_mlm_transform + "
        "pooler_backward(...)[0]; per layer backwards: ds2 = LN2'(dh); dh = FFN'(dropout'(ds2)) + ds2; "
        "ds1 = LN1'(dh); dh = ds1 + sum of the q, k, v projections' dx; at the bottom "
        "dW_word = embedding_backward(de, cache, padding_idx=pad) + dW_decoder.\n"
        "train: lr = learning_rate(step, ...); params[n], m[n], v[n] = adamw_step(params[n], g, m[n], v[n], "
        "step + 1, lr=lr, weight_decay=weight_decay, decay=not (n.endswith('.bias') or 'LayerNorm' in n)).",
    ),
}

# the graded questions (exercises/checks/questions.py): the idea, then the working; the answer is the student's
QUESTION_LEVELS = ("the idea", "the working")
HINTS.update({
    "snowman": (
        "Two steps: the basic split (whitespace, then punctuation), then WordPiece on each word. Is the snowman "
        "punctuation? unicodedata.category tells.",
        "A symbol (category 'So') is not punctuation, so the glued text stays one word. WordPiece finds 'token', "
        "'##ization', then nothing for '##\u2603': what happens to a word when one position has no piece?",
    ),
    "layernorm_sum": (
        "Add the same number c to every x_i of a row. What happens to the mean, to x - mean, to y?",
        "y does not change along the direction (1, 1, ..., 1), so the directional derivative of the loss along it "
        "is 0, and that derivative is the sum of dL/dx_i.",
    ),
    "unscaled_softmax": (
        "Raw scores at head size D have a standard deviation of sqrt(D). How peaked is a softmax of 16 scores "
        "with a spread of 8?",
        "The Jacobian diag(p) - p p^T is small only when one weight is near 1. At D = 64 the largest weight "
        "averages about 0.84: the Jacobian shrinks, but not to nothing.",
    ),
    "masked_count": (
        "k = min(max_predictions, max(1, round(0.15 n))) with n counting every token, [CLS] and [SEP] included.",
        "0.15 n is 1.5, 10.5 and 30: Python 3's round goes to the even neighbour on an exact half; then the cap.",
    ),
    "isnext_share": (
        "The coin is fair when the chunk CAN be split. Which chunks cannot?",
        "A chunk of a single sentence (a one-sentence document, or a document's leftover) has no split point: its "
        "pair is always NotNext.",
    ),
    "untrained_loss": (
        "At N(0, 0.02) every logit is close to 0. What distribution does a softmax of equal logits give?",
        "Uniform over the classes: cross-entropy -log(1/C) = log C, for C = V in the MLM head and C = 2 in NSP.",
    ),
    "nsp_prior": (
        "A model that knows only the prior answers P(NotNext) = p for every pair: its loss on a pair is -ln p or "
        "-ln(1 - p). How often is each one paid, on the training pairs and on the held-out pairs?",
        "Training pairs: NotNext with probability p, so -p ln p - (1 - p) ln(1 - p). Held-out pairs: balanced, so "
        "-(ln p + ln(1 - p)) / 2. Use p as printed above, in nats.",
    ),
    "standard_errors": (
        "A model that has learned nothing gets each pair right with probability 1/2: its accuracy on n pairs is a "
        "mean of n coin flips. What is the standard deviation of that mean?",
        "sqrt(0.5 * 0.5 / n) for n = 238 pairs; the answer is (accuracy - 0.5) divided by it.",
    ),
    "mixed_bound": (
        "Split the float32 step's time into the products (a share f of it: the MFU, the products at the ceiling) "
        "and the rest. What happens to each part when only the products get faster?",
        "Amdahl's law: the step takes (1 - f) + f / r of its time, r the ratio of the ceilings; the speed-up is "
        "the inverse.",
    ),
    "attention_share": (
        "Count per token and layer: the weight matrices (Q, K, V, output, the feed-forward's two) against the two "
        "attention products, forward and backward alike.",
        "Weights: 2 (4 H^2 + 2 H I) FLOPs per token and layer; q k^T and P v: 2 T H each. The heads do not "
        "change either count; the MLM head and the pooler add a little to the total.",
    ),
    "longer_sequences": (
        "Which products grow with the number of tokens, and which with the number of pairs of tokens?",
        "Weight matrices (and the MLM head at 15% of the tokens): 4 times the work. QK^T and PV: 16 times. "
        "Weigh the two with step_flops (or your training_step_flops) for BERT-base.",
    ),
    "finetune_rows": (
        "Which operations read the word table in a fine-tuning model (BertModel and a classifier on pooled)?",
        "Only the lookup at the bottom: its backward adds gradients into the rows of the tokens it read.",
    ),
    "pre_ln_growth": (
        "In pre-LN, x <- x + f(LN(x)): each of the 48 sub-blocks adds a vector of about the same size to the "
        "stream, and nothing normalises the stream itself.",
        "Vectors in nearly independent directions add like a random walk: the squared size grows by about the "
        "same amount at each layer, so the size grows like the square root of the depth.",
    ),
    "float16_total": (
        "Each partial sum is rounded to the nearest float16. A term changes the total only if it is more than "
        "half the spacing there.",
        "The spacing of float16 between 2^e and 2^(e+1) is 2^(e-10). Find the first power of two where half the "
        "spacing exceeds 1e-4.",
    ),
    "ring_bytes": (
        "The vector is cut into N chunks of S / N bytes. How many steps has each phase, and what does each worker "
        "send in one step?",
        "Reduce-scatter: N - 1 steps, one chunk each; all-gather: N - 1 more. The central worker receives a whole "
        "vector from each other worker.",
    ),
    "t_quantile": (
        "The half-width of the interval is t times s_d / sqrt(n): t is a quantile of Student's t, with n - 1 "
        "degrees of freedom.",
        "99% two-sided: the quantile at 0.995. scipy.stats.t.ppf(0.995, df), for df = 2 and 4.",
    ),
    "word_rows": (
        "Two places read the word table in BertForPreTraining: the lookup at the bottom, and the MLM decoder at "
        "the top.",
        "The decoder's logits are h W^T over the WHOLE vocabulary: the softmax gives every row a gradient.",
    ),
})
