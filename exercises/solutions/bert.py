"""Solution: BERT for pre-training from the pieces of the earlier exercises, and its training loop."""
import numpy as np

from exercises.solutions.adamw import adamw_step
from exercises.solutions.cross_entropy import softmax_cross_entropy_backward, softmax_cross_entropy_forward
from exercises.solutions.dropout import (attention_dropout_backward, attention_dropout_forward, dropout_backward,
                                         dropout_forward)
from exercises.solutions.embedding import embedding_backward, embedding_forward
from exercises.solutions.encoder_layer import _merge, _split     # (B, T, H) <-> (B, A, T, D), the heads
from exercises.solutions.gelu import gelu_backward, gelu_forward
from exercises.solutions.layernorm import layernorm_backward, layernorm_forward
from exercises.solutions.linear import linear_backward, linear_forward
from exercises.solutions.pooler import nsp_head_backward, nsp_head_forward, pooler_backward, pooler_forward
from exercises.solutions.schedule import clip_by_global_norm, learning_rate

EMB, LAYER, MLM = "bert.embeddings.", "bert.encoder.layer.", "cls.predictions."
WORD = EMB + "word_embeddings.weight"
QKV = ("query", "key", "value")


def bert_forward(params, batch, config, rng=None):
    """The loss of BertForPreTraining on one batch (the MLM loss plus the NSP loss), and the cache.

    params: {Hugging Face name: array}; batch: input_ids, token_type_ids, attention_mask, mlm_labels
    (B, T) and nsp_labels (B,); config: num_hidden_layers, num_attention_heads, hidden_dropout_prob,
    attention_probs_dropout_prob, layer_norm_eps, pad_token_id; rng: a Generator for the dropout
    masks (training), or None (evaluation, no dropout)."""
    train = rng is not None
    p_hidden, p_attn = config["hidden_dropout_prob"], config["attention_probs_dropout_prob"]
    heads, eps = config["num_attention_heads"], config["layer_norm_eps"]
    ids, mask = batch["input_ids"], batch["attention_mask"]
    B, T = ids.shape
    c = {"config": config, "shape": (B, T)}

    def linear(x, name, W=None):
        out, c[name] = linear_forward(x, params[name + ".weight"] if W is None else W, params[name + ".bias"])
        return out

    def norm(x, name):
        out, c[name] = layernorm_forward(x, params[name + ".weight"], params[name + ".bias"], eps)
        return out

    def drop(x, name):
        out, c[name + ".dropout"] = dropout_forward(x, p_hidden, rng, train=train)
        return out

    # embeddings: word + position + segment, normalised, then dropped out
    positions = np.broadcast_to(np.arange(T), (B, T))
    e = 0.0
    for table, which in (("word", ids), ("position", positions), ("token_type", batch["token_type_ids"])):
        out, c[table] = embedding_forward(which, params[f"{EMB}{table}_embeddings.weight"])
        e = e + out
    h = drop(norm(e, EMB + "LayerNorm"), EMB)
    for layer in range(config["num_hidden_layers"]):
        P = f"{LAYER}{layer}."
        q, k, v = (_split(linear(h, f"{P}attention.self.{n}"), heads) for n in QKV)
        ctx, c[P + "attention"] = attention_dropout_forward(q, k, v, mask, p_attn, rng, train=train)
        a = drop(linear(_merge(ctx), P + "attention.output.dense"), P + "attention.output")
        h = norm(h + a, P + "attention.output.LayerNorm")           # post-LN: normalise the residual sum
        f, c[P + "gelu"] = gelu_forward(linear(h, P + "intermediate.dense"))
        f = drop(linear(f, P + "output.dense"), P + "output")
        h = norm(h + f, P + "output.LayerNorm")
    # NSP: the pooler on [CLS], then two scores
    pooled, c["pooler"] = pooler_forward(h, params["bert.pooler.dense.weight"], params["bert.pooler.dense.bias"])
    nsp_logits, c["nsp"] = nsp_head_forward(pooled, params["cls.seq_relationship.weight"],
                                            params["cls.seq_relationship.bias"])
    # MLM: transform every position, then the decoder tied to the word embeddings (its own bias)
    t, c["mlm.gelu"] = gelu_forward(linear(h, MLM + "transform.dense"))
    t = norm(t, MLM + "transform.LayerNorm")
    logits, c["decoder"] = linear_forward(t.reshape(B * T, -1), params[WORD], params[MLM + "bias"])
    mlm_loss, c["mlm.loss"] = softmax_cross_entropy_forward(logits, batch["mlm_labels"].reshape(-1))
    nsp_loss, c["nsp.loss"] = softmax_cross_entropy_forward(nsp_logits, batch["nsp_labels"])
    return mlm_loss + nsp_loss, c


def bert_backward(cache):
    """{name: gradient of the loss} for every parameter, the same keys and shapes as params."""
    c, grads = cache, {}
    config = c["config"]
    B, T = c["shape"]

    def linear(d, name):
        dx, dW, grads[name + ".bias"] = linear_backward(d, c[name])
        grads[name + ".weight"] = dW
        return dx

    def norm(d, name):
        dx, grads[name + ".weight"], grads[name + ".bias"] = layernorm_backward(d, c[name])
        return dx

    def drop(d, name):
        return dropout_backward(d, c[name + ".dropout"])

    # the two losses were added: each gets the upstream gradient 1
    dlogits = softmax_cross_entropy_backward(1.0, c["mlm.loss"])
    dnsp = softmax_cross_entropy_backward(1.0, c["nsp.loss"])
    dt, dW_decoder, grads[MLM + "bias"] = linear_backward(dlogits, c["decoder"])
    dt = norm(dt.reshape(B, T, -1), MLM + "transform.LayerNorm")
    dh = linear(gelu_backward(dt, c["mlm.gelu"]), MLM + "transform.dense")
    dpooled, grads["cls.seq_relationship.weight"], grads["cls.seq_relationship.bias"] = nsp_head_backward(dnsp, c["nsp"])
    dcls, grads["bert.pooler.dense.weight"], grads["bert.pooler.dense.bias"] = pooler_backward(dpooled, c["pooler"])
    dh = dh + dcls                                                   # the last layer's output feeds both heads
    for layer in reversed(range(config["num_hidden_layers"])):
        P = f"{LAYER}{layer}."
        dsum = norm(dh, P + "output.LayerNorm")                      # the gradient of h + f
        df = linear(drop(dsum, P + "output"), P + "output.dense")
        dh = linear(gelu_backward(df, c[P + "gelu"]), P + "intermediate.dense") + dsum
        dsum = norm(dh, P + "attention.output.LayerNorm")            # the gradient of x + a
        dctx = _split(linear(drop(dsum, P + "attention.output"), P + "attention.output.dense"),
                      config["num_attention_heads"])
        dq, dk, dv = attention_dropout_backward(dctx, c[P + "attention"])
        dh = dsum                                                    # x also went straight into the sum
        for d, n in zip((dq, dk, dv), QKV):
            dh = dh + linear(_merge(d), f"{P}attention.self.{n}")
    de = norm(drop(dh, EMB), EMB + "LayerNorm")
    grads[EMB + "position_embeddings.weight"] = embedding_backward(de, c["position"])
    grads[EMB + "token_type_embeddings.weight"] = embedding_backward(de, c["token_type"])
    # the word table is read twice: by the lookup ([PAD]'s row left out, as BERT's) and as the decoder
    grads[WORD] = embedding_backward(de, c["word"], padding_idx=config["pad_token_id"]) + dW_decoder
    return grads


def _decays(name):
    return not (name.endswith(".bias") or "LayerNorm" in name)       # BERT decays the weights only


def train(params, batches, config, *, peak_lr, warmup_steps, weight_decay=0.01, max_grad_norm=1.0, seed=0):
    """One step per batch (forward, backward, clipping, the step's rate, AdamW): (new params, losses)."""
    rng = np.random.default_rng(seed)
    params = {name: value.copy() for name, value in params.items()}
    m = {name: np.zeros_like(value) for name, value in params.items()}
    v = {name: np.zeros_like(value) for name, value in params.items()}
    names, losses = list(params), []
    for step, batch in enumerate(batches):
        loss, cache = bert_forward(params, batch, config, rng)
        grads = bert_backward(cache)
        clipped, _ = clip_by_global_norm([grads[name] for name in names], max_grad_norm)
        lr = learning_rate(step, peak_lr=peak_lr, warmup_steps=warmup_steps, total_steps=len(batches))
        for name, g in zip(names, clipped):
            params[name], m[name], v[name] = adamw_step(params[name], g, m[name], v[name], step + 1, lr=lr,
                                                        weight_decay=weight_decay, decay=_decays(name))
        losses.append(float(loss))
    return params, losses
