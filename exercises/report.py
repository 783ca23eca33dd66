"""What one checker found: the ``Report`` of FAIL and ok lines, the hints under them, the verdict.

Hints belong to checks: a hint is printed under the FAIL line of the check
that found the problem.  One diagnosis per report: once a FAIL line has had
its hint, a later FAIL line's different hint is left out (a later check sees
the same mistake through other inputs, and a second guess at it would
contradict the first); the student fixes what the first hint names and runs
the check again.  When a check fails in a way that leaves nothing for
the later checks to look at (an exception, a result of the wrong shape), the
checker stops (``Abort``) and says so once, rather than printing failures
that only repeat the first.
"""
from __future__ import annotations

import unicodedata
from pathlib import Path


class Abort(Exception):
    """Stops a checker early; the report already says why."""


class Report:
    """What one checker found: a list of lines and a verdict."""

    def __init__(self, name: str, module=None):
        self.name = name
        self.module = module
        self.lines: list[str] = []
        self.hints: list[str] = []
        self.failures: list[tuple[str, str | None]] = []   # (what failed, its hint), in order
        self.status = "pass"          # "pass", "fail" or "todo"
        # replay: a function giving the hint of the slip whose results the student's reproduce exactly,
        # asked at the first failure; its answer (diagnosis) is then every failure's hint
        self.replay = None
        self.diagnosis: str | None = None
        self.n_ok = 0
        self.output: list[str] = []   # what the student's code printed, shown under the verdict

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    # ------------------------------------------------------------------ recording
    def ok(self, what: str) -> None:
        self.n_ok += 1
        self.lines.append(f"  ok    {one_line(what)}")

    def fail(self, what: str, hint: str | None = None) -> None:
        if self.status != "todo":
            self.status = "fail"
        if self.replay is not None:        # the student's results were those of one known slip?
            self.diagnosis, self.replay = self.replay(), None
        hint = self.diagnosis or hint
        what, hint = one_line(what), hint and one_line(hint)
        self.lines.append(f"  FAIL  {what}")
        if self.hints and hint not in self.hints:
            hint = None                    # one diagnosis: the first hint's
        self.failures.append((what, hint or None))
        if hint:
            self.hint(hint)

    @property
    def first_failure(self) -> tuple[str, str | None] | None:
        """The first FAIL line and its hint: what the student reads first."""
        return self.failures[0] if self.failures else None

    def stopped(self) -> None:
        """Say, once, that the checks after a structural failure were not run."""
        note = ("  ...   the checks after this one were not run: they need the result above "
                "(fix it first)")
        if self.status == "fail" and note not in self.lines:
            self.lines.append(note)

    def hint(self, text: str) -> None:
        if text not in self.hints:
            self.hints.append(text)
            self.lines.append(f"        hint: {text}")

    def todo(self, func: str) -> None:
        self.status = "todo"
        self.lines.append(f"  TODO  {func} is not implemented yet (it raises NotImplementedError)")

    def expect(self, condition: bool, what: str, hint: str | None = None) -> bool:
        if condition:
            self.ok(what)
        else:
            self.fail(what, hint)
        return bool(condition)

    def require(self, condition: bool, what: str, hint: str | None = None) -> None:
        """Like ``expect``, but stop checking when it fails (later checks would only repeat it)."""
        if not self.expect(condition, what, hint):
            raise Abort

    # ------------------------------------------------------------------ output
    def render(self) -> str:
        where = ""
        if self.module is not None and getattr(self.module, "__file__", None):
            where = f"  ({_short(self.module.__file__)})"
        head = {"pass": "PASS", "fail": "FAIL", "todo": "TODO"}[self.status]
        out = [f"[{head}] {self.name}{where}"]
        out += self.lines
        if self.status == "pass":
            out.append(f"  -> passed: all {self.n_ok} checks are right.")
        elif self.status == "todo":
            out.append("  -> not implemented yet: fill in the TODOs, then run the check again.")
        else:
            out.append("  -> failed: read the first FAIL line and its hint, fix it, run again.")
        return "\n".join(out + self.output)


def one_line(text: str) -> str:
    """``text`` on one line: a line break or other control character (from a student's exception
    message, say) written as its escape, so no text can print a line that looks like the report's own."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c == "\t" or unicodedata.category(c) not in ("Cc", "Zl", "Zp") else repr(c)[1:-1]
                   for c in text)


def _short(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
