"""The doctor's checks of what a run learned: MLM against its baselines, NSP against its prior, memorising, the data.

Each takes a ``RunLog`` and returns a ``Check``.  The thresholds are written out where they
are used, with the reasoning; they were set on the committed runs of ``make demo``'s recipe
and of notebooks 6a and 6b's curves (healthy ones, and ones broken on purpose), not on any run the
tests check.
"""
from __future__ import annotations

import math

from .run_log import EARLY, OK, PROBLEM, UNCHECKED, WARNING, Check, RunLog, mean


def _tokens_per_step(log: RunLog) -> int:
    return max(log.sequences_per_step * (log.arg("seq_len") or 128), 1)


def fair_steps(log: RunLog) -> int:
    """Steps after which a learning run's held-out MLM loss is clearly below the unigram baseline.

    In the reference runs (128 sequences of 32 tokens a step) it leaves the baseline between steps
    100 and 200 and is 0.3-0.45 nats below it by step 300, 1.2 million tokens in. What counts is
    the text seen, not the steps: a run of smaller batches needs more of them. The warmup delays
    everything: at least the warmup and as many steps again.
    """
    return max(2 * log.warmup, math.ceil(1_200_000 / _tokens_per_step(log)))


def nsp_fair_steps(log: RunLog) -> int:
    """NSP comes later: the reference runs answer by the class prior for their first 200-300 steps
    and are above it by step 500, 2 million tokens in."""
    return max(3 * log.warmup, math.ceil(2_000_000 / _tokens_per_step(log)))


def mlm_margin(n_masked: int) -> float:
    """How far below the baseline a held-out MLM loss must be to count as below it.

    The model's and the baseline's losses are taken on the same masked tokens, so the noise of
    their difference is that of a mean of n per-token differences, whose spread is about 2 nats
    in these runs: two standard errors are 4/sqrt(n) (0.12 on 1,157 tokens), never below 0.05.
    """
    return max(0.05, 4.0 / math.sqrt(max(n_masked, 1)))


def check_mlm(log: RunLog) -> Check:
    """Is the masked-word loss below what word frequencies alone give (the model uses the context)?"""
    name = "MLM: the model uses the context"
    evals = [e for e in log.evals if e["step"] > 0]
    if not evals:
        return Check(name, EARLY, "no held-out evaluation after step 0 yet")
    e, uniform = evals[-1], log.uniform_loss
    base, loss, margin = e["unigram_baseline"], e["mlm_loss"], mlm_margin(e.get("n_masked", 0))
    gap = base - loss
    numbers = dict(step=e["step"], heldout_mlm_loss=loss, unigram_baseline=base, gap=gap, margin=margin,
                   ln_v=uniform)
    said = (f"held-out MLM loss {loss:.2f} at step {e['step']:,}, against {base:.2f} for guessing each "
            f"masked word by its frequency alone (the unigram baseline)"
            + (f" and {uniform:.2f} for a uniform guess (ln V)" if uniform else ""))
    if uniform and loss > uniform - 0.5:
        # a model learns the word frequencies in its first tens of steps: still at ln V after the
        # warmup, it is learning nothing at all
        if e["step"] < max(100, log.warmup):
            return Check(name, EARLY, said + ": still at the start", numbers=numbers)
        return Check(name, PROBLEM, said + ": the model has not even learned which words are frequent",
                     "check that the loss reaches the optimiser: a --lr far too small (or 0 after a "
                     "--warmup as long as the run), or the labels not matching the inputs", numbers)
    if gap >= 3 * margin:
        return Check(name, OK, said + f": {gap:.2f} nats below the baseline", numbers=numbers)
    if e["step"] < fair_steps(log):
        return Check(name, EARLY, said + f"; a learning run is clearly below the baseline by step "
                     f"{fair_steps(log):,}", numbers=numbers)
    advice = "the model has learned how often each word occurs, and nothing from the words around it. " + \
        _stuck_cause(log)
    best = min(evals, key=lambda r: r["mlm_loss"])
    if base - best["mlm_loss"] >= 2 * margin:
        # it did use the context, and lost it: the held-out loss climbed back (memorising)
        return Check(name, PROBLEM if gap < margin else WARNING, said + f": it was {base - best['mlm_loss']:.2f} "
                     f"below at step {best['step']:,}, and has lost that since", "see the memorising check: "
                     "the model is learning its training text by heart", numbers)
    if gap < -margin:
        return Check(name, PROBLEM, said + f": {-gap:.2f} above it, worse than the word frequencies alone",
                     advice, numbers)
    if gap < margin:
        return Check(name, PROBLEM, said + f": not below it (the difference, {gap:+.2f}, is within the "
                     f"noise of {margin:.2f})", advice, numbers)
    return Check(name, WARNING, said + f": only {gap:.2f} below it", "it is learning from the context, "
                 "slowly: train longer, or compare a somewhat higher or lower --lr", numbers)


def _stuck_cause(log: RunLog) -> str:
    """What most likely keeps a model at the word frequencies: the learning rate, unless it is the usual one."""
    from .doctor_health import reference_lr
    ref, source = reference_lr(log, [])
    usual = ref is not None and log.arg("lr") / ref < 3 and log.args.get("bias_correction") is not False
    if usual:
        return (f"The peak learning rate, {log.arg('lr'):g}, is the usual one ({source}), so look at the data: "
                f"are the MLM labels the tokens that were hidden, at the positions that were hidden?")
    return ("The usual cause is a learning rate too large for the model (each step undoes what is finer than "
            "the frequencies): try a peak --lr 3 to 10 times lower, and keep a warmup; with --bert-adam, try "
            "the default AdamW")


def nsp_prior(log: RunLog):
    """(share of NotNext training pairs, accuracy of always answering the commoner label), or (None, None)."""
    p = (log.data or {}).get("not_next_share")
    return (p, max(p, 1 - p)) if isinstance(p, (int, float)) else (None, None)


def check_nsp(log: RunLog) -> Check:
    """Does NSP tell pairs apart, beyond answering by how often each label occurs?"""
    name = "NSP: beyond the class prior"
    if log.arg("no_nsp", False):
        return Check(name, UNCHECKED, "not trained: --no-nsp")
    evals = [e for e in log.evals if e["step"] > 0]
    if not evals:
        return Check(name, EARLY, "no held-out evaluation after step 0 yet")
    e = evals[-1]
    n = max(e.get("n_pairs", 0), 1)
    z = (e["nsp_acc"] - 0.5) / (0.5 / math.sqrt(n))     # held-out pairs are balanced: chance is 50%
    p, prior = nsp_prior(log)
    late = log.late(e["step"])
    train_acc = mean(late, "nsp_acc")
    numbers = dict(step=e["step"], heldout_nsp_acc=e["nsp_acc"], n_pairs=n, z=z, not_next_share=p,
                   prior_acc=prior, train_nsp_acc=train_acc)
    held = (f"held-out NSP accuracy {e['nsp_acc']:.1%} at step {e['step']:,} on {n} pairs, half of them "
            f"IsNext (chance: 50%, one standard error {50 / math.sqrt(n):.1f} points)")
    prior_said = (f"{p:.1%} of this corpus's training pairs at --seq-len {log.arg('seq_len')} are NotNext "
                  f"(a chunk of a single sentence has no next segment, so it is always NotNext), so always "
                  f"answering {'NotNext' if p >= 0.5 else 'IsNext'} is right {prior:.1%} of the time"
                  if p is not None else "the share of NotNext among the training pairs is not known for this run")
    constant = _constant_labels(log, prior, numbers)
    if constant:
        return Check(name, PROBLEM, constant + f"; {prior_said}; {held}",
                     "check the NSP labels of the training batches: they are (nearly) all one class", numbers)
    if prior is not None and prior >= 0.9:
        return Check(name, PROBLEM, f"{prior_said}: NSP has almost nothing to learn; {held}",
                     "raise --seq-len, so that chunks hold several sentences, or use a corpus whose "
                     "documents have several sentences", numbers)
    if z >= 2:
        trained = f"; on its training batches {train_acc:.1%}" if train_acc is not None else ""
        return Check(name, OK, f"{held}: {z:.1f} standard errors above chance{trained}; {prior_said}",
                     numbers=numbers)
    if log.step < nsp_fair_steps(log):
        return Check(name, EARLY, f"{held}; a model answers by the class prior first, for some hundreds "
                     f"of steps (judged from step {nsp_fair_steps(log):,}); {prior_said}", numbers=numbers)
    return _nsp_at_chance(name, held, prior_said, late, log, numbers)


def _constant_labels(log: RunLog, prior, numbers) -> str:
    """The tell of training labels that are all one class: right almost every time from the first steps.

    Telling pairs apart takes hundreds of steps (the reference runs' training accuracy is the
    prior, about 69%, over their first 100 steps; a run that memorises its pairs needs more
    than 200 steps to pass 90%), while a constant label is learned within tens of them.
    """
    early = [r for r in log.train[1:] if r["step"] <= max(100, log.arg("steps", 0) // 10)]
    acc = mean(early, "nsp_acc")
    numbers["early_train_nsp_acc"] = acc
    if len(early) < 3 or acc is None or acc < 0.97 or (prior is not None and prior >= 0.97):
        return ""
    return (f"on its training batches NSP is right {acc:.1%} of the time already by step "
            f"{early[-1]['step']:,}, far faster than pairs can be learned")


def _nsp_at_chance(name, held, prior_said, late, log: RunLog, numbers) -> Check:
    train_acc = mean(late, "nsp_acc")
    p, prior = nsp_prior(log)
    if prior is None or train_acc is None:
        return Check(name, WARNING, f"{held}: at chance; {prior_said}",
                     "train longer; if it stays at 50%, see what the training accuracy does", numbers)
    pairs = max(len(late) * log.arg("log_every", 1) * log.sequences_per_step, 1)
    noise = max(0.03, 2 * math.sqrt(prior * (1 - prior) / pairs))
    trained = f"on its training batches {train_acc:.1%} (steps {late[0]['step']:,} to {late[-1]['step']:,})"
    if abs(train_acc - prior) <= noise:
        return Check(name, PROBLEM, f"{held}: at chance; {trained}, which is the prior: {prior_said}. "
                     f"The model has learned how often each answer is right, not which pairs go together "
                     f"(the 50% trap)", "a learning rate too large keeps a model at the prior: try a peak "
                     "--lr 3 to 10 times lower; otherwise train longer (NSP is learned after MLM)", numbers)
    if train_acc >= 0.9:
        return Check(name, PROBLEM, f"{held}: at chance; {trained}: it has learned its training pairs by "
                     f"heart, and nothing that carries over to new ones ({prior_said})",
                     "see the repeated pairs check", numbers)
    if train_acc < prior - noise:
        return Check(name, PROBLEM, f"{held}: at chance; {trained}, below even the prior: {prior_said}. "
                     f"Answering by the prior alone would do better on its own training pairs",
                     "see the stability check: a learning rate too large throws the model around", numbers)
    return Check(name, WARNING, f"{held}: not above chance yet; {trained}, above the prior ({prior_said}): "
                 f"it is learning its training pairs, and that does not carry over yet",
                 "train longer; if the training accuracy nears 100% while held-out stays at 50%, it is "
                 "memorising its pairs (see the repeated pairs check)", numbers)


def exposure(log: RunLog, step: int):
    """(a sentence on how often the run saw its training pairs and text, passes over the pairs) or ("", None)."""
    d = log.data or {}
    if not d.get("train_instances") or not d.get("train_tokens"):
        return "", None
    passes = step * log.sequences_per_step / d["train_instances"]
    dupe = log.arg("dupe_factor", 1)
    unit = "sequence" if log.arg("no_nsp", False) else "pair"     # --no-nsp: packed sentences, no pairs
    return (f"its {step:,} steps of {log.sequences_per_step} sequences went {passes:.1f} times over its "
            f"{d['train_instances']:,} training {unit}s, which --dupe-factor {dupe} cut from "
            f"{d['train_tokens'] / dupe:,.0f} tokens of training text"
            + (f": each {unit} came back about {passes:.0f} times, the text about {passes * dupe:.0f} times"
               if passes >= 1.5 else "")), passes


def check_memorising(log: RunLog) -> Check:
    """Does the model fit its training text much better than text it has never seen, or get worse on it?"""
    name = "memorising: training against held-out"
    evals = [e for e in log.evals if e["step"] > 0]
    late = log.late(evals[-1]["step"]) if evals else []
    if not late:
        return Check(name, EARLY, "no held-out evaluation with training records before it yet")
    e, train_mlm = evals[-1], mean(late, "mlm_loss")
    best = min(evals, key=lambda r: r["mlm_loss"])
    gap, rise = e["mlm_loss"] - train_mlm, e["mlm_loss"] - best["mlm_loss"]
    seen, passes = exposure(log, e["step"])
    numbers = dict(step=e["step"], heldout_mlm_loss=e["mlm_loss"], train_mlm_loss=train_mlm, gap=gap,
                   best_step=best["step"], rise=rise, passes=passes)
    said = (f"MLM loss {e['mlm_loss']:.2f} held out at step {e['step']:,} and {train_mlm:.2f} on the training "
            f"batches of steps {late[0]['step']:,} to {late[-1]['step']:,}" + (f"; {seen}" if seen else ""))
    if log.step < fair_steps(log):
        return Check(name, EARLY, said, numbers=numbers)
    if rise > 0.1:
        # the held-out batches are fixed: a loss that climbs back 0.1 nats from its lowest is the model
        # getting worse on new text, not noise
        return Check(name, PROBLEM, f"{said}. The held-out MLM loss was lowest at step {best['step']:,} "
                     f"({best['mlm_loss']:.2f}) and has risen by {rise:.2f} since, while training goes on: "
                     f"it memorises its training text", f"use the checkpoint nearest step {best['step']:,} "
                     f"or fewer steps; for a better model, more text, and dropout if it is off", numbers)
    # long healthy runs on these small corpora end with training 0.45-0.55 nats below held-out (dropout,
    # on in training only, hides some of it); twice that is a model far better on what it has seen
    if gap > 1.0:
        return Check(name, WARNING, f"{said}. It fits its training text far better than new text, but the "
                     f"held-out loss is still near its lowest", "watch the held-out loss: when it turns up, "
                     "stop there; for a better model, more text", numbers)
    return Check(name, OK, said, numbers=numbers)


def check_pairs(log: RunLog) -> Check:
    """Is --dupe-factor large enough for the steps: how often did each training pair come back?

    The text is cut into NSP pairs --dupe-factor times, each time differently; every pass over the
    pairs masks them afresh, but a pair is the same pair. BERT's recipe (dupe factor 10, 40 passes
    over the text) saw each about 4 times, ``make demo`` about 10; seen many more times, NSP learns
    which of its segments go together.
    """
    unit = "sequence" if log.arg("no_nsp", False) else "pair"     # --no-nsp: packed sentences, no pairs
    name = f"repeated {unit}s: --dupe-factor against the steps"
    evals = [e for e in log.evals if e["step"] > 0]
    seen, passes = exposure(log, log.step)
    if passes is None:
        return Check(name, UNCHECKED, f"the number of training {unit}s is not known (see the note above)")
    late = log.late(evals[-1]["step"]) if evals else []
    nsp = evals and not log.arg("no_nsp", False)     # --no-nsp: no pairs, only sequences to come back
    train_acc = None if not nsp or _constant_labels(log, nsp_prior(log)[1], {}) else mean(late, "nsp_acc")
    held = evals[-1]["nsp_acc"] if nsp else None
    z = (held - 0.5) * 2 * math.sqrt(max(evals[-1].get("n_pairs", 1), 1)) if nsp else 0.0
    numbers = dict(passes=passes, train_nsp_acc=train_acc, heldout_nsp_acc=held)
    if passes <= 20:
        return Check(name, OK, seen[0].upper() + seen[1:], numbers=numbers)
    dupe = log.arg("dupe_factor", 1)
    advice = (f"--dupe-factor {math.ceil(dupe * passes / 10)} (each {unit} then comes back about 10 times in as "
              f"many steps), or more text")
    # 90% of the training pairs right is beyond any prior a usable corpus has (the NSP check says
    # when a prior is that high), and it is reached by remembering pairs
    if train_acc is not None and train_acc >= 0.9:
        said = (f"{seen[0].upper() + seen[1:]}. NSP is right on {train_acc:.0%} of its training pairs and "
                f"{held:.0%} of new ones: it has learned many of its pairs by heart")
        if z < 2:
            return Check(name, PROBLEM, said + ", and nothing that carries over to new ones", advice, numbers)
        return Check(name, WARNING, said, advice, numbers)
    return Check(name, WARNING, seen[0].upper() + seen[1:] + ": far more than BERT's 4 or make demo's 10",
                 advice, numbers)


def check_data(log: RunLog) -> Check:
    """Is the corpus many copies of few documents, and are the held-out documents really new?"""
    name = "data: repeated documents"
    d = log.data or {}
    if not d.get("documents") or "distinct_documents" not in d:
        return Check(name, UNCHECKED, "the run's data facts are not known (see the note above)")
    docs, distinct = d["documents"], d["distinct_documents"]
    held, seen = d["heldout_documents"], d["heldout_seen_in_training"]
    repeated, seen_share = 1 - distinct / docs, seen / max(held, 1)
    numbers = dict(documents=docs, distinct_documents=distinct, repeated_share=repeated,
                   heldout_documents=held, heldout_seen_in_training=seen)
    said = (f"{docs:,} documents, {distinct:,} of them distinct ({repeated:.0%} are copies); {seen} of the "
            f"{held:,} held-out documents also occur, word for word, among the training documents")
    # a few copies are normal in real text (the built-in corpus repeats 2% of its documents);
    # a corpus of copies gives held-out numbers that measure memory, and few distinct pairs
    if seen_share > 0.2 or repeated > 0.5:
        return Check(name, PROBLEM, said + ": the held-out numbers measure how well the model remembers "
                     "its training text, not how it reads new text",
                     "remove the repeated documents from the corpus (keep one copy of each)", numbers)
    if seen_share > 0.05 or repeated > 0.1:
        return Check(name, WARNING, said, "remove the repeated documents from the corpus", numbers)
    return Check(name, OK, said, numbers=numbers)
