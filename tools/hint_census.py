"""How often does the checker's first hint name the mistake?

Runs ``python -m exercises check NAME --path FILE`` on every wrong answer in
tests/data/wrong_answers/NAME/SLUG.py, takes the first FAIL line and the hint
under it, and decides whether that hint names the mistake by the file's rule:

    # slip: <what is wrong>
    # names it: keepdims | axis & last

Alternatives are separated by ``|``; an alternative of several phrases joined
by ``&`` needs all of them.  A hint names the mistake when it contains
(case-insensitively) every phrase of at least one alternative.  Only the hint
text counts, not the FAIL line.

    python tools/hint_census.py                      # all wrong answers
    python tools/hint_census.py dropout adamw        # some exercises
    python tools/hint_census.py --json results.json  # also write the raw results
    python tools/hint_census.py --root tests/data/wrong_answers_holdout   # another set of answers

The exit status is 1 when the checker passes a wrong answer, else 0.
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "tests" / "data" / "wrong_answers"


def read_answer(path):
    """The exercise, slug, slip and names-it rule of one wrong answer file."""
    path = Path(path)
    fields = {}
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        key, _, value = line[1:].partition(":")
        fields[key.strip()] = value.strip()
    rule = [[phrase.strip().lower() for phrase in alternative.split("&") if phrase.strip()]
            for alternative in fields.get("names it", "").split("|")]
    return {"exercise": path.parent.name, "slug": path.stem, "path": path,
            "slip": fields.get("slip", ""), "names_it": [alt for alt in rule if alt]}


def answer_files(exercises=(), root=ANSWERS):
    paths = sorted(Path(root).glob("*/*.py"))
    return [p for p in paths if not exercises or p.parent.name in exercises]


def names_the_mistake(hint, rule):
    hint = hint.lower()
    return any(all(phrase in hint for phrase in alternative) for alternative in rule)


def first_failure(output):
    """(verdict, first FAIL line, the hint under it) from the checker's output."""
    lines = output.splitlines()
    verdict = lines[0].split("]")[0].lstrip("[") if lines and lines[0].startswith("[") else "?"
    for i, line in enumerate(lines):
        if line.startswith("  FAIL"):
            under = []
            for nxt in lines[i + 1:]:
                if not nxt.startswith("   "):          # back to a check line ("  ok", "  FAIL", "  ->")
                    break
                under.append(nxt.strip())
            text = " ".join(under)
            hint = text[text.index("hint:") + len("hint:"):].strip() if "hint:" in text else ""
            return verdict, " ".join(line.split()[1:]), hint
    return verdict, "", ""


def run_checker(exercise, path, timeout=60):
    """The checker's output on one file, through the command line."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    proc = subprocess.run([sys.executable, "-m", "exercises", "check", exercise, "--path", str(path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    return proc.stdout + proc.stderr


def census_one(path):
    answer = read_answer(path)
    verdict, fail_line, hint = first_failure(run_checker(answer["exercise"], answer["path"]))
    return {"exercise": answer["exercise"], "slug": answer["slug"], "slip": answer["slip"],
            "names_it": [" & ".join(alt) for alt in answer["names_it"]],
            "verdict": verdict, "first_fail": fail_line, "first_hint": hint,
            "named": bool(hint) and names_the_mistake(hint, answer["names_it"])}


def shorten(text, width):
    text = text.replace("|", "\\|")
    return text if len(text) <= width else text[:width - 3] + "..."


def table(results):
    rows = ["| exercise | wrong answer | first FAIL line | first hint | named |",
            "|---|---|---|---|---|"]
    for r in results:
        fail = r["first_fail"] or f"(none: {r['verdict']})"
        rows.append(f"| {r['exercise']} | `{r['slug']}` | {shorten(fail, 60)} | "
                    f"{shorten(r['first_hint'], 90) or '(no hint)'} | {'yes' if r['named'] else 'no'} |")
    return "\n".join(rows)


def summary(results):
    named = sum(r["named"] for r in results)
    hinted = sum(bool(r["first_hint"]) for r in results)
    exercises = len({r["exercise"] for r in results})
    lines = [f"first hint names the mistake: {named} of {len(results)} "
             f"({len(results)} wrong answers over {exercises} exercises; "
             f"{hinted} first FAIL lines have a hint)"]
    passed = [r for r in results if r["verdict"] != "FAIL"]
    for r in passed:
        lines.append(f"!! NOT REJECTED: {r['exercise']}/{r['slug']} got [{r['verdict']}] ({r['slip']})")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("exercises", nargs="*", help="only these exercises (default: all)")
    parser.add_argument("--json", metavar="PATH", help="write the raw results to PATH")
    parser.add_argument("--root", metavar="DIR", default=ANSWERS,
                        help="the folder of NAME/SLUG.py answers (default: tests/data/wrong_answers)")
    args = parser.parse_args(argv)
    results = [census_one(path) for path in answer_files(args.exercises, args.root)]
    print(table(results))
    print()
    print(summary(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 1 if any(r["verdict"] != "FAIL" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
