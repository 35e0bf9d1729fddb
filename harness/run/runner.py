"""The one loop every run goes through: plan -> skip finished cells -> check -> lock -> compute -> write each record as
it comes; everything is checked before anything is loaded, so a finished configuration loads no model or data."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core import layout, results
from harness.core.console import print_summary
from harness.core.errors import HarnessError
from harness.core.results import ResultRecord
from harness.core.typed import build
from harness.run import locks, planning, preflight
from harness.tasks.runplan import Cell, RunPlan, pending

if TYPE_CHECKING:
    from omegaconf import DictConfig

log = logging.getLogger(__name__)


class RunFailed(HarnessError):
    """Some cells produced failed records; ``records`` holds every cell's record (ok, failed, skipped)."""

    def __init__(self, message: str, records: list[ResultRecord]):
        super().__init__(message)
        self.records = records


def run(cfg: DictConfig) -> list[ResultRecord]:
    """Run ``cfg`` (also the tests' entry point) and return every planned cell's record."""
    lock_settings = _settings(cfg)
    plan = planning.plan(cfg)
    if plan.part:
        run_part(plan)
        return []
    planned: list[Cell] = []
    new: dict[tuple[str, str], ResultRecord] = {}
    kept: dict[tuple[str, str], Path] = {}   # failures written beside a finished record they must not replace
    try:
        for i in itertools.count(1):   # the run's rounds: a later one planned once the earlier ones ran (GLUE)
            planned += plan.cells
            run_round(cfg, plan, lock_settings, new, kept)
            if not plan.later:
                break
            plan = planning.plan(cfg, round=i)
        if plan.select_after and len(planned) > 1:
            write_selection(plan)
    finally:
        shown = cell_records(plan, planned, new)
        print_summary(shown)
    failed = [r for r in new.values() if r.status == results.STATUS_FAILED and not r.details.get("member_of")]
    if failed:
        raise RunFailed("; ".join(failure_line(r, kept.get((r.run_id, r.dataset))) for r in failed), shown)
    return shown


def run_round(cfg: DictConfig, p: RunPlan[Any, Any], lock_settings: locks.LockSettings,
              new: dict[tuple[str, str], ResultRecord], kept: dict[tuple[str, str], Path]) -> None:
    """One round of the run: its unfinished cells checked, locked and computed, each record written as it comes."""
    todo = pending(p, p.cells)
    if not todo:
        return
    preflight.check_output_files(output_files(p, todo))
    p.check(p, todo)
    with locks.hold({c.run_id: p.record_path(c).parent for c in todo}, lock_settings) as held:
        mine = pending(p, [c for c in todo if c.run_id in held])   # what another process finished meanwhile: done
        for rec in (p.compute(p, mine) or ()) if mine else ():
            with_series(cfg, rec)
            path = store(p.layout.results, rec)
            new[(rec.run_id, rec.dataset)] = rec
            if path != results.path_of(p.layout.results, rec):
                kept[(rec.run_id, rec.dataset)] = path


def checked(cfg: DictConfig, *, plan: bool = False) -> None:
    """The checks before any model or data; with ``plan``, the run planned and its checks run on every cell."""
    _settings(cfg)
    if not plan:
        planning.planner_of(cfg, source=False)
        return
    p = planning.plan(cfg)
    p.check(p, p.cells)


def write_selection(plan: RunPlan[Any, Any]) -> None:
    """After an in-process sweep (several cells planned), the task's selection, as ``harness.select`` writes it."""
    from harness import selection
    res, experiment = plan.layout.results, plan.header.experiment
    path = selection.write_selection(plan.task, res, layout.selection_dir(res, experiment), plan.model_name, experiment)
    if path is not None:
        log.info("%s selection (best configuration per task on dev): %s", plan.task, path)


def _settings(cfg: DictConfig) -> locks.LockSettings:
    """Output folders writable, the lock settings typed."""
    preflight.check_output_paths(cfg.paths)
    return lock_settings(cfg.get("run_lock"))


def lock_settings(raw: Mapping[str, Any] | None) -> locks.LockSettings:
    """Typed ``run_lock`` settings: an unknown key is an error naming the closest valid one."""
    return build(locks.LockSettings, dict(raw or {}), "run_lock")


def run_part(plan: RunPlan[Any, Any]) -> None:
    """A part job (one corpus shard): the unfinished cells' part into the cache; no run lock, no record."""
    todo = pending(plan, plan.cells)
    if todo:
        plan.check(plan, todo)
        plan.compute(plan, todo)


def with_series(cfg: DictConfig, rec: ResultRecord) -> None:
    """A checkpoint's run of ``python -m harness.series``: its ``series`` config key into ``details.series``."""
    series = cfg.get("series")
    if series:
        from omegaconf import OmegaConf
        rec.details["series"] = OmegaConf.to_container(series, resolve=True)


def output_files(plan: RunPlan[Any, Any], todo: Sequence[Cell]) -> dict[Path, str]:
    """Every file the records of ``todo`` are written to (a composite's members' records too)."""
    from harness.core.per_query import files_of
    out: dict[Path, str] = {}
    for cell in todo:
        for dataset in [cell.dataset, *(m.name for m in (getattr(cell.payload, "members", None) or {}).values())]:
            out |= files_of(plan.record_path(cell, dataset), plan.save_run)
    return out


def failure_line(rec: ResultRecord, side: Path | None) -> str:
    """``dataset: error``, saying where the failure went when an earlier finished record was kept."""
    if side is None:
        return f"{rec.dataset}: {rec.error}"
    return f"{rec.dataset}: {rec.error} (the earlier ok record is kept; this failure is written to {side})"


def store(results_dir: str, rec: ResultRecord) -> Path:
    """Write ``rec``, first setting aside finished records of the cell computed on other data."""
    path = results.path_of(results_dir, rec)
    if rec.status == results.STATUS_FAILED:
        return results.write_record(results_dir, rec)
    old = results.finished_at(path)
    if old is not None and old.details.get("data_spec") != rec.details.get("data_spec"):
        set_aside(path, "its dataset is defined differently or its files now hold other data")
    for other in earlier_versions(path, rec):
        set_aside(other, f"it was computed on an earlier version of the files run {rec.run_id} reads")
    return results.write_record(results_dir, rec)


def earlier_versions(path: Path, rec: ResultRecord) -> list[Path]:
    """The finished records of ``rec``'s cell and configuration (``details.data_free_key``) under another run id."""
    key = rec.details.get("data_free_key")
    if key is None:
        return []
    slug = layout.safe_name(rec.run_id.rpartition("-")[0])   # as its folder is named
    out = []
    for other in sorted(path.parent.parent.glob(f"{slug}-*/{path.name}" if slug else f"*/{path.name}")):
        found = results.finished_at(other)
        if found is not None and found.run_id != rec.run_id and found.details.get("data_free_key") == key:
            out.append(other)
    return out


def set_aside(path: Path, why: str) -> None:
    """Move a superseded record out of the record tree's reach (not ``*.json``), never overwriting it."""
    moved = results.set_aside(path)
    log.warning("%s: %s; moved it to %s", path, why, moved)


def cell_records(plan: RunPlan[Any, Any], cells: Sequence[Cell], new: dict[tuple[str, str], ResultRecord]
                 ) -> list[ResultRecord]:
    """The current record of each planned cell, in plan order (cells that never got one are left out)."""
    out = []
    for cell in cells:
        rec = new.get((cell.run_id, cell.dataset))
        if rec is None:
            path = plan.record_path(cell)
            try:
                rec = results.read_record(path) if path.exists() else None
            except (ValueError, OSError):
                rec = None
        if rec is not None:
            out.append(rec)
    return out
