"""``python -m harness.select --task <family> --results results``: selection from records, printed and written."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from harness import specs
from harness.core import layout, results
from harness.core.errors import HarnessError, print_error
from harness.run.preflight import check_writable_dir
from harness.selection import jsonable, load_selections, prune_checkpoints, spec_of
from harness.selection.comparable import comparable_records, set_aside_lines
from harness.selection.rules import rule_for


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.select",
                                     description="Pick, per model, the records a task family's rule selects.")
    parser.add_argument("--task", default=None, help=f"task ({', '.join(specs.all_specs())}; default glue, or with "
                        "--series the task the series was run on)")
    parser.add_argument("--results", default="results", help="results directory (the record tree)")
    parser.add_argument("--out", default=None, help="output directory (default: selected/ beside --results)")
    parser.add_argument("--model", default=None, help="only this model name")
    parser.add_argument("--experiment", default=None,
                        help="only the records of this experiment (the `experiment` config key of the runs); "
                             "written to selected/<experiment>/ unless --out")
    parser.add_argument("--prune-checkpoints", action="store_true",
                        help="delete kept checkpoints of runs that were not selected")
    parser.add_argument("--series", default=None, metavar="NAME",
                        help="the best step of this series (python -m harness.series) on --task: written to "
                             "selected/series-NAME.json")
    parser.add_argument("--datasets", default=None, help="with --series: the datasets the step is chosen on, "
                        "comma-separated (default: the task's selection sets, else every dataset of the series)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    out_dir = Path(args.out) if args.out else layout.selection_dir(args.results, args.experiment)
    if args.series is not None:
        return select_series(args, out_dir)
    args.task = args.task or "glue"
    try:
        if Path(args.results).is_dir():   # a missing one is named by load_selections (an unknown task first)
            check_out(out_dir, given=args.out is not None)
        choices, recs = load_selections(args.task, args.results, args.model, args.experiment)
        mine = [r for r in recs if r.task == args.task
                and (args.model is None or (r.model or {}).get("name") == args.model)]
        aside = set_aside_lines(mine)
        if not choices:
            raise nothing_to_select(args, mine, aside)
        rule = rule_for(spec_of(args.task, mine).selection)
        for name, choice in choices.items():
            path = layout.selection_path(out_dir, args.task, name)
            results.atomic_write_json(path, jsonable(choice.summary))
            print(rule.format(choice))
            print(f"  -> {path}")
            if args.prune_checkpoints:
                for d in prune_checkpoints(choice, recs):
                    print(f"  pruned {d}")
        for line in aside:   # records in another score than their column's: never selected beside it
            print(f"set aside: {line}")
    except HarnessError as exc:
        return print_error(exc)
    return 0


def check_out(out_dir: Path, given: bool) -> None:
    """The selection folder can be written (nothing is created), before any record is read."""
    try:
        check_writable_dir(out_dir, "--out")
    except HarnessError as exc:
        raise HarnessError(str(exc) if given else str(exc).replace(
            ". Choose", " (the default --out: selected/ beside --results). Choose", 1)) from None


def nothing_to_select(args: argparse.Namespace, mine: list[results.ResultRecord], aside: list[str]) -> HarnessError:
    """Why no model has a selection: no record, ``mine``, records set aside, or only failed ones."""
    where = (f"under {args.results}" + (f" for model {args.model}" if args.model else "")
             + (f" in experiment {args.experiment!r}" if args.experiment else ""))
    if aside:
        return HarnessError(f"no {args.task} record {where} can be selected: {aside[0]}"
                            + (f" (and {len(aside) - 1} more such group(s))" if len(aside) > 1 else ""))
    failed = [r for r in mine if r.status == results.STATUS_FAILED]
    if not failed:
        return HarnessError(f"no {args.task} records {where}: run the task first (python -m harness task="
                            f"{args.task} ...) or pass --results <the folder its records are in>")
    first = failed[0]
    return HarnessError(f"no {args.task} record {where} can be selected: {len(failed)} exist and failed, the first "
                        f"{results.path_of(args.results, first)} with: {first.error}; fix that and run the task again "
                        "(failed cells are computed again), then select")


def select_series(args: argparse.Namespace, out_dir: Path) -> int:
    """``--series NAME``: the series' best step on ``--task``, printed and written to ``selected/series-NAME.json``."""
    from harness.selection.series import choose_step, format_choice, names
    try:
        if not Path(args.results).is_dir():
            raise HarnessError(f"results directory {args.results} does not exist; run the series first or pass "
                               "--results")
        check_out(out_dir, given=args.out is not None)
        recs = [r for _, r in comparable_records(args.results, warn=False)   # in the score its column compares
                if args.experiment is None or r.experiment == args.experiment]
        tasks = names(recs).get(args.series)
        if not tasks:
            known = sorted(names(recs))
            raise HarnessError(f"no series {args.series!r} under {args.results} (series there: "
                               f"{', '.join(known) or 'none'}): pass --series <one of them>, or run it first with "
                               "python -m harness.series")
        if args.task is None and len(tasks) > 1:
            raise HarnessError(f"series {args.series!r} has records of {', '.join(sorted(tasks))}: pass --task <the "
                               "validation task to choose the step on>")
        task = args.task or next(iter(tasks))
        choice = choose_step(recs, args.series, task, [d for d in (args.datasets or "").split(",") if d])
        path = layout.selection_path(out_dir, "series", args.series)
        results.atomic_write_json(path, choice)
        print(format_choice(choice))
        print(f"  -> {path}")
    except HarnessError as exc:
        return print_error(exc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
