"""``python -m harness.leaderboard [RESULTS_DIR ...] [--out DIR] [--combine latest|best|mean]``."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError, print_error
from harness.leaderboard import COMBINE_RULES, build

log = logging.getLogger("harness.leaderboard")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m harness.leaderboard",
        description="Merge result records and the paper's published baselines into Markdown/CSV tables "
        "and a static site (open <out>/index.html in a browser; no server needed).",
    )
    p.add_argument("results", nargs="*", default=["results"], help="results directories to read (default: results)")
    p.add_argument("--out", default="leaderboard/site", help="output directory (default: leaderboard/site)")
    p.add_argument("--combine", choices=list(COMBINE_RULES), default="mean",
                   help="how several records of one model/task/dataset become one number (default: mean): "
                   + "; ".join(COMBINE_RULES.values()))
    p.add_argument("--no-published", action="store_true", help="leave out the published baseline rows")
    p.add_argument("--mteb-results", action="append", default=[], metavar="DIR",
                   help="a folder of mteb result files (<org>__<model>/<revision>/<Task>.json, e.g. a checkout of "
                   "embeddings-benchmark/results): its models become published rows in the matching BEIR, code, "
                   "NanoBEIR and mteb columns (repeatable)")
    p.add_argument("--mteb-models", action="append", default=[], metavar="PATTERN",
                   help="only the --mteb-results models whose name matches this pattern, e.g. '*MiniLM*' (repeatable)")
    p.add_argument("--significance", action="store_true",
                   help="paired tests between run rows (per query / per example) for the page's baseline marks")
    p.add_argument("--baseline", metavar="MODEL",
                   help="the run row the page compares every other row with at first (implies --significance)")
    p.add_argument("--permutations", type=int, default=2000,
                   help="randomization permutations and bootstrap resamples per test (default 2000)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level of the marks (default 0.05)")
    p.add_argument("--correction", default="holm", choices=("holm", "bh", "bonferroni", "none"),
                   help="correction of the tie groups' tests across each table's tests (default holm)")
    return p.parse_args(argv)


def check_args(args: argparse.Namespace, significance: dict[str, Any] | None) -> None:
    """Before anything is read: every results folder exists, ``--out`` can be a folder, the test settings."""
    from harness.run.preflight import check_records_dir, check_writable_dir
    for folder in [*args.results, *args.mteb_results]:
        label = "--mteb-results" if folder in args.mteb_results else "results folder"
        check_records_dir(folder, label, "python -m harness.leaderboard results/")
    check_writable_dir(Path(args.out), "--out")
    if significance:
        from harness.compare.many import Settings
        Settings(significance["permutations"], level=significance["level"], alpha=significance["alpha"]).check()


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parse_args(argv)
    t0 = time.perf_counter()
    try:
        sig = ({"permutations": args.permutations, "seed": 0, "level": 0.95, "alpha": args.alpha,
                "correction": args.correction, "baseline": args.baseline}
               if args.significance or args.baseline else None)
        check_args(args, sig)
        lb, files = build(args.results, args.out, combine=args.combine, published=not args.no_published,
                          mteb_results=args.mteb_results, mteb_models=args.mteb_models, significance=sig)
    except HarnessError as exc:
        return print_error(exc)
    m = lb.meta
    log.info("leaderboard: %d record(s) (%d failed), %d skipped file(s), %d row(s), combine=%s, %.2f s",
             m["n_records"], m["n_failed"], len(m["skipped"]), len(lb.rows), m["combine"], time.perf_counter() - t0)
    for f in files:
        log.info("  wrote %s", f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
