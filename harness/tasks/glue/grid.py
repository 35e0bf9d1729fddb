"""GLUE's ``task.*`` settings and the grid they imply: which tasks in which order, which grid points (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.core.errors import HarnessError
from harness.core.typed import at_least, choices, count, excluded, flat, nonempty, positive
from harness.specs import dependencies
from harness.tasks.glue import data as glue_data
from harness.tasks.glue.spec import planned_seeds
from harness.training.settings import GlueTraining


@dataclass(frozen=True)
class GridPoint:
    """One cell of the GLUE sweep: one fine-tuning run (a cell's payload, with its :class:`InitSource`)."""

    task: str
    lr: float
    weight_decay: float
    epochs: int
    seed: int


@dataclass(frozen=True)
class InitSource:
    """Where a GLUE run's weights come from: pretrained, or a fine-tuned checkpoint (all but its final classifier)."""

    kind: str                        # pretrained | mnli | path
    checkpoint: str | None = None
    run_id: str | None = None        # the MNLI record it came from
    candidates: int = 0              # MNLI records compared


@dataclass(frozen=True, kw_only=True)
class GlueStages:
    """What ``task=glue``'s computation reads beyond the settings: the run's GLUE tasks (labels, metric, data files)."""

    tasks: tuple[glue_data.GlueTask, ...]


@dataclass
class Grid:
    learning_rates: list[float] = positive(nonempty=True)
    weight_decays: list[float] = at_least(0, nonempty=True)
    epochs: dict[str, list[int]] = count(nonempty=True)


@dataclass
class Hub:
    path: str
    revision: str | None


@dataclass(kw_only=True)
class GlueSettings:
    """``task.*`` of conf/task/glue.yaml (documented there)."""

    name: str
    tasks: list[str] | str = nonempty("definitions", excluded="replaced by the grid point's task")
    definitions: dict[str, Any] = excluded("replaced by the grid point's task definition")
    grid: Grid = excluded("replaced by the grid point's values (task.lr, task.weight_decay, task.epochs)")
    data_dir: str | None = excluded("replaced by the content fingerprint of the task's files (task.data)")
    hub: Hub = excluded("replaced by hub:<path>@<revision> (task.data)")
    max_train_samples: int | None = count(null="every training example")
    max_eval_samples: int | None = count(null="every dev example")
    subsample_seed: int
    lr: float | None = positive(null="the grid's learning rates")
    weight_decay: float | None = at_least(0, null="the grid's weight decays")
    epochs: int | None = count(null="the task's epoch set")
    epoch_slot: int | None = at_least(0, null="the task's whole epoch set", excluded="replaced by the grid point's "
                                                                                      "epochs")
    seed: int | None
    max_length: int = count()
    training: GlueTraining = flat()
    mnli_init: str | bool = excluded("replaced by the MNLI run the point starts from (task.init)")
    init_from: str | None = excluded("replaced by the checkpoint the point starts from (task.init)")
    keep_checkpoints: bool = excluded("whether checkpoints are kept on disk")
    seeds: list[int] = nonempty(excluded="replaced by each grid point's seed (task.seed)")
    eval_interval: dict[str, int] = count(excluded="replaced by the grid point's task's interval (task.eval_batches)")
    weight_decay_convention: str = choices("composer", "torch")


def order_tasks(tasks: Sequence[glue_data.GlueTask], chain: Mapping[str, Sequence[str]]) -> list[glue_data.GlueTask]:
    """The tasks others chain from (MNLI) first, then the unchained, then the chained, each group in given order."""
    ups = dependencies.upstream(chain)
    rank = {t.name: (0 if t.name in ups else 2 if t.name in chain else 1) for t in tasks}
    return sorted(tasks, key=lambda t: rank[t.name])


def epoch_values(task: glue_data.GlueTask, tcfg: GlueSettings) -> list[int]:
    """The epochs this task runs: ``task.epochs``, or the ``task.epoch_slot``-th of its group, or the group."""
    groups = tcfg.grid.epochs
    if task.epoch_group not in groups:
        raise HarnessError(
            f"GLUE task {task.name} has epoch_group {task.epoch_group!r}, but task.grid.epochs defines only "
            f"{list(groups)}; add it or fix task.definitions.{task.name}.epoch_group"
        )
    values = [int(v) for v in groups[task.epoch_group]]
    if tcfg.epochs is not None:
        return [int(tcfg.epochs)]
    if tcfg.epoch_slot is not None:
        slot = int(tcfg.epoch_slot)
        if not 0 <= slot < len(values):
            raise HarnessError(f"task.epoch_slot={slot} is out of range for {task.name}'s epoch set {values} "
                               f"(valid: 0-{len(values) - 1}); or set task.epochs=<n> directly")
        return [values[slot]]
    return values


def seeds(tcfg: GlueSettings, default_seed: int) -> list[int]:
    """The seeds every grid point runs: ``task.seed`` if set, else ``task.seeds`` (authors) or ``seed`` (best_epoch)."""
    out = planned_seeds(str(tcfg.training.scoring_protocol), list(tcfg.seeds or ()), tcfg.seed, default_seed)
    if not out or len(set(out)) != len(out):
        raise HarnessError(f"task.seeds={list(tcfg.seeds)} must be a non-empty list of distinct seeds")
    return out


def check_schedule(tasks: Sequence[glue_data.GlueTask], tcfg: GlueSettings) -> None:
    """Under ``authors``: every task has a positive ``task.eval_interval`` (the batch patience is typed >= 0)."""
    if str(tcfg.training.scoring_protocol) != "authors":
        return
    for t in tasks:
        value = tcfg.eval_interval.get(t.name)
        if not isinstance(value, int) or value < 1:
            raise HarnessError(f"task.eval_interval.{t.name}={value!r}: set it to the batches between dev "
                               f"evaluations (an int >= 1), e.g. task.eval_interval.{t.name}=100")


def grid_points(tasks: Sequence[glue_data.GlueTask], tcfg: GlueSettings, default_seed: int) -> list[GridPoint]:
    """Every grid point the config implies, in run order (seeds consecutive); a set ``task.lr`` etc. pins the axis."""
    check_schedule(tasks, tcfg)
    lrs = [float(tcfg.lr)] if tcfg.lr is not None else [float(v) for v in tcfg.grid.learning_rates]
    wds = [float(tcfg.weight_decay)] if tcfg.weight_decay is not None else [float(v) for v in tcfg.grid.weight_decays]
    return [GridPoint(t.name, lr, wd, ep, seed) for t in tasks for lr in lrs for wd in wds
            for ep in epoch_values(t, tcfg) for seed in seeds(tcfg, default_seed)]
