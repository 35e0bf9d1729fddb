"""``python -m harness.compare A B``: is B's difference from A real? Paired tests on the queries both scored.

A and B: a record (``.json``), a run folder, or a model name under ``--results``. Per dataset both share: the two
scores, B - A, a paired randomization test p-value, a paired bootstrap interval, the p-values corrected across
datasets (Holm by default); then the macro average over those datasets (the same tests, stratified by dataset),
and a paired test over the per-dataset scores themselves, with its caveat.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.errors import HarnessError, one_line


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harness.compare", description=__doc__.split("\n")[0])
    p.add_argument("a", help="baseline: a record (.json), a run folder, or a model name under --results")
    p.add_argument("b", help="compared system: same forms as A")
    p.add_argument("--task", help="the task, where a model has records of several")
    p.add_argument("--results", default="results", help="results folder for model names (default: results)")
    p.add_argument("--metric", help="the metric compared (default: the records' main score)")
    p.add_argument("--permutations", type=int, default=10_000,
                   help="randomization permutations and bootstrap resamples (default 10000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the permutations and resamples (default 0)")
    p.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals (default 0.95)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level marked with * (default 0.05)")
    p.add_argument("--correction", default="holm", choices=("holm", "bonferroni", "none"),
                   help="correction of the per-dataset p-values across datasets (default holm)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from harness.compare.report import compare_lines
    from harness.compare.settings import check_alpha, check_level, check_permutations

    try:
        check_permutations(args.permutations)
        check_level(args.level)
        check_alpha(args.alpha)
        print("\n".join(compare_lines(args.a, args.b, task=args.task, results=Path(args.results),
                                      metric=args.metric, permutations=args.permutations, seed=args.seed,
                                      level=args.level, alpha=args.alpha, correction=args.correction)))
    except (HarnessError, ValueError) as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
