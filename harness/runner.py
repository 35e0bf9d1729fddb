"""The one loop every task family runs through: plan cells -> skip finished -> run the rest -> write records.

Planning reads only config and records, so re-running a finished configuration loads no model and no data.
Records are written one by one as the family yields them (atomically), so an interrupted run keeps everything
it finished; an ok record whose dataset is now defined differently is moved aside, never overwritten.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness import families, results
from harness.errors import HarnessError
from harness.results import ResultRecord
from harness.summary import print_summary

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from harness.families.base import Cell, Family

log = logging.getLogger(__name__)


class RunFailed(HarnessError):
    """Some cells produced failed records; ``records`` holds every cell's record (ok, failed, skipped)."""

    def __init__(self, message: str, records: list[ResultRecord]):
        super().__init__(message)
        self.records = records


def run(cfg: DictConfig) -> list[ResultRecord]:
    """Run ``cfg`` (also the entry point for tests) and return the record of every planned cell."""
    family = families.get(str(cfg.task.name))(cfg)
    results_dir = str(cfg.paths.results)
    planned: list[Cell] = []
    new: dict[tuple[str, str], ResultRecord] = {}
    try:
        for cells in family.stages():
            planned += cells
            todo = pending(family, cells, results_dir, bool(cfg.overwrite))
            if todo:
                for rec in family.run(todo):
                    results.write_record(results_dir, rec)
                    new[(rec.run_id, rec.dataset)] = rec
        family.finish(list(new.values()))
    finally:
        shown = cell_records(family, planned, results_dir, new)
        print_summary(shown)
    failed = [r for r in new.values() if r.status == results.STATUS_FAILED and not r.details.get("member_of")]
    if failed:
        raise RunFailed("; ".join(f"{r.dataset}: {r.error}" for r in failed), shown)
    return shown


def pending(family: Family, cells: Sequence[Cell], results_dir: str, overwrite: bool) -> list[Cell]:
    """The cells without an ok record of the same definition (all of them with ``overwrite``)."""
    todo = []
    for cell in cells:
        path = results.record_path(results_dir, family.name, family.model_name, cell.run_id, cell.dataset)
        rec = results.finished_record(results_dir, family.name, family.model_name, cell.run_id, cell.dataset)
        if rec is not None and cell.spec is not None and rec.details.get("data_spec") != cell.spec:
            set_aside(path)   # same run, but the dataset means other data now: evaluate again, keep the old one
            rec = None
        if rec is None or overwrite:
            todo.append(cell)
        else:
            log.info("skip %s/%s: record exists for run %s (overwrite=true to redo)", family.name, cell.dataset,
                     cell.run_id)
    return todo


def set_aside(path: Path) -> None:
    """Move a superseded record out of the record tree's reach (not ``*.json``), never overwriting it."""
    superseded = path.with_suffix(f".superseded-{int(time.time())}")
    path.rename(superseded)
    log.warning("dataset definition changed since %s was written; moved it to %s", path, superseded)


def cell_records(family: Family, cells: Sequence[Cell], results_dir: str,
                 new: dict[tuple[str, str], ResultRecord]) -> list[ResultRecord]:
    """The current record of each planned cell, in plan order (cells that never got one are left out)."""
    out = []
    for cell in cells:
        rec = new.get((cell.run_id, cell.dataset))
        if rec is None:
            path = results.record_path(results_dir, family.name, family.model_name, cell.run_id, cell.dataset)
            try:
                rec = results.read_record(path) if path.exists() else None
            except (ValueError, OSError):
                rec = None
        if rec is not None:
            out.append(rec)
    return out
