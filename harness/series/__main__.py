"""``python -m harness.series model=<model> model.path=<training run folder> task=<task> [--watch] [--launcher slurm]``:
every checkpoint of a training run as its own run, resumable; ``--best NAME`` prints the overrides of the series'
selected step, for the next step: ``python -m harness task=mldr $(python -m harness.series --best NAME)``."""

from __future__ import annotations

import logging
import shlex
import sys
import time
from collections.abc import Callable, Sequence

from harness.core.errors import HarnessError, print_error
from harness.series import units
from harness.series.discover import BROKEN
from harness.series.settings import Settings


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        return best(argv) if "--best" in argv else run(argv)
    except HarnessError as exc:
        return print_error(exc)


def best(argv: list[str]) -> int:
    from harness.paper.progress import config_of
    from harness.selection.series import best_overrides
    i = argv.index("--best")
    if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
        raise HarnessError("--best needs the series' name: python -m harness.series --best <name>")
    rest = argv[:i] + argv[i + 2:]
    bad = [a for a in rest if not a.startswith("paths.results=")]
    if bad:
        raise HarnessError(f"--best takes the series' name and paths.results=<folder> only, not {bad[0]!r}")
    results = str(config_of(rest).paths.results)
    print(" ".join(best_overrides(results, argv[i + 1])))
    return 0


def check(settings: Settings) -> dict:
    """Everything checked before a checkpoint is read: overrides, output folders, tasks' settings, cluster profile."""
    from harness.paper.__main__ import cluster_profile
    from harness.paper.progress import config_of
    from harness.run import runner
    from harness.run.overrides import check_overrides
    for task in settings.tasks:
        argv = settings.task_overrides(task)
        check_overrides(argv)
    cluster = cluster_profile(settings.cluster)
    for task in settings.tasks:   # the runner's own checks that need no model: a typo fails once, not per checkpoint
        runner.checked(config_of(settings.task_overrides(task)))
    return cluster


def run(argv: list[str]) -> int:
    from harness.series import settings as parse
    from harness.series.launch import Submitter, run_all, status_lines
    from harness.series.show import cost_text, series_lines, series_tables
    settings = parse.from_args(argv)
    cluster = check(settings)
    if settings.log_dir is not None and not settings.dry_run:
        print(f"[series {settings.name}] hydra.run.dir: each checkpoint run's log goes to {settings.log_dir}/"
              "<run key>/", flush=True)
    series = units.series_of(settings)
    if not series.units and not settings.watch:
        raise nothing_found(settings, series)
    check_plannable(series)
    if settings.status:
        print("\n".join(status_lines(series, cluster)), flush=True)
        return 0
    print("\n".join(series_lines(series, cost_text(series, cluster))), flush=True)
    if settings.dry_run:
        return 0
    act = Submitter(cluster) if settings.launcher == "slurm" else run_all   # SLURM array tasks, or here in turn
    if settings.watch:
        try:
            failures, series = watch(settings, act, series)
        except KeyboardInterrupt:
            print(f"[series {settings.name}] interrupted: what finished is recorded; run the command again to go "
                  "on", file=sys.stderr, flush=True)
            return 130
    else:
        failures, _ = act(series)
    tables = series_tables(series)
    if tables:
        print("\n" + tables + "\n", flush=True)
    check_evaluated(series)
    if settings.launcher == "slurm":
        print(f"[series {settings.name}] follow the jobs with: python -m harness.series "
              f"{' '.join(shlex.quote(a) for a in settings.argv if a != '--watch')} --status", flush=True)
    if failures:
        first_key, first = next(iter(failures.items()))
        raise HarnessError(f"{len(failures)} checkpoint run(s) failed, the first ({first_key}): {first}; the "
                           "others are done: fix the cause and run the series again (only failed and new "
                           "checkpoints are computed)")
    return 0


def watch(settings: Settings, act: Callable[[units.Series], tuple[dict[str, str], int]], first: units.Series
          ) -> tuple[dict[str, str], units.Series]:
    """``--watch``: evaluate (or submit) each complete checkpoint until ``--idle`` seconds pass without news."""
    s = settings
    known = {(u.task, u.checkpoint.folder): u for u in first.units}
    seen = {key: (u.changed, u.skipped) for key, u in known.items()}   # the series already printed: only changes show
    failures: dict[str, str] = {}
    last = time.monotonic()
    print(f"[series {s.name}] watching {s.root or 'the listed checkpoints'} every {s.poll:g} s; stopping after "
          f"{s.idle:g} s with nothing new (--idle)", flush=True)
    while True:
        series = units.series_of(s, known)
        moved = False
        for u in series.units:
            key, state = (u.task, u.checkpoint.folder), (u.changed, u.skipped)
            if seen.get(key) != state:
                moved = True
                if key not in seen or seen[key][1] != u.skipped:
                    print(f"[series {s.name}] step {u.step}: "
                          + (u.skipped or ("complete, to run" if u.todo else "complete, done")), flush=True)
                seen[key] = state
        todo = [u for u in series.todo if u.key not in failures]   # a failed run is tried once per watch
        if todo:
            got, started = act(units.Series(series.settings, todo, series.ignored))
            failures |= got
            moved = moved or started > 0
        known = {(u.task, u.checkpoint.folder): u for u in series.units}
        if moved:
            last = time.monotonic()
        if time.monotonic() - last >= s.idle:
            print(f"[series {s.name}] nothing new for {s.idle:g} s: stopped watching", flush=True)
            return failures, series
        time.sleep(s.poll)


def nothing_found(settings: Settings, series: units.Series) -> HarnessError:
    there = ", ".join(series.ignored[:6]) or "nothing"
    return HarnessError(f"no checkpoints under {settings.root}: no folder matches '{settings.pattern.pattern}' "
                        f"(found: {there}); pass --step-pattern '<regex with one group for the step>' for other "
                        "names, list them with --checkpoints, or add --watch to wait for a training job to write them")


def check_evaluated(series: units.Series) -> None:
    """Broken checkpoints (trainer done, files not whole) when none was evaluated: an error, never a quiet exit 0."""
    broken = [u for u in series.units if (u.skipped or "").startswith(BROKEN)]
    if broken and not any(u.done for u in series.units):
        first = broken[0]
        raise HarnessError(f"no checkpoint could be evaluated: {len({u.step for u in broken})} broken, the first "
                           f"(step {first.step}, {first.checkpoint.folder}) {first.skipped}")


def check_plannable(series: units.Series) -> None:
    """A problem every complete checkpoint has is the command's error, not one skip per checkpoint."""
    complete = [u for u in series.units if not (u.skipped or "").startswith(("still being written", BROKEN))]
    reasons = {u.skipped for u in complete}
    if complete and len(reasons) == 1 and None not in reasons:
        raise HarnessError(str(next(iter(reasons))).removeprefix("cannot be planned: "))
    for task in series.settings.tasks:   # the runner's cheap checks (data present, weights fit) before any work
        unit = next((u for u in series.todo if u.task == task), None)
        if unit is not None and unit.state is not None and unit.state.plan is not None:
            unit.state.plan.check(unit.state.plan, unit.state.pending)


if __name__ == "__main__":
    sys.exit(main())
