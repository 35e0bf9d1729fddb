"""`python -m harness task=<task> model=<model> ...`: compose the config, run its task family through the runner."""

from __future__ import annotations

import logging
import sys
from types import ModuleType

import hydra
from omegaconf import DictConfig

from harness.core import scheduler
from harness.core.errors import HarnessError, one_line, print_error
from harness.core.registry import Registry
from harness.run.overrides import PRIMARY, check_overrides, quote_names

log = logging.getLogger("harness")


@hydra.main(version_base="1.3", config_path=PRIMARY, config_name="config")
def _hydra_main(cfg: DictConfig) -> float | scheduler.JobFailed | None:
    from harness.run import runner
    scheduler.stop_on_signals()
    try:
        prepare(cfg)
        records = runner.run(cfg)
    except HarnessError as exc:
        print_error(exc)
        if scheduler.is_multirun():  # one bad job must not stop its siblings in a sweep; the multirun fails at its end
            log.error("%s", exc)
            return scheduler.job_failed(one_line(exc))
        sys.exit(scheduler.FAILED_STATUS)
    except Exception:
        if scheduler.in_submitit_job():   # Hydra stores the error in the job's result; SLURM must see it too
            scheduler.exit_nonzero_at_exit()
        raise
    scores = [r.score for r in records or [] if r.status == "ok" and r.score is not None]
    return sum(scores) / len(scores) if scores else None


def prepare(cfg: DictConfig) -> None:
    """Before any work: the console's noise level (``log_level``, ``hydra.verbose``) and the tracker's package."""
    from hydra.core.hydra_config import HydraConfig

    from harness.core import console
    from harness.training import tracking
    try:
        verbose = HydraConfig.get().verbose
    except ValueError:
        verbose = False
    console.configure(cfg.get("log_level"), verbose)
    tracking.check(cfg)


#: ``harness <subcommand>`` (the console script) -> the module whose ``main(argv)`` runs it
SUBCOMMANDS: Registry[ModuleType] = Registry("subcommand", {
    "leaderboard": "harness.leaderboard.__main__", "select": "harness.select", "export": "harness.export",
    "series": "harness.series.__main__"}, lazy=True)


def main() -> None:
    if sys.argv[1:2] and sys.argv[1] in SUBCOMMANDS:
        sys.exit(SUBCOMMANDS[sys.argv[1]].main(sys.argv[2:]))
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] %(message)s")
    sys.argv[1:] = quote_names(sys.argv[1:])
    try:
        check_overrides(sys.argv[1:])
    except HarnessError as exc:
        sys.exit(print_error(exc))
    _hydra_main()
    failed = scheduler.failed_jobs()
    if failed:   # a multirun whose jobs had failed cells (each job's error is in its log and its records)
        first, error = next(iter(failed.items()))
        more = f" (and {len(failed) - 1} more job(s))" if len(failed) > 1 else ""
        print(f"error: job {first} failed{more}: {error}", file=sys.stderr)
        sys.exit(scheduler.FAILED_STATUS)


if __name__ == "__main__":
    main()
