"""``plan(cfg)``: the one planner of a run, shared by the runner, the paper graph, the checkpoint series and the cost
preview. Pure (config and records only, no model, no data, no torch): the task's spec names its family
(:data:`harness.tasks.planners.REGISTRY`), the family types the settings and resolves everything into a
:class:`~harness.tasks.runplan.RunPlan`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from harness.core.errors import HarnessError
from harness.tasks.runplan import Cell, RunPlan


def family_of(cfg: Any) -> Any:
    """The family (planner) of the composed config ``cfg``, after the checks that need no model and no data: the
    spec's main metric is one its scorer produces, its selection rule exists, the device is present."""
    from harness.selection.rules import rule_for
    from harness.specs import spec_from
    from harness.tasks import planners as families

    spec = spec_from(cfg.task.get("spec") or {}, str(cfg.task.name), f"task {cfg.task.name!r}, spec")
    family = families.get(spec.runner)(cfg, spec)
    produced = family.metrics
    if produced is not None and spec.main_metric not in produced:
        raise HarnessError(f"task {spec.name!r}: spec.main_metric={spec.main_metric!r} is not a metric the "
                           f"{spec.runner} scorer produces ({', '.join(produced)}): set spec.main_metric to one of them")
    rule_for(spec.selection)
    _ = family.device
    return family


def plan(cfg: Any, *, mode: str = "run", skip: Sequence[str] = (), round: int = 0) -> RunPlan:
    """The run ``cfg`` composes, planned: round ``round``'s cells (GLUE's chained tasks are round 1, planned from
    MNLI's records), and the work of a ``mode`` job (``report``: evaluation only, on the datasets not in ``skip``)."""
    return family_of(cfg).plan(mode=mode, skip=skip, round=round)


def rounds(cfg: Any, first: RunPlan) -> Iterator[RunPlan]:
    """The run's plans round by round, from ``first``: a later round is planned when the iteration reaches it, after
    the earlier ones ran (GLUE: the chained tasks start from MNLI's records)."""
    yield first
    plan_, i = first, 0
    while plan_.later:
        i += 1
        plan_ = plan(cfg, round=i)
        yield plan_


def every_cell(cfg: Any, first: RunPlan) -> list[Cell]:
    """The cells of every round of the run whose first round is ``first``, as they can be planned now (what the
    paper graph and the series count)."""
    return [c for p in rounds(cfg, first) for c in p.cells]
