"""``minibert doctor RUN``: is this run healthy?

It reads a run folder (``run.json``: the settings and the data facts; ``metrics.jsonl``: every
logged step and held-out evaluation) and answers, check by check, with a verdict, the evidence
(numbers from the run) and what to try:

* MLM against its baselines: below the unigram loss (the model uses the context), not near ln V;
* NSP against its class prior (the 50% trap) and against chance on the held-out pairs;
* memorising: training far better than held-out, or held-out getting worse;
* repeated pairs: how often the run saw each NSP pair (a --dupe-factor too small for the steps);
* the data: a corpus of copies, held-out documents that are also training documents;
* stability: loss jumps, divergence, large gradient norms;
* the learning rate and the warmup against the reference for the preset;
* mixed precision: the loss scale and the steps skipped for overflow;
* throughput: waiting for batches, and the speed against a bare step timed on this machine;
* the reference runs of the same recipe, drawn as a band under the run in ``doctor.png``.

The checks live in ``doctor_checks`` (what was learned), ``doctor_health`` (how it trained)
and ``doctor_references``; this module runs them and says the result.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from .doctor_checks import check_data, check_memorising, check_mlm, check_nsp, check_pairs
from .doctor_health import check_loss_scale, check_schedule, check_stability, check_throughput, measure_bare_step
from .doctor_references import check_reference, draw, find_references
from .run_folder import DOCTOR_PLOT_NAME
from .run_log import EARLY, OK, PROBLEM, UNCHECKED, VERDICTS, WARNING, Check, NotARun, RunLog, read_run

__all__ = ["Check", "Diagnosis", "NotARun", "add_command", "after_pretrain", "command", "diagnose",
           "summary_after_run"]


@dataclass
class Diagnosis:
    log: RunLog
    checks: list
    plot: Path | None = None
    plot_error: str | None = None

    @property
    def status(self) -> int:
        """The command's exit status: 1 when a check found a problem, else 0."""
        return int(any(c.verdict == PROBLEM for c in self.checks))

    def summary(self) -> str:
        """One line: the problems and warnings named, the other verdicts counted."""
        def count(v):
            return sum(c.verdict == v for c in self.checks)

        def names(v):
            return ", ".join(c.name.split(":")[0] for c in self.checks if c.verdict == v)
        named = [f"{count(v)} {_plural(v, count(v))} ({names(v)})" for v in (PROBLEM, WARNING) if count(v)]
        counted = ", ".join(f"{count(v)} {_plural(v, count(v))}" for v in (OK, EARLY, UNCHECKED) if count(v))
        return f"doctor: {'; '.join(named) if named else 'no problem found'}" + (f"; {counted}" if counted else "")

    def report(self) -> str:
        """The whole answer, in plain text."""
        log = self.log
        lines = [f"minibert doctor: {log.path} ({log.arg('config')} on {log.arg('corpus')}, "
                 f"step {log.step:,} of {log.arg('steps', 0):,})"]
        lines += [f"note: {note}" for note in log.notes]
        for c in self.checks:
            lines += ["", f"[{c.verdict}] {c.name}", f"    {c.evidence}"]
            if c.advice and c.verdict != OK:
                lines.append(f"    try: {c.advice}")
        lines.append("")
        if self.plot is not None:
            lines.append(f"curves over the reference band: {self.plot}")
        if self.plot_error:
            lines.append(f"no {DOCTOR_PLOT_NAME}: {self.plot_error}")
        lines.append(self.summary())
        return "\n".join(lines)

    def to_json(self) -> dict:
        return dict(run=str(self.log.path), step=self.log.step, status=self.status, summary=self.summary(),
                    notes=self.log.notes, checks=[asdict(c) for c in self.checks],
                    plot=str(self.plot) if self.plot else None)


def _plural(verdict: str, n: int) -> str:
    return verdict if n == 1 or verdict in (EARLY, UNCHECKED) else {OK: "ok", WARNING: "warnings",
                                                                      PROBLEM: "problems"}[verdict]


def run_checks(log: RunLog, references, bare) -> list:
    """Every check, in the order a reader wants them: what was learned, then how it trained."""
    mlm, stability = check_mlm(log), check_stability(log)
    checks = [mlm, check_nsp(log), check_memorising(log), check_pairs(log), check_data(log), stability,
              check_schedule(log, references, mlm, stability)]
    if log.arg("mixed_precision", False):
        checks.append(check_loss_scale(log))
    checks += [check_throughput(log, bare), check_reference(log, references)]
    assert all(c.verdict in VERDICTS for c in checks)
    return checks


def diagnose(path, plot: bool = True, measure: bool = True, recompute: bool = True) -> Diagnosis:
    """The checks of the run in folder ``path`` (``NotARun`` if it is not one).

    plot: draw ``doctor.png`` in the folder; measure: time a bare step of the run's model here
    (a few seconds); recompute: compute the data facts of an older run from its corpus.
    """
    log = read_run(path, recompute=recompute)
    references = find_references(log)
    bare = measure_bare_step(log) if measure and len(log.train) > 1 else "not asked for"
    result = Diagnosis(log, run_checks(log, references, bare))
    if plot:
        try:
            result.plot = draw(log, references, log.path / DOCTOR_PLOT_NAME)
        except OSError as exc:        # a read-only folder, a full disk: the diagnosis stands without it
            result.plot_error = f"could not write it ({exc.strerror or exc})"
    return result


def summary_after_run(out) -> str:
    """The one line ``minibert pretrain`` prints at its end; never raises, never takes long."""
    try:
        return diagnose(out, plot=False, measure=False, recompute=False).summary() + \
            f"; `minibert doctor {out}` for the evidence"
    except (Exception, KeyboardInterrupt) as exc:
        return f"doctor: could not diagnose the run ({type(exc).__name__}: {exc})"


HELP = """\
Read a run folder (run.json, metrics.jsonl) and say, check by check, whether the run is
healthy: a verdict (ok, warning, problem, not enough data yet, not checked), the evidence
(numbers from the run) and what to try. MLM against its baselines, NSP against its class
prior, memorising, repeated documents, loss spikes and divergence, the learning rate and
warmup, the loss scale of mixed precision, throughput against a bare training step timed
here, and the reference runs of the same recipe, drawn under the run in doctor.png.

Exit status: 0 no problem found (warnings allowed), 1 a problem found, 2 not a run folder.

example:
  minibert doctor runs/demo
"""


def add_command(sub) -> None:
    """``minibert doctor``'s arguments, on the command line's sub-parsers."""
    import argparse
    p = sub.add_parser("doctor", help="is this run healthy? its curves checked, with what to try",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="a run folder: the --out of `minibert pretrain` (it holds run.json)")
    p.add_argument("--no-plot", dest="plot", action="store_false", help=f"do not draw {DOCTOR_PLOT_NAME}")
    p.add_argument("--json", action="store_true", help="print the checks as JSON")


def command(ns) -> int:
    """``minibert doctor RUN``: print the report (or its JSON); 0 when healthy, 1 when a problem was found."""
    result = diagnose(ns.run, plot=ns.plot)
    print(json.dumps(result.to_json(), indent=2) if ns.json else result.report())
    return result.status


def after_pretrain(result, status: int) -> int:
    """``minibert pretrain``'s last line: the summary, from rank 0, unless its stdout went away; ``status`` back."""
    from .dist import current
    if current().is_root and not (result.stopped_by or "").startswith("stdout "):
        print(summary_after_run(result.out), flush=True)
    return status
