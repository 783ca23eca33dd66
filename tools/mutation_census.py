"""The mutants of every exercise, as the checks see them: a table for the exercises' README.

    python tools/mutation_census.py [EXERCISE ...] [--details]

For each exercise: the family's size, the probes (the computations its checks
compare, where a mutant's result can be matched), and its mutants sorted
(``exercises/cases/families.py``): told apart (alone in their group), named
with others that give the same numbers on every probe and on the oracle's
inputs too, crashing on the checks' inputs, unseen (the right value on every
probe); then the gaps (two mutants alike on the probes, not on the oracle) and
the undiagnosed (unseen, yet wrong on the oracle's inputs).  ``--details``
lists the gaps and the undiagnosed.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from exercises.cases import TABLES  # noqa: E402
from exercises.cases.families import family  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("exercises", nargs="*", help="exercises (default: all)")
    parser.add_argument("--details", action="store_true", help="list the gaps and the undiagnosed mutants")
    args = parser.parse_args(argv)
    unknown = [n for n in args.exercises if n not in TABLES]
    if unknown:
        parser.error(f"no exercise {', '.join(unknown)}; the exercises are {', '.join(TABLES)}")
    print("| exercise | mutants | probes | told apart | named together | crash | unseen | gaps | undiagnosed |")
    print("|---|---|---|---|---|---|---|---|---|")
    totals = [0] * 8
    for name in args.exercises or TABLES:
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f = family(name)
        row = [f.size, f.probes, f.told_apart, f.equivalent, len(f.crashes), len(f.unseen), len(f.gaps),
               len(f.undiagnosed)]
        totals = [a + b for a, b in zip(totals, row)]
        print(f"| {name} | " + " | ".join(map(str, row)) + " |", flush=True)
        if args.details:
            for a, b in f.gaps:
                print(f"    gap: {a.hint}\n      vs {b.hint}")
            for c in f.undiagnosed:
                print(f"    undiagnosed: {c.hint}")
        print(f"    ({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    print("| all | " + " | ".join(map(str, totals)) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
