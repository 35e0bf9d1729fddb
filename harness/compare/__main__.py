"""``python -m harness.compare RUN RUN [RUN ...]``: which differences between runs or models are real?

Each RUN: a record (``.json``), a run folder, or a model name under ``--results`` (what ``harness.select`` picks
for it: a GLUE cell averages its configuration's seeds); ``--all --task T``: every model with records of T (the
leaderboard's run rows). Two single runs: per dataset both share, B - A with a paired randomization test and
bootstrap interval, corrected across datasets, then the macro average. Three or more (or seed-averaged cells):
every pair per cell and per table average, corrected across all those tests (Holm, or ``--correction bh``), tie
groups in compact letters and a bootstrap interval of each model's rank (docs/compare.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.errors import HarnessError, one_line


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harness.compare", description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="*", metavar="RUN",
                   help="a record (.json), a run folder, or a model name under --results; two or more")
    p.add_argument("--all", action="store_true", dest="every",
                   help="every model with ok records of --task under --results (the leaderboard's run rows)")
    p.add_argument("--task", help="the task, where a model has records of several")
    p.add_argument("--results", default="results", help="results folder for model names (default: results)")
    p.add_argument("--metric", help="the metric compared (default: the records' main score)")
    p.add_argument("--permutations", type=int, default=10_000,
                   help="randomization permutations and bootstrap resamples (default 10000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the permutations and resamples (default 0)")
    p.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals (default 0.95)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level marked with * (default 0.05)")
    p.add_argument("--correction", default="holm", choices=("holm", "bh", "bonferroni", "none"),
                   help="correction across the tests printed (default holm: the family-wise error; bh: "
                   "Benjamini-Hochberg's false discovery rate)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from harness.compare.settings import check_alpha, check_level, check_permutations

    try:
        check_permutations(args.permutations)
        check_level(args.level)
        check_alpha(args.alpha)
        print("\n".join(run(args)))
    except (HarnessError, ValueError) as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    return 0


def run(args: argparse.Namespace) -> list[str]:
    """Two single runs: the two-run table; otherwise (three or more, --all, seed-averaged models) every pair."""
    from harness.compare import manyreport
    from harness.compare.entrants import Records, entrants
    from harness.compare.many import Settings
    from harness.compare.records import SeveralRuns
    from harness.compare.report import compare_lines

    if len(args.runs) == 2 and not args.every:
        try:
            return compare_lines(*args.runs, task=args.task, results=Path(args.results), metric=args.metric,
                                 permutations=args.permutations, seed=args.seed, level=args.level, alpha=args.alpha,
                                 correction=args.correction)
        except SeveralRuns:
            pass     # a model whose cells average seeds: the many-model comparison tests them
    if len(args.runs) < 2 and not args.every:
        raise HarnessError(f"{len(args.runs)} run(s) given: pass two or more runs or model names, or --all --task "
                           "<task> for every model of a task")
    models = entrants(args.runs, Records(Path(args.results)), args.task, args.every)
    settings = Settings(args.permutations, args.seed, args.level, args.alpha, args.correction)
    return manyreport.lines(manyreport.compare_entrants(models, settings, args.metric), models)


if __name__ == "__main__":
    sys.exit(main())
