"""Selection from records only: each task's rule picks the records that stand for a model (nothing is rerun).

``python -m harness.select --task <family>`` writes ``selected/<family>-<model>.json`` beside the results folder."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness import specs
from harness.core import layout, results
from harness.core.errors import HarnessError
from harness.core.results import ResultRecord
from harness.selection.comparable import comparable_records
from harness.selection.rules import SCHEMA, Choice, rule_for

__all__ = ["SCHEMA", "Choice", "choose", "load_selections", "prune_checkpoints", "write_selection"]


def choose(family: str, records: Iterable[ResultRecord], model: str | None = None) -> dict[str, Choice]:
    """The task's selection over ``records``; a task ``conf/task/`` does not ship by its records' spec."""
    recs = [r for r in records if r.task == family and (model is None or (r.model or {}).get("name") == model)]
    spec = spec_of(family, recs)
    return rule_for(spec.selection).choose(recs, key=spec.column_of)


def spec_of(family: str, records: Iterable[ResultRecord]) -> specs.TaskSpec:
    """``family``'s spec: ``conf/task/``'s, else its records' (unknown: the error names the known tasks)."""
    return (specs.find(family) or next((s for r in records if r.task == family and (s := specs.for_record(r))), None)
            or specs.get(family))


def load_selections(family: str, results_dir: str | Path, model: str | None = None, experiment: str | None = None
                    ) -> tuple[dict[str, Choice], list[ResultRecord]]:
    """Choices per model for ``family`` from ``results_dir``'s records (a record of an unread schema refused)."""
    if not Path(results_dir).is_dir():
        specs.find(family) or specs.get(family)   # an unknown task is named first (it may be a typo)
        raise HarnessError(f"results directory {results_dir} does not exist; run a sweep first or pass --results")
    try:
        recs = [r for _, r in comparable_records(results_dir, strict_schema=True)
                if experiment is None or r.experiment == experiment]
    except results.UnknownSchemaError as exc:   # a record it cannot read could be the one to select: refuse
        raise HarnessError(f"record {exc}") from None
    return choose(family, recs, model), recs


def write_selection(family: str, results_dir: str | Path, out_dir: str | Path, model: str | None = None,
                    experiment: str | None = None) -> Path | None:
    """Select and write ``<out_dir>/<family>-<model>.json`` for each model; returns the last path written."""
    choices, _ = load_selections(family, results_dir, model, experiment)
    path = None
    for name, choice in choices.items():
        path = layout.selection_path(out_dir, family, name)
        results.atomic_write_json(path, jsonable(choice.summary))
    return path


def jsonable(value: Any) -> Any:
    """Cell keys may be tuples (table, column): JSON wants strings."""
    if isinstance(value, dict):
        return {(k[-1] if isinstance(k, tuple) else k): jsonable(x) for k, x in value.items()}
    return [jsonable(x) for x in value] if isinstance(value, list) else value


def prune_checkpoints(choice: Choice, records: Iterable[ResultRecord]) -> list[str]:
    """Delete kept checkpoints (MNLI's) of runs that were not selected; returns the removed directories."""
    keep = {r.run_id for recs in choice.cells.values() for r in recs}
    removed = []
    for r in records:
        ckpt = r.details.get("checkpoint")
        if r.model.get("name") == choice.model.get("name") and r.run_id not in keep and ckpt and Path(ckpt).is_dir():
            shutil.rmtree(ckpt)
            removed.append(ckpt)
    return removed
