"""Hydra callbacks: checks before a multirun launches anything (:class:`StagingCheck`: a GLUE sweep whose batches
would start a task chained from MNLI's checkpoint before every MNLI job finished is refused, exit 2)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from harness import specs
from harness.core.errors import HarnessError, print_error
from harness.specs import dependencies

log = logging.getLogger(__name__)


def sweep_batches(params: Mapping[str, str], cli_overrides: Sequence[str], max_batch_size: int | None) -> list:
    """The job batches Hydra's basic sweeper launches, in order (one SLURM array each, each after the previous)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.plugins import Plugins
    from hydra.plugins.sweeper import Sweeper
    parsed = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()] + list(cli_overrides))
    # the sweeper class through Hydra's public plugin registry (it lives in a private module)
    found = [c for c in Plugins.instance().discover(Sweeper) if c.__name__ == "BasicSweeper"]
    if not found:
        raise HarnessError("Hydra's BasicSweeper plugin was not found; is hydra-core installed?")
    return found[0].split_arguments(parsed, max_batch_size)


def job_tasks(job: Sequence[str]) -> list[str] | None:
    """The GLUE tasks a job's overrides name (``task.tasks=...``), or None if it names none."""
    for o in job:
        key, _, value = o.partition("=")
        if key.lstrip("+~") == "task.tasks":
            return [v.strip() for v in value.strip("[]").split(",") if v.strip()]
    return None


def check_staging(batches: Sequence[Sequence[Sequence[str]]], chain: Mapping[str, Sequence[str]]) -> None:
    """Fail unless every job of a chained task (GLUE's RTE/MRPC/STS-B) is in a later batch than those it starts from."""
    ups = dependencies.upstream(chain)
    last_up, first_chained = -1, None
    for i, batch in enumerate(batches):
        for job in batch:
            names = job_tasks(job) or []
            if ups & set(names):
                last_up = i
            elif any(n in chain for n in names) and first_chained is None:
                first_chained = i
    if first_chained is not None and last_up >= first_chained:
        first = "/".join(sorted(ups))
        raise HarnessError(
            f"this multirun would start {first.upper()}-chained jobs (batch {first_chained + 1}) before every "
            f"{first.upper()} job has finished (batch {last_up + 1}). Keep task.tasks the first sweep parameter with "
            f"{first} first, and set "
            "hydra.sweeper.max_batch_size to the number of grid points per task (lr x weight decay x epochs x "
            "seeds), so each task is its own batch; or run MNLI in a separate multirun first."
        )


class StagingCheck(Callback):
    """Before a GLUE multirun launches anything: MNLI's jobs finish before the jobs starting from its checkpoint."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweeper = config.hydra.sweeper
        cli = [o for o in config.hydra.overrides.task]
        batches = sweep_batches(dict(sweeper.get("params") or {}), cli, sweeper.get("max_batch_size"))
        spec = specs.spec_from(OmegaConf.to_container(config.task.spec, resolve=True), str(config.task.name),
                               "task.spec")
        try:
            check_staging(batches, dependencies.chained(spec, config.task))
        except HarnessError as exc:
            # Hydra turns a callback's Exception into a warning and launches anyway; SystemExit stops it here.
            raise SystemExit(print_error(exc)) from exc
        log.info("GLUE multirun: %d job(s) in %d batch(es), MNLI before the chained tasks",
                 sum(len(b) for b in batches), len(batches))
