"""The doctor's checks of how a run trained: loss spikes and divergence, the learning rate and warmup,
the loss scale of mixed precision, and throughput (with a bare step of the model timed on this machine)."""
from __future__ import annotations

import math
import time

import numpy as np

from ..model.config import PRESETS
from ..constants import IGNORE_INDEX
from .run_log import EARLY, OK, PROBLEM, UNCHECKED, WARNING, Check, RunLog

# the peak learning rate of each preset in the recipes minibert measured (README: make demo, the
# WikiText-2 runs) and, for base, BERT's own (1e-4 with 1% warmup, Devlin et al. 2019)
REFERENCE_LR = {"tiny": 3e-3, "mini": 2e-3, "small": 1e-3, "base": 1e-4}


def check_stability(log: RunLog) -> Check:
    """Loss jumps, a loss that does not come back, a loss above a uniform guess, large gradient norms."""
    name = "stability: spikes and divergence"
    if len(log.train) < 5:
        return Check(name, EARLY, f"{len(log.train)} train records; the check needs 5")
    loss = np.array([r["loss"] for r in log.train], dtype=float)
    steps = [r["step"] for r in log.train]
    broken = [r for r in log.train if not all(math.isfinite(r.get(k, 0.0)) for k in ("loss", "mlm_loss"))]
    if broken:
        # a loss that is NaN or infinite: the weights themselves hold NaN or inf from that step on
        first = broken[0]
        return Check(name, PROBLEM, f"the training loss is {first['loss']} at step {first['step']:,} "
                     f"({len(broken)} of {len(log.train)} records not finite): the run diverged, or its "
                     "numbers overflowed", "lower the peak --lr, lengthen --warmup, keep gradient clipping "
                     "(--max-grad-norm 1); in mixed precision, check the loss scaling",
                     dict(first_not_finite_step=first["step"], records_not_finite=len(broken)))
    lowest = np.minimum.accumulate(loss)
    jumps = loss[1:] - lowest[:-1]             # each record against the lowest loss before it
    at = int(np.argmax(jumps))
    # the records' own noise, from one to the next in the second half of the run
    noise = float(np.median(np.abs(np.diff(loss[len(loss) // 2:])))) if len(loss) > 4 else 0.0
    tail = float(loss[-max(3, len(loss) // 10):].mean()) - float(lowest[-1])
    grads = np.array([r["grad_norm"] for r in log.train if r.get("grad_norm")], dtype=float)
    g90 = float(np.percentile(grads, 90)) if grads.size else 0.0
    numbers = dict(largest_jump=float(jumps[at]), jump_step=steps[at + 1], noise=noise, end_above_lowest=tail,
                   grad_norm_p90=g90, grad_norm_median=float(np.median(grads)) if grads.size else None)
    found = _instabilities(log, numbers)
    said = (f"largest rise of the training loss above its lowest so far: {jumps[at]:.2f} nats (step "
            f"{steps[at + 1]:,}; record-to-record noise {noise:.2f}); the last records are {tail:.2f} above "
            f"the lowest; gradient norm before clipping: median {numbers['grad_norm_median'] or 0:.2f}, "
            f"90th percentile {g90:.2f}")
    if not found:
        return Check(name, OK, said, numbers=numbers)
    verdict = PROBLEM if any(level == PROBLEM for level, _ in found) else WARNING
    return Check(name, verdict, "; ".join(text for _, text in found) + f". In all: {said}",
                 "lower the peak --lr (2 to 3 times), lengthen --warmup, and keep gradient clipping "
                 "(--max-grad-norm 1)", numbers)


def _instabilities(log: RunLog, n: dict) -> list:
    """(verdict, what) for each sign of instability; thresholds from notebook 6b's runs.

    Healthy runs there never rise more than 0.2 nats above their lowest loss, and their gradient
    norm stays below 3; at 100 times the learning rate the loss jumps 3.2 nats and the norm's
    90th percentile is 4.5; at 300 times, the loss climbs to ten times ln V and the norm to 50.
    """
    found = []
    jump, noise = n["largest_jump"], n["noise"]
    if jump > max(1.0, 8 * noise):
        found.append((PROBLEM, f"the training loss jumped {jump:.2f} nats above its lowest so far at "
                               f"step {n['jump_step']:,}"))
    elif jump > max(0.5, 5 * noise):
        found.append((WARNING, f"the training loss rose {jump:.2f} nats above its lowest so far at step "
                               f"{n['jump_step']:,}"))
    if n["end_above_lowest"] > 1.0:
        found.append((PROBLEM, f"it ends {n['end_above_lowest']:.2f} nats above its lowest: it diverged"))
    uniform = log.uniform_loss
    worst = max((r["mlm_loss"] for r in log.train[1:]), default=0.0)
    if uniform and worst > uniform + 1.0:
        found.append((PROBLEM, f"its MLM loss reached {worst:.2f}, above a uniform guess ({uniform:.2f}): "
                               f"the model was confidently wrong"))
    if n["grad_norm_p90"] > 10:
        found.append((PROBLEM, f"the gradient norm is large (90th percentile {n['grad_norm_p90']:.1f})"))
    elif n["grad_norm_p90"] > 4:
        found.append((WARNING, f"the gradient norm is often large (90th percentile {n['grad_norm_p90']:.1f})"))
    return found


def reference_lr(log: RunLog, references) -> tuple:
    """(the reference peak learning rate, where it comes from), or (None, why there is none)."""
    preset = log.arg("config")
    if preset in REFERENCE_LR:
        return REFERENCE_LR[preset], f"the reference for the {preset} preset"
    rates = sorted({ref.arg("lr") for ref in references})
    if len(rates) == 1:
        return rates[0], "the rate of the reference runs of this recipe"
    hidden = (log.model_config() or {}).get("hidden_size")
    if not hidden:
        return None, f"no reference learning rate for --config {preset}"
    # a model of its own: the preset nearest in width (the rate falls as the model widens)
    near = min(REFERENCE_LR, key=lambda p: (abs(math.log(PRESETS[p][1] / hidden)), PRESETS[p][1]))
    return REFERENCE_LR[near], f"the reference for {near}, the preset nearest in width (hidden size {PRESETS[near][1]})"


def check_schedule(log: RunLog, references, mlm: Check, stability: Check) -> Check:
    """The peak learning rate and the warmup against the reference; a problem when the curves show it."""
    name = "learning rate and warmup"
    lr, steps, warmup = log.arg("lr"), log.arg("steps", 0), log.warmup
    ref, source = reference_lr(log, references)
    found = []
    if ref and lr / ref >= 3:
        found.append(f"the peak --lr {lr:g} is {lr / ref:.0f} times {source} ({ref:g})")
    if ref and lr / ref <= 0.1:
        found.append(f"the peak --lr {lr:g} is a {ref / lr:.0f}th of {source} ({ref:g}): it learns slowly")
    if warmup == 0:
        found.append("there is no warmup: the first steps go at the full rate, while Adam's averages of the "
                     "gradients are still poor")
    elif warmup < 0.01 * steps:
        found.append(f"the warmup is {warmup} steps, {warmup / steps:.1%} of the run (BERT's: 1%)")
    if log.args.get("bias_correction") is False and steps < 10_000:
        found.append("--bert-adam over a short run: its steps are up to 6.5 times larger than the default "
                     "AdamW's for thousands of steps (notebook 6)")
    numbers = dict(lr=lr, reference_lr=ref, warmup=warmup, steps=steps)
    said = (f"peak --lr {lr:g} ({source}" + (f": {ref:g}" if ref else "") + f"), warmup {warmup:,} steps of "
            f"{steps:,} ({warmup / max(steps, 1):.0%}; minibert's default and recipes: 10%)")
    if not found:
        return Check(name, OK, said, numbers=numbers)
    advice = (f"use a peak --lr near {ref:g} " if ref else "use a lower peak --lr ") + \
        "and a warmup of about 10% of the steps (--warmup)"
    shown = [c.name for c in (mlm, stability) if c.verdict == PROBLEM]
    if shown:
        return Check(name, PROBLEM, "; ".join(found) + f", and the curves show it (see: {', '.join(shown)})",
                     advice, numbers)
    return Check(name, WARNING, "; ".join(found) + "; the curves show no harm from it so far (" + said + ")",
                 advice, numbers)


def check_loss_scale(log: RunLog) -> Check:
    """Mixed precision: a loss scale that keeps falling, and the share of steps skipped for overflow."""
    name = "mixed precision: loss scale"
    recs = [r for r in log.train if "loss_scale" in r]
    if not recs:
        return Check(name, EARLY, "no train record with a loss scale yet")
    skipped = sum(r.get("skipped_steps", 0) for r in recs)
    share, scale = skipped / max(recs[-1]["step"], 1), recs[-1]["loss_scale"]
    numbers = dict(skipped_steps=skipped, skipped_share=share, loss_scale=scale)
    said = (f"{skipped:,} of {recs[-1]['step']:,} steps skipped because their float16 gradients overflowed "
            f"({share:.1%}); the loss scale is {scale:g} at step {recs[-1]['step']:,} (it starts at 65,536)")
    advice = ("the gradients overflow float16 again and again: a lower --lr, or train without "
              "--mixed-precision to see whether the run is unstable in float32 too")
    # every skipped step is a lost step; a scale under 1 means the gradients overflow unscaled
    if share > 0.2 or scale < 1:
        return Check(name, PROBLEM, said, advice, numbers)
    if share > 0.02 or scale <= 64:
        return Check(name, WARNING, said + ("; at a small scale, small gradients round to zero in float16"
                                            if scale <= 64 else ""), advice, numbers)
    return Check(name, OK, said, numbers=numbers)


def check_throughput(log: RunLog, bare) -> Check:
    """Tokens per second against a bare step of the same model here; the time spent waiting for batches.

    ``bare``: ``measure_bare_step``'s dict, or a string saying why no step was timed.
    """
    name = "throughput"
    recs = log.train[1:]          # the first record holds the set-up of the first step
    if len(recs) < 3:
        return Check(name, EARLY, f"{len(recs)} train records after the first; the check needs 3")
    # medians: a record after an evaluation or a checkpoint also holds their time
    speed = float(np.median([r["tokens_per_s"] for r in recs]))
    wait = float(np.median([r.get("data_wait", 0.0) for r in recs]))
    d = log.data or {}
    fill = d["train_tokens"] / (d["train_instances"] * log.arg("seq_len")) if d.get("train_instances") else 1.0
    numbers = dict(tokens_per_s=speed, data_wait=wait, fill=fill)
    said = (f"median {speed:,.0f} tokens per second (real tokens; the sequences are {fill:.0%} full), "
            f"{wait:.1%} of the time waiting for the next batch")
    found = []
    if wait > 0.2:
        found.append(f"the loop waited for batches {wait:.0%} of the time: the data pipeline is the bottleneck")
    if isinstance(bare, dict):
        # the bare step computes every position, padding included: compare positions per second
        ratio = speed / fill / bare["tokens_per_s"]
        numbers.update(bare_tokens_per_s=bare["tokens_per_s"], ratio=ratio)
        said += (f"; a bare training step of this model, timed now on this machine ({bare['rows']} sequences "
                 f"of {log.arg('seq_len')} random tokens), does {bare['tokens_per_s']:,.0f} positions per "
                 f"second: the run went at {ratio:.0%} of that")
        if ratio < 0.5:
            found.append(f"the run went at {ratio:.0%} of the speed of a bare step: the rest of its time went "
                         f"elsewhere, most likely to other processes on the machine while it trained")
    else:
        said += f"; no bare step was timed ({bare})"
    if found:
        advice = [] if wait <= 0.2 else ["the batches are masked and padded by Python in one thread beside "
                                         "the step: it needs a CPU core of its own"]
        if len(found) > (wait > 0.2):
            advice.append("see what else runs on the machine (top) and train when it is quiet")
        return Check(name, WARNING, "; ".join(found) + f". In all: {said}", "; ".join(advice), numbers)
    return Check(name, OK, said, numbers=numbers)


def measure_bare_step(log: RunLog, budget_s: float = 3.0):
    """A training step of the run's model on random batches, timed here: its dict, or why it was not timed.

    The same model, sequence length, device and precision as the run, with no data pipeline, logging
    or evaluation around it: forward, backward, clipping and AdamW. A few steps (at most 5 or
    ``budget_s`` seconds, after one to warm up) on at most the run's batch size.
    """
    from ..model.config import BertConfig
    from ..model.bert import BertForPreTraining
    from ..optim import AdamW, clip_grad_norm
    try:
        known = log.model_config()
        if known is None:
            return f"the run's --config {log.arg('config')} cannot be read here"
        config = BertConfig.from_dict({k: v for k, v in known.items() if k != "parameters"})
        config.vocab_size = log.vocab_size or config.vocab_size
        model = BertForPreTraining(config, seed=0, dtype=log.arg("dtype", "float32"),
                                   device=log.arg("device", "cpu"), kernels=log.arg("kernels", "fast"),
                                   mixed_precision=bool(log.arg("mixed_precision", False)),
                                   pre_ln=bool(log.arg("pre_ln", False)))
    except Exception as exc:      # no GPU here for a GPU run, a config file that is gone, ...
        return f"the run's model cannot be built here: {exc}"
    T = log.arg("seq_len")
    speed = float(np.median([r["tokens_per_s"] for r in log.train[1:]])) if len(log.train) > 1 else 0.0
    rows = int(min(log.arg("batch_size"), max(4, math.ceil(speed * 0.5 / T))))   # about half a second a step
    batch = _random_batch(rows, T, config.vocab_size, np.random.default_rng(0))
    opt = AdamW(model.params, lr=1e-5)

    def step():
        model.forward(**batch, train=True)
        model.backward()
        clip_grad_norm(model.params, 1.0)
        opt.step()
    step()
    n, start = 0, time.perf_counter()
    while n < 5 and (n == 0 or time.perf_counter() - start < budget_s):
        step()
        n += 1
    return dict(tokens_per_s=rows * T * n / (time.perf_counter() - start), rows=rows)


def _random_batch(rows: int, T: int, V: int, rng) -> dict:
    """Random token ids, two segments, no padding, 15% of the positions predicted."""
    labels = np.full((rows, T), IGNORE_INDEX, dtype=np.int64)
    for row in labels:
        chosen = rng.choice(np.arange(1, T), size=max(1, round(0.15 * T)), replace=False)
        row[chosen] = rng.integers(5, V, size=chosen.size)
    return dict(input_ids=rng.integers(5, V, size=(rows, T)), token_type_ids=(np.arange(T) >= T // 2)[None]
                .repeat(rows, 0).astype(np.int64), attention_mask=np.ones((rows, T), dtype=np.int64),
                mlm_labels=labels, nsp_labels=rng.integers(0, 2, size=rows))
