"""The plan of a series: every checkpoint found, whether it is complete, each checkpoint's run per task planned
exactly as ``python -m harness`` plans it (its cells, which have a record), and what the rest will cost.

Each checkpoint runs as ``model.path=<its folder> model.name=<series>-step<step>`` with the ``series`` config key
set (name, step, folder, fingerprint, what the folder says of its progress): the runner copies that key into each
record's ``details.series``. The run id holds the weights' content fingerprint (``model.ref``), so a checkpoint
rewritten on disk is a new run, evaluated again, never trusted from an older record.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from harness import results
from harness.errors import HarnessError, one_line
from harness.series.complete import incomplete, newest_change
from harness.series.discover import Checkpoint, Found, listed, under
from harness.series.settings import Settings
from harness.summary import seconds


@dataclass
class Unit:
    """One checkpoint's run of one task."""

    checkpoint: Checkpoint
    task: str | None
    series: dict[str, Any]
    model_name: str
    config: Any = None                      # the composed config it runs (None when skipped)
    plan: Any = None                        # its RunPlan (harness.planning.plan)
    cells: int = 0
    done: int = 0
    failed: list[str] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)   # where its records are, one per cell
    pending: list[Any] = field(default_factory=list)  # its cells without an ok record (the runner's pending)
    skipped: str | None = None              # why it is not run
    seconds: float = 0.0                    # what its finished records say they took
    changed: float = 0.0                    # the folder's newest modification time when planned

    @property
    def step(self) -> int:
        return self.checkpoint.step

    @property
    def key(self) -> str:
        """Which run this is: task, step and weights (a rewritten checkpoint is another key)."""
        return f"{self.task or 'default'}/{self.step}/{self.series.get('fingerprint')}"

    @property
    def todo(self) -> bool:
        return self.skipped is None and self.done < self.cells


@dataclass
class Plan:
    settings: Settings
    units: list[Unit]
    ignored: list[str]

    @property
    def todo(self) -> list[Unit]:
        return [u for u in self.units if u.todo]


def model_name(series: str, step: int) -> str:
    """The record row of one checkpoint: ``<series>-step<step>`` (its own leaderboard row, selection, compare)."""
    return f"{series}-step{step}"


def find(settings: Settings) -> Found:
    """The checkpoints the command line names (under model.path, or --checkpoints)."""
    if settings.root is None:
        return listed(settings.entries, settings.pattern)
    try:
        return under(settings.root, settings.pattern)
    except FileNotFoundError as exc:   # a folder removed while looked at (a trainer rotating checkpoints): next look
        return Found(ignored=[f"{exc.filename} (removed while looked at)"])


@cache
def base_config(overrides: tuple[str, ...]) -> Any:
    """The composed config of ``overrides`` (once per distinct set; callers copy it before changing it)."""
    from harness.compose import compose_config

    try:
        return compose_config(overrides)
    except Exception as exc:   # Hydra's own errors, after harness.overrides' checks: one line
        raise HarnessError(f"the overrides {' '.join(overrides)} do not compose: {one_line(exc)}; fix them as for "
                           "python -m harness") from None


def composed(settings: Settings, task: str | None, ckpt: Checkpoint | None = None,
             series: dict[str, Any] | None = None) -> Any:
    """The config one checkpoint's run of ``task`` runs (no checkpoint: the task's own config, for its checks)."""
    from omegaconf import OmegaConf

    cfg = copy.deepcopy(base_config(tuple(settings.task_overrides(task))))
    if ckpt is not None:
        OmegaConf.update(cfg, "model.path", str(ckpt.folder), merge=False)
        OmegaConf.update(cfg, "model.name", model_name(settings.name, ckpt.step), merge=False)
        OmegaConf.update(cfg, "series", series, merge=False)
    return cfg


def series_value(settings: Settings, ckpt: Checkpoint) -> dict[str, Any]:
    """The ``series`` config key of one checkpoint's runs (what its records carry in ``details.series``)."""
    from harness.models.weights import fingerprint

    return {"name": settings.name, "step": ckpt.step, "folder": str(ckpt.folder),
            "fingerprint": fingerprint(ckpt.folder), **ckpt.facts()}


def check_tasks(settings: Settings) -> None:
    """Before any checkpoint is read: each task's config composes and its settings are valid (the runner's own
    checks that need no model), so a typo fails once, not once per checkpoint."""
    from harness import runner

    for task in settings.tasks:
        runner.checked(composed(settings, task))


def plan_unit(unit: Unit) -> Unit:
    """The unit's cells (as the runner plans them: config and records only, no model loaded) and their records."""
    from harness import planning
    from harness.runplan import pending

    first = planning.plan(unit.config)
    cells = planning.every_cell(unit.config, first)
    unit.plan, unit.cells = first, len(cells)
    unit.pending = pending(first, cells)
    unit.paths = [first.record_path(c) for c in cells]
    for path in unit.paths:
        rec = results.finished_at(path)
        if rec is not None:
            unit.done += 1
            unit.seconds += seconds(rec.timings or {})
        elif path.is_file():
            try:
                unit.failed.append(f"{path.stem}: {results.read_record(path).error}")
            except (ValueError, OSError, TypeError) as exc:
                unit.failed.append(f"{path} cannot be read ({one_line(exc)[:80]})")
    return unit


def make_plan(settings: Settings, known: dict[tuple[str | None, Path], Unit] | None = None) -> Plan:
    """Every checkpoint of the series and each of its runs; ``known``: units planned before, finished and
    unchanged since (a watch re-plans only what is new or changed)."""
    found = find(settings)
    units = []
    for ckpt in found.checkpoints:
        changed = newest_change(ckpt.folder)
        looked: tuple[str | None, dict[str, Any]] | None = None   # once per checkpoint, whatever the tasks
        for task in settings.tasks:
            old = (known or {}).get((task, ckpt.folder))
            if old is not None and old.changed == changed and not old.todo and old.skipped is None:
                units.append(old)
                continue
            looked = looked or _look(settings, ckpt)
            units.append(_unit(settings, ckpt, task, changed, *looked))
    return Plan(settings, units, found.ignored)


def _look(settings: Settings, ckpt: Checkpoint) -> tuple[str | None, dict[str, Any]]:
    """Why the checkpoint cannot be read (None: it can), and its ``series`` value (its weights' fingerprint)."""
    why = incomplete(ckpt.folder, settings.settle)
    if why:
        return why, {}
    try:
        return None, series_value(settings, ckpt)
    except HarnessError as exc:
        return f"cannot be planned: {one_line(exc)}", {}
    except FileNotFoundError as exc:
        return f"removed while read ({exc.filename})", {}


def _unit(settings: Settings, ckpt: Checkpoint, task: str | None, changed: float, why: str | None,
          series: dict[str, Any]) -> Unit:
    unit = Unit(ckpt, task, series, model_name(settings.name, ckpt.step), changed=changed, skipped=why)
    if why:
        return unit
    try:
        unit.config = composed(settings, task, ckpt, series)
        return plan_unit(unit)
    except HarnessError as exc:
        unit.skipped = f"cannot be planned: {one_line(exc)}"
    except FileNotFoundError as exc:
        unit.skipped = f"removed while read ({exc.filename})"
    return unit
