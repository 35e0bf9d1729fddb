"""Task specs: what each task is (metric, tables, selection, stages, dependencies), as data, and its stages.

Read from ``spec:`` of ``conf/task/<name>.yaml`` (or a record's config), loading no compute code."""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.errors import HarnessError, unknown_name
from harness.specs.schema import (
    Dependency,
    ExtraColumn,
    Placement,
    SelectionSpec,
    TableSpec,
    TaskSpec,
    spec_from,
)

if TYPE_CHECKING:
    from harness.core.results import ResultRecord

__all__ = ["Dependency", "ExtraColumn", "Placement", "SelectionSpec", "TableSpec", "TaskSpec", "all_specs", "find",
           "for_record", "get", "known", "spec_from", "task_node"]


def _task_dir() -> Path:
    return Path(str(resources.files("conf"))) / "task"


def task_node(name: str, folder: Path | None = None) -> dict[str, Any]:
    """``conf/task/<name>.yaml`` as a plain mapping, with the task files its ``defaults`` lists merged under it."""
    from omegaconf import OmegaConf
    folder = folder or _task_dir()
    raw = OmegaConf.load(folder / f"{name}.yaml")
    merged = OmegaConf.create({})
    for entry in raw.get("defaults", []) or []:
        if isinstance(entry, str) and not entry.startswith(("/", "_self_")) and (folder / f"{entry}.yaml").is_file():
            merged = OmegaConf.merge(merged, task_node(entry, folder))
    raw.pop("defaults", None)
    out = OmegaConf.to_container(OmegaConf.merge(merged, raw), resolve=False)
    assert isinstance(out, dict)
    return out


@cache
def all_specs() -> dict[str, TaskSpec]:
    """Every task shipped in ``conf/task/``, by name, in file order."""
    out = {}
    for path in sorted(_task_dir().glob("*.yaml")):
        node = task_node(path.stem)
        if "spec" in node:
            out[str(node["name"])] = spec_from(node["spec"], str(node["name"]), f"conf/task/{path.name}, spec")
    return out


def get(name: str) -> TaskSpec:
    """The spec of task ``name``; an unknown name lists the known ones, closest first."""
    specs = all_specs()
    if name not in specs:
        raise unknown_name("task", name, specs, "Add conf/task/<name>.yaml with a spec: node.")
    return specs[name]


def find(name: str) -> TaskSpec | None:
    """``get(name)``, or None for a task that ``conf/task/`` does not ship."""
    return all_specs().get(name)


def for_record(record: ResultRecord) -> TaskSpec | None:
    """The spec a record belongs to: the shipped one, else its own config's, else None."""
    spec = find(record.task)
    if spec is not None:
        return spec
    if record.task in _carried:
        return _carried[record.task]
    node = ((record.config or {}).get("task") or {}).get("spec")
    if not isinstance(node, dict):
        return None
    try:
        spec = spec_from(node, record.task, f"the spec in a {record.task!r} record")
    except HarnessError:
        return None
    _carried[record.task] = spec
    return spec


#: specs read from records of tasks ``conf/task/`` does not ship (a user's config folder), by task
_carried: dict[str, TaskSpec] = {}


def column_of(record: ResultRecord) -> tuple[str, str]:
    """(table, column) of a record, as its task's spec decides (no spec: a table of its own)."""
    spec = for_record(record)
    return spec.column_of(record) if spec else (record.task, record.dataset)


def known() -> dict[str, TaskSpec]:
    """The shipped specs, then those seen in records (:func:`for_record`): what the leaderboard lays out."""
    shipped = all_specs()
    return {**shipped, **{k: v for k, v in _carried.items() if k not in shipped}}
