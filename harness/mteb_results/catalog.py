"""Which harness dataset is which mteb task: the ``mteb_task`` (and ``mteb_subset``) of each catalog entry in
``conf/task/<family>.yaml``, read as data; records of ``task=mteb`` carry their task."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from harness import specs
from harness.core.results import ResultRecord
from harness.tasks.retrieval.data.catalog import DatasetEntry

log = logging.getLogger(__name__)

#: the task family whose records are mteb tasks by name (its datasets are mteb task names)
MTEB_FAMILY = "mteb"
#: split preference when a result file has several and the catalog names none
SPLITS = ("test", "dev", "validation", "train")
#: mteb's name of the benchmark the Ettin and mmBERT papers evaluated their DPR models on (mteb.get_benchmark)
MTEB_ENG_V2 = "MTEB(eng, v2)"


@dataclass(frozen=True)
class MtebColumn:
    """Where one mteb task's main score lands on the leaderboard, and which part of the result file it is."""

    task: str
    table: str
    column: str
    split: str | None = None     # the catalog entry's evaluation split
    subset: str | None = None    # the hf_subset (None: mteb's main score, the mean over subsets)


def _task_yaml(family: str) -> dict[str, Any]:
    """``conf/task/<family>.yaml`` as written, unresolved ({} where there is none)."""
    from omegaconf import OmegaConf
    path = resources.files("conf") / "task" / f"{family}.yaml"
    raw = OmegaConf.to_container(OmegaConf.load(Path(str(path))), resolve=False) if path.is_file() else None
    return raw if isinstance(raw, dict) else {}


def own_catalog(family: str) -> dict[str, Any]:
    """The catalog ``conf/task/<family>.yaml`` declares itself, not entries of inherited tasks."""
    from omegaconf import OmegaConf
    raw = _task_yaml(family)
    out: dict[str, Any] = {}
    for item in raw.get("defaults") or []:
        name = next((v for k, v in item.items() if k.split()[-1] == "/catalog@catalog"), None) \
            if isinstance(item, dict) else None
        if name:
            shared = resources.files("conf") / "catalog" / f"{name}.yaml"
            out |= OmegaConf.to_container(OmegaConf.load(Path(str(shared))), resolve=False) or {}
    return out | (raw.get("catalog") or {})


def catalog_columns() -> dict[str, MtebColumn]:
    """mteb task name -> leaderboard column, from each registered family's own catalog (the first wins)."""

    out: dict[str, MtebColumn] = {}
    for fam in specs.all_specs().values():
        for name, entry in own_catalog(fam.name).items():
            if not isinstance(entry, dict) or not entry.get("mteb_task") or entry["mteb_task"] in out:
                continue
            probe = ResultRecord(task=fam.name, dataset=str(name), split=str(entry.get("split", DatasetEntry.split)), model={},
                                 metrics={}, main_score=fam.main_metric, run_id="")
            try:
                table, column = fam.column_of(probe)
            except (KeyError, ValueError, TypeError, AttributeError):   # a family that needs more than the name
                continue
            out[entry["mteb_task"]] = MtebColumn(entry["mteb_task"], table, column, probe.split,
                                                 entry.get("mteb_subset"))
    return out


def configured_subsets(family: str = MTEB_FAMILY) -> dict[str, str]:
    """Task -> hf_subset for the tasks a family's catalog restricts to one subset (STS17: en-en)."""
    subsets = _task_yaml(family).get("hf_subsets")
    return {str(t): str(v[0]) for t, v in (subsets or {}).items() if isinstance(v, list) and len(v) == 1}


def _entry_of(record: ResultRecord) -> Mapping[str, Any] | None:
    """The record's own catalog entry, from the config it was run with (composite members: the parent's)."""
    catalog = ((record.config or {}).get("task") or {}).get("catalog") or {}
    parent = (record.details or {}).get("member_of")
    if parent:
        members = (catalog.get(parent) or {}).get("members") or {}
        return members.get(record.dataset[len(parent) + 1:]) if record.dataset.startswith(f"{parent}-") else None
    entry = catalog.get(record.dataset)
    return entry if isinstance(entry, Mapping) else None


def mteb_task_of(record: ResultRecord) -> tuple[str, str | None] | None:
    """(mteb task, hf_subset) of a record: its own, else its config's catalog entry's, else the packaged one's."""
    info = (record.details or {}).get("mteb")
    if isinstance(info, Mapping) and info.get("task"):
        return str(info["task"]), None
    entry = _entry_of(record)
    if entry is not None and entry.get("mteb_task"):
        return str(entry["mteb_task"]), entry.get("mteb_subset")
    if entry is None and not (record.details or {}).get("member_of"):
        for col in catalog_columns().values():
            if (col.table, col.column) == (record.task, record.dataset):
                return col.task, col.subset
    return None
