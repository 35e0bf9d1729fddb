"""The one loop every task family runs through: check -> plan cells -> skip finished -> lock -> run the rest ->
write records.

Output folders, task settings, the device, the model folder and the data's presence are checked before anything
is loaded. Planning reads only config and records, so re-running a finished configuration loads no model and no
data. Each run is locked (:mod:`harness.locks`) while it computes, so two processes never compute it twice.
Records are written one by one as the family yields them (atomically), so an interrupted run keeps everything it
finished; a failure never replaces a finished record (it is written beside it), and an ok record whose dataset is
now defined differently is moved aside, never overwritten.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness import families, locks, preflight, results
from harness.errors import HarnessError
from harness.families.parts import pending, run_part
from harness.results import ResultRecord
from harness.summary import print_summary

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from harness.families.base import Cell, Family
    from harness.specs.schema import TaskSpec

log = logging.getLogger(__name__)


class RunFailed(HarnessError):
    """Some cells produced failed records; ``records`` holds every cell's record (ok, failed, skipped)."""

    def __init__(self, message: str, records: list[ResultRecord]):
        super().__init__(message)
        self.records = records


def run(cfg: DictConfig) -> list[ResultRecord]:
    """Run ``cfg`` (also the entry point for tests) and return the record of every planned cell."""
    family, lock_settings = prepare(cfg)
    results_dir = str(cfg.paths.results)
    overwrite = bool(cfg.overwrite)
    if family.part_job():
        run_part(family, results_dir, overwrite)
        return []
    planned: list[Cell] = []
    new: dict[tuple[str, str], ResultRecord] = {}
    kept: dict[tuple[str, str], Path] = {}   # failures written beside a finished record they must not replace
    try:
        for cells in family.rounds():
            planned += cells
            todo = pending(family, cells, results_dir, overwrite)
            if not todo:
                continue
            preflight.check_output_files(output_files(family, results_dir, todo, bool(cfg.get("save_run"))))
            family.check(todo)
            with locks.hold(todo, lambda c: run_dir(family, results_dir, c), lock_settings,
                            lambda cs: pending(family, cs, results_dir, overwrite)) as mine:
                for rec in family.run(mine) if mine else ():
                    with_series(cfg, rec)
                    path = store(results_dir, rec)
                    new[(rec.run_id, rec.dataset)] = rec
                    if path != results.path_of(results_dir, rec):
                        kept[(rec.run_id, rec.dataset)] = path
        family.finish(list(new.values()))
    finally:
        shown = cell_records(family, planned, results_dir, new)
        print_summary(shown)
    failed = [r for r in new.values() if r.status == results.STATUS_FAILED and not r.details.get("member_of")]
    if failed:
        raise RunFailed("; ".join(failure_line(r, kept.get((r.run_id, r.dataset))) for r in failed), shown)
    return shown


def prepare(cfg: DictConfig) -> tuple[Family, locks.LockSettings]:
    """The run's family and lock settings, after the checks that need no model and no data: output folders
    writable, lock and task settings typed, the device present. A failure here writes nothing."""
    preflight.check_output_paths(cfg.paths)
    lock_settings = locks.settings_from(cfg.get("run_lock"))
    from harness.specs import spec_from

    spec = spec_from(cfg.task.get("spec") or {}, str(cfg.task.name), f"task {cfg.task.name!r}, spec")
    family = families.get(spec.runner)(cfg)
    check_spec(spec, family)
    _ = family.device
    return family, lock_settings


def check_spec(spec: TaskSpec, family: Family) -> None:
    """Before any work: the spec's main metric is one the family's scorer produces, its selection rule exists."""
    from harness.selection.rules import rule_for

    produced = family.metrics
    if produced is not None and spec.main_metric not in produced:
        raise HarnessError(f"task {spec.name!r}: spec.main_metric={spec.main_metric!r} is not a metric the "
                           f"{spec.runner} scorer produces ({', '.join(produced)}): set spec.main_metric to one of them")
    rule_for(spec.selection)


def with_series(cfg: DictConfig, rec: ResultRecord) -> None:
    """A run that ``python -m harness.series`` started for one checkpoint: its ``series`` config key (name, step,
    folder, fingerprint, tokens seen) goes into the record's ``details.series``, the one place readers look."""
    series = cfg.get("series")
    if series:
        from omegaconf import OmegaConf

        rec.details["series"] = OmegaConf.to_container(series, resolve=True)


def run_dir(family: Family, results_dir: str, cell: Cell) -> Path:
    """The folder of ``cell``'s run (its records and its lock)."""
    return results.record_path(results_dir, family.name, family.model_name, cell.run_id, cell.dataset).parent


def output_files(family: Family, results_dir: str, todo: Sequence[Cell], save_run: bool) -> dict[Path, str]:
    """Every file the records of ``todo`` are written to (a composite's members' records too)."""
    from harness.per_query import files_of

    out: dict[Path, str] = {}
    for cell in todo:
        for dataset in [cell.dataset, *(m.name for m in (getattr(cell.payload, "members", None) or {}).values())]:
            path = results.record_path(results_dir, family.name, family.model_name, cell.run_id, dataset)
            out |= files_of(path, save_run)
    return out


def failure_line(rec: ResultRecord, side: Path | None) -> str:
    """``dataset: error``, saying where the failure went when an earlier finished record was kept."""
    if side is None:
        return f"{rec.dataset}: {rec.error}"
    return f"{rec.dataset}: {rec.error} (the earlier ok record is kept; this failure is written to {side})"


def store(results_dir: str, rec: ResultRecord) -> Path:
    """Write ``rec``; a finished record of the same cell whose dataset was defined differently is first moved
    aside when ``rec`` replaces it (a failure never does: it goes beside, see :func:`results.write_record`)."""
    path = results.path_of(results_dir, rec)
    old = results.finished_at(path)
    if (rec.status != results.STATUS_FAILED and old is not None
            and old.details.get("data_spec") != rec.details.get("data_spec")):
        set_aside(path)
    return results.write_record(results_dir, rec)


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
