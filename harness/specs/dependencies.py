"""One resolver for ``spec.depends_on``: which of a task's datasets start from another of its runs, under a config
(GLUE's MNLI chain). The runner, the sweep staging check and the paper graph all ask it, so they cannot disagree."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.specs.schema import Dependency, TaskSpec

#: a dependency's ``via`` key set to one of these turns the dependency off
OFF = ("off", "false", "none")


def inner(spec: TaskSpec) -> list[Dependency]:
    """The dependencies on the task's own datasets (a chain inside one sweep, e.g. GLUE's RTE on MNLI)."""
    return [d for d in spec.depends_on if d.task == spec.name and d.for_datasets]


def is_on(dep: Dependency, task_cfg: Mapping[str, Any] | Any | None) -> bool:
    """Whether the config leaves ``dep`` on: its ``via`` key (``task.<key>``) is not off (no config: on)."""
    if task_cfg is None or not dep.via.startswith("task."):
        return True
    value = task_cfg.get(dep.via.removeprefix("task.")) if hasattr(task_cfg, "get") else \
        getattr(task_cfg, dep.via.removeprefix("task."), None)
    return value is not False and str(value).lower() not in OFF


def chained(spec: TaskSpec, task_cfg: Mapping[str, Any] | Any | None = None) -> dict[str, tuple[str, ...]]:
    """``{dataset: the datasets whose run it starts from}`` for the task's own chains the config leaves on."""
    out: dict[str, tuple[str, ...]] = {}
    for dep in inner(spec):
        if is_on(dep, task_cfg):
            for name in dep.for_datasets:
                out[name] = tuple(dict.fromkeys((*out.get(name, ()), *dep.datasets)))
    return out


def upstream(chain: Mapping[str, Sequence[str]]) -> set[str]:
    """Every dataset some chained dataset starts from."""
    return {u for ups in chain.values() for u in ups}
