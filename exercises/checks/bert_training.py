"""Stage (b) of the capstone: the student's training loop against minibert's own, on the built-in corpus.

From minibert's initialisation, without dropout so that every step can be
compared: a short run (warm-up, peak and decay in 12 steps) whose losses and
final parameters must be minibert's loop's (``minibert.optim.AdamW``,
``linear_warmup_decay``, ``clip_grad_norm``), then the full run, whose loss
curve must follow minibert's to ``CURVE_TOL`` and whose held-out MLM loss must
be below the unigram baseline (guessing by word frequency).
"""
from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .bert_model import TOL, minibert_model, model_params, student_config
from ..report import Abort
from .bert_outcome import Outcome, _bound, _call, _line, _rel

CURVE_TOL = 1e-6           # the full run's losses, step by step, against minibert's run
SHORT_STEPS, SHORT_WARMUP = 12, 3
STEPS, WARMUP, PEAK_LR = 400, 40, 3e-3
# stage (b)'s: small enough for 400 steps in float64 in seconds on a laptop CPU
TRAINING = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256,
                max_position_embeddings=32)
DATA = dict(corpus="builtin", vocab_size=1000, seq_len=32, batch_size=16, seed=0, eval_instances=256)


@dataclass
class TrainingData:
    config: object           # minibert's BertConfig of the run, dropout 0
    params: dict             # minibert's initialisation with the run's seed
    batches: list
    eval_batches: list
    baseline: float          # the unigram baseline of the held-out MLM loss


_DATA: dict = {}


def training_data() -> TrainingData:
    """The built-in corpus's batches for ``STEPS`` steps and its held-out batches (made once per process)."""
    if "data" not in _DATA:
        import minibert as mb
        from minibert.train import TrainArgs, prepare_data, token_counts, unigram_baseline
        with tempfile.TemporaryDirectory(prefix="minibert-capstone-") as tmp:
            args = TrainArgs(out=tmp, steps=STEPS, progress=False, plot=False, **DATA)
            _, tokenizer, stream, eval_batches = prepare_data(args, Path(tmp), log=lambda message: None)
        batches = [stream.next_batch() for _ in range(STEPS)]
        config = mb.BertConfig(vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_id,
                               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **TRAINING)
        baseline = unigram_baseline(token_counts(stream.dataset, tokenizer), eval_batches)
        _DATA["data"] = TrainingData(config, model_params(minibert_model(config)), batches, eval_batches, baseline)
    return _DATA["data"]


# usual mistakes of a training loop, each run as minibert's loop would run it with that mistake, so
# that a run that follows one of them step by step is named: (what differs, the hint)
LOOP_MISTAKES = {
    "decay_all": "every parameter is decayed: BERT decays the weights only, never a bias or a LayerNorm's "
                 "scale and shift (decay=False for them)",
    "decay_none": "no parameter is decayed: BERT decays every weight matrix and embedding table "
                  "(decay=True for them, weight_decay as given)",
    "schedule_from_1": "the learning rate is the next step's: the schedule counts steps from 0 "
                       "(learning_rate(step, ...) with step = 0 on the first batch)",
    "no_clipping": "the gradients are not clipped: clip them together by their global norm (max_grad_norm) "
                   "before the AdamW step",
}


def reference_run(data: TrainingData, steps: int, warmup: int, mistake: str | None = None):
    """minibert's own run: ``BertForPreTraining``, ``AdamW``, ``linear_warmup_decay`` and ``clip_grad_norm``
    on the same batches from the same parameters: (losses, final parameters).  ``mistake``: one of
    ``LOOP_MISTAKES``, made on purpose.  The full run (20 s) is kept in minibert's cache folder, keyed by
    minibert's code, the checkers' and NumPy's version."""
    key = (steps, warmup, mistake)
    if key not in _DATA and steps == STEPS and mistake is None:
        _DATA[key] = _cached(f"run-{steps}-{warmup}", lambda: _reference_run(data, steps, warmup, None))
    if key not in _DATA:
        _DATA[key] = _reference_run(data, steps, warmup, mistake)
    return _DATA[key]


def _cached(name: str, compute):
    """``compute()``'s (losses, params), read from the cache folder when there, else computed and written;
    keyed by the code of minibert and of the checkers (``code_digest``)."""
    import minibert
    from minibert.paths import code_digest, default_cache_dir
    digest = code_digest(Path(minibert.__file__).parent, Path(__file__).parent)
    path = default_cache_dir() / "exercises" / f"capstone-{name}-{digest[:20]}.npz"
    try:
        with np.load(path) as saved:
            return [float(x) for x in saved["__losses__"]], {k: saved[k] for k in saved.files if k != "__losses__"}
    except (OSError, KeyError, ValueError):
        pass
    losses, params = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".capstone-", suffix=".npz", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            np.savez(f, __losses__=np.array(losses), **params)
        os.replace(tmp, path)           # whole or not at all: another process may read it meanwhile
    except OSError:
        pass                            # no cache folder: computed again next time
    return losses, params


def _reference_run(data: TrainingData, steps: int, warmup: int, mistake: str | None):
    from minibert.optim import AdamW, clip_grad_norm, linear_warmup_decay
    model = minibert_model(data.config, data.params)
    opt = AdamW(model.params, lr=PEAK_LR, weight_decay=0.0 if mistake == "decay_none" else 0.01)
    if mistake == "decay_all":
        model.params.decay_size = model.params.data.size
    losses = []
    for step, batch in enumerate(data.batches[:steps]):
        out = model.forward(**batch, train=True)
        model.backward()
        if mistake != "no_clipping":
            clip_grad_norm(model.params, 1.0)
        opt.step(PEAK_LR * linear_warmup_decay(step + (mistake == "schedule_from_1"), steps, warmup))
        losses.append(float(out.loss))
    return losses, model_params(model)


def _loop_mistake(data: TrainingData, losses) -> str | None:
    """The hint of the loop mistake whose run gives ``losses``, or None."""
    for mistake, hint in LOOP_MISTAKES.items():
        theirs, _ = reference_run(data, SHORT_STEPS, SHORT_WARMUP, mistake)
        if np.max(np.abs(losses - theirs) / np.abs(theirs)) < TOL:
            return hint
    return None


def last_run():
    """The losses and parameters of the last full run a check in this process made of the student's ``train``."""
    if "student" not in _DATA:
        raise RuntimeError("no run yet: check('bert', ..., train=train) makes it")
    return _DATA["student"]


def heldout_mlm(data: TrainingData, params: dict) -> float:
    model = minibert_model(data.config, params)
    return float(np.mean([float(model.forward(**b, train=False).mlm_loss) for b in data.eval_batches]))


def _run(out: Outcome, fns, data: TrainingData, steps: int, warmup: int):
    result = _call(out, "train", fns["train"], dict(data.params), data.batches[:steps],
                   student_config(data.config), peak_lr=PEAK_LR, warmup_steps=warmup, weight_decay=0.01,
                   max_grad_norm=1.0, seed=0)
    out.require(isinstance(result, tuple) and len(result) == 2,
                f"train should return (params, losses), got {type(result).__name__}",
                "return the trained parameters (a dict by name) and the list of each step's loss")
    params, losses = result
    try:
        losses = np.asarray(losses, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        out.require(False, "train's losses should be numbers, one per step")
    out.require(losses.shape == (steps,), f"train returned {losses.size} losses for {steps} steps",
                "one loss per batch: the loss of the forward pass of that step, before its update")
    out.require(isinstance(params, dict) and set(params) == set(data.params),
                "train's params should be a dict with the parameters' names",
                "return the updated parameters by the same names as the ones given")
    return params, losses


def _short_stage(out: Outcome, fns, data: TrainingData) -> None:
    want_losses, want_params = reference_run(data, SHORT_STEPS, SHORT_WARMUP)
    params, losses = _run(out, fns, data, SHORT_STEPS, SHORT_WARMUP)
    err = np.abs(losses - want_losses) / np.abs(want_losses)
    off = ~(err < TOL)                        # a NaN is off too
    first = int(np.argmax(off)) if off.any() else None
    # a floor: key.bias's gradient is 0 in exact arithmetic, Adam moves it by rounding noise only (1e-17)
    try:
        errors = {k: _rel(np.asarray(params[k], dtype=np.float64), want_params[k], 1e-6) for k in want_params}
    except (TypeError, ValueError):
        out.require(False, "train's parameters should be float64 arrays of the parameters' shapes")
    wrong = [k for k in want_params if errors[k] >= TOL]
    out.measure(first is None, _line(f"{SHORT_STEPS} steps (warm-up {SHORT_WARMUP}): each loss vs minibert's run",
                                     f"max rel. error {err.max():.1e}"
                                     + (f" (first at step {first})" if first is not None else "")),
                (_loop_mistake(data, losses) or _explain_params(wrong) or _explain_steps(first))
                if first is not None else None)
    out.measure(not wrong, _line(f"the parameters after {SHORT_STEPS} steps vs minibert's run",
                                 f"max_rel_error {max(errors.values()):.1e}"),
                _explain_params(wrong))


def _explain_steps(first) -> str | None:
    if first is None:
        return None
    if first == 0:
        return "the first step's loss is already different: train must start from the given parameters"
    return ("each step: forward with the step's batch, backward, clip the gradients by their global norm "
            "(max_grad_norm), the learning rate of this step (0-based, warm-up then linear decay over "
            "len(batches) steps), then AdamW on every parameter (t counts from 1)")


def _explain_params(wrong) -> str | None:
    if not wrong:
        return None
    norms = [k for k in wrong if "LayerNorm" in k or k.endswith(".bias")]
    if norms and len(norms) == len(wrong):
        return ("only biases and LayerNorm parameters differ: BERT decays the weights only, never a bias or "
                "a LayerNorm's scale and shift (decay=False for them)")
    if not norms:
        return "only the weights differ: BERT decays every weight matrix and embedding table (decay=True)"
    return None


def _full_stage(out: Outcome, fns, data: TrainingData) -> None:
    want_losses, _ = reference_run(data, STEPS, WARMUP)
    start = time.perf_counter()
    params, losses = _run(out, fns, data, STEPS, WARMUP)
    seconds = time.perf_counter() - start
    _DATA["student"] = losses, params         # for the notebook's plot (``last_run``), in this process
    err = float(np.max(np.abs(losses - want_losses) / np.abs(want_losses)))
    out.measure(err < CURVE_TOL, _line(f"{STEPS} steps: the loss curve vs minibert's run",
                                       f"max rel. error {err:.1e} ({_bound(err, CURVE_TOL)}; loss {losses[0]:.3f} -> "
                                       f"{losses[-10:].mean():.3f}, {seconds:.0f} s)"))
    held = heldout_mlm(data, {k: np.asarray(v, dtype=np.float64) for k, v in params.items()})
    out.measure(held < data.baseline, f"held-out MLM loss {held:.3f} < unigram baseline {data.baseline:.3f}",
                "the model has not learned from the context: a guess by word frequency does as well")


def training_stage(fns, full: bool = True) -> Outcome:
    out = Outcome()
    try:
        data = training_data()
        _short_stage(out, fns, data)
        if full:
            _full_stage(out, fns, data)
    except Abort:
        pass
    return out
