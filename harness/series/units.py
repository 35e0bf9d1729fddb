"""A series' units: every checkpoint found, whether complete, each checkpoint's run per task as one job of the paper
graph's kind (``model.name=<series>-step<step>``, the run id holding the weights' fingerprint), and the cost."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError, one_line
from harness.paper.graph import Job, Step
from harness.paper.progress import JobState, job_state
from harness.series.discover import Checkpoint, Found, incomplete, listed, newest_change, under
from harness.series.settings import Settings


@dataclass
class Unit:
    """One checkpoint's run of one task: its job and the job's state (None when the checkpoint is skipped)."""

    checkpoint: Checkpoint
    task: str | None
    series: dict[str, Any]
    job: Job | None = None
    state: JobState | None = None
    skipped: str | None = None              # why it is not run
    changed: float = 0.0                    # the folder's newest modification time when planned

    @property
    def step(self) -> int:
        return self.checkpoint.step

    @property
    def key(self) -> str:
        """Which run this is: task, step and weights (a rewritten checkpoint is another key)."""
        return f"{self.task or 'default'}/{self.step}/{self.series.get('fingerprint')}"

    @property
    def cells(self) -> int:
        return self.state.cells if self.state else 0

    @property
    def done(self) -> int:
        return self.state.done if self.state else 0

    @property
    def todo(self) -> bool:
        return self.skipped is None and self.done < self.cells


@dataclass
class Series:
    """What a series holds now: its units (each checkpoint's run per task) and what its folder holds besides."""

    settings: Settings
    units: list[Unit]
    ignored: list[str]

    @property
    def todo(self) -> list[Unit]:
        return [u for u in self.units if u.todo]


def steps(units: list[Unit]) -> list[Step]:
    """The units' jobs as the paper graph's steps: one per checkpoint (a training task's makes it ``train``)."""
    by: dict[int, list[Unit]] = {}
    for u in units:
        if u.job is not None:
            by.setdefault(u.step, []).append(u)
    return [Step(f"step{step}", "train" if any(map(_trains, us)) else "eval", [u.job for u in us if u.job])
            for step, us in sorted(by.items())]


def _trains(unit: Unit) -> bool:
    return bool(unit.state and unit.state.plan is not None and unit.state.plan.trains)


def find(settings: Settings) -> Found:
    """The checkpoints the command line names (under model.path, or --checkpoints)."""
    if settings.root is None:
        return listed(settings.entries, settings.pattern)
    try:
        return under(settings.root, settings.pattern)
    except FileNotFoundError as exc:   # a folder removed while looked at (a trainer rotating checkpoints): next look
        return Found(ignored=[f"{exc.filename} (removed while looked at)"])


def hydra_value(value: Any) -> str:
    """``value`` as Hydra's override grammar writes it (strings quoted, so any folder name passes as it is)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def job_of(settings: Settings, unit: Unit) -> Job:
    """One checkpoint's run of a task as a job, its record row ``<series>-step<step>``."""
    return Job(unit.key, f"step{unit.step}", "run", unit.task or "", (
        *settings.task_overrides(unit.task), f"model.path={hydra_value(str(unit.checkpoint.folder))}",
        f"model.name={hydra_value(f'{settings.name}-step{unit.step}')}", f"series={hydra_value(unit.series)}"))


def series_value(settings: Settings, ckpt: Checkpoint) -> dict[str, Any]:
    """The ``series`` config key of one checkpoint's runs (what its records carry in ``details.series``)."""
    from harness.models.weights import fingerprint
    return {"name": settings.name, "step": ckpt.step, "folder": str(ckpt.folder),
            "fingerprint": fingerprint(ckpt.folder), **ckpt.facts()}


def with_state(unit: Unit) -> Unit:
    """The unit's cells (as the runner plans them: config and records only, no model loaded) and their records."""
    assert unit.job is not None
    unit.state = job_state(unit.job)
    if unit.state.waiting:
        unit.skipped = f"cannot be planned: {unit.state.waiting}"
    return unit


def series_of(settings: Settings, known: dict[tuple[str | None, Path], Unit] | None = None) -> Series:
    """Every checkpoint of the series and its runs; ``known``: units planned before and unchanged since."""
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
    return Series(settings, units, found.ignored)


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
    unit = Unit(ckpt, task, series, changed=changed, skipped=why)
    if why:
        return unit
    try:
        unit.job = job_of(settings, unit)
        return with_state(unit)
    except HarnessError as exc:
        unit.skipped = f"cannot be planned: {one_line(exc)}"
    except FileNotFoundError as exc:
        unit.skipped = f"removed while read ({exc.filename})"
    return unit
