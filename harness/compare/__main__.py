"""``python -m harness.compare RUN RUN [RUN ...]``: which differences between runs or models are real?

Each RUN: a record (``.json``), a run folder, or a model name under ``--results`` (what ``harness.select`` picks
for it: a GLUE cell averages its configuration's seeds); ``--all --task T``: every model with records of T (the
leaderboard's run rows). Every pair per cell and per table average: one run each by a paired randomization test
and bootstrap interval, seeds by the two-level bootstrap, corrected across all those tests (Holm, or
``--correction bh``), tie groups in compact letters and a bootstrap interval of each model's rank; two models are
printed as one A/B table (docs/compare.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.core.errors import HarnessError, print_error


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harness.compare", description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="*", metavar="RUN",
                   help="a record (.json), a run folder, or a model name under --results; two or more")
    p.add_argument("--all", action="store_true", dest="every",
                   help="every model with ok records of --task under --results (the leaderboard's run rows)")
    p.add_argument("--task", help="the task, where a model has records of several")
    p.add_argument("--results", default="results", help="results folder for model names (default: results)")
    p.add_argument("--labels", help="comma-separated row labels, one per RUN in order (default: the shortest part "
                   "of each that tells it apart: model name, else run id)")
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
    try:
        print("\n".join(run(args)))
    except (HarnessError, ValueError) as exc:
        return print_error(exc)
    return 0


def run(args: argparse.Namespace) -> list[str]:
    """The comparison's lines: every pair of the models named, one path whatever their number."""
    from harness.compare import report
    from harness.compare.entrants import Records, entrants
    from harness.compare.many import Settings
    settings = Settings(args.permutations, args.seed, args.level, args.alpha, args.correction)
    settings.check()
    labels = [x.strip() for x in args.labels.split(",")] if args.labels else None
    models = entrants(args.runs, Records(Path(args.results)), args.task, args.every, labels)
    return report.lines(report.compare_entrants(models, settings, args.metric), models)


if __name__ == "__main__":
    sys.exit(main())
