"""GLUE's ``task.*`` settings and the grid they imply: which tasks in which order, which grid points (pure: no
records, no model, no data)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.data import glue as glue_data
from harness.errors import HarnessError
from harness.typed import choices


@dataclass
class Grid:
    learning_rates: list[float]
    weight_decays: list[float]
    epochs: dict[str, list[int]]


@dataclass
class EarlyStopping:
    patience: int = 2
    min_delta: float = 0.0


@dataclass
class Hub:
    path: str = "nyu-mll/glue"
    revision: str | None = None


@dataclass(kw_only=True)
class GlueSettings:
    """``task.*`` of conf/task/glue.yaml (documented there)."""

    name: str
    tasks: list[str] | str
    definitions: dict[str, Any]
    grid: Grid
    data_dir: str | None = None
    hub: Hub = field(default_factory=Hub)
    max_train_samples: int | None = None
    max_eval_samples: int | None = None
    subsample_seed: int = 0
    lr: float | None = None
    weight_decay: float | None = None
    epochs: int | None = None
    epoch_slot: int | None = None
    seed: int | None = None
    batch_size: int = 32
    eval_batch_size: int = 128
    gradient_accumulation_steps: int = 1
    max_length: int = 128
    warmup_ratio: float = 0.1
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_epsilon: float = 1e-6
    max_grad_norm: float = 1.0
    evals_per_epoch: int = 1
    early_stopping: EarlyStopping = field(default_factory=EarlyStopping)
    logging_steps: int = 50
    dataloader_num_workers: int = 0
    chain_from_mnli: list[str] = field(default_factory=list)
    mnli_init: str | bool = "if_available"
    init_from: str | None = None
    keep_checkpoints: bool = False
    weight_decay_convention: str = choices("composer", "torch")


@dataclass(frozen=True)
class GridPoint:
    """One cell of the sweep: one fine-tuning run."""

    task: str
    lr: float
    weight_decay: float
    epochs: int
    seed: int


def order_tasks(tasks: Sequence[glue_data.GlueTask], chained: Sequence[str]) -> list[glue_data.GlueTask]:
    """MNLI first, then tasks that do not chain, then the MNLI-chained ones (each group in the given order)."""
    rank = {t.name: (0 if t.name == "mnli" else 2 if t.name in chained else 1) for t in tasks}
    return sorted(tasks, key=lambda t: rank[t.name])


def epoch_values(task: glue_data.GlueTask, tcfg: Any) -> list[int]:
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
            raise HarnessError(
                f"task.epoch_slot={slot} is out of range for {task.name}'s epoch set {values} "
                f"(valid: 0-{len(values) - 1}); or set task.epochs=<n> directly"
            )
        return [values[slot]]
    return values


def plan(tasks: Sequence[glue_data.GlueTask], tcfg: Any, default_seed: int) -> list[GridPoint]:
    """Every grid point the config implies, in run order. A set ``task.lr`` etc. pins that axis."""
    lrs = [float(tcfg.lr)] if tcfg.lr is not None else [float(v) for v in tcfg.grid.learning_rates]
    wds = [float(tcfg.weight_decay)] if tcfg.weight_decay is not None else [float(v) for v in tcfg.grid.weight_decays]
    seed = int(tcfg.seed) if tcfg.seed is not None else int(default_seed)
    return [
        GridPoint(t.name, lr, wd, ep, seed)
        for t in tasks
        for lr in lrs
        for wd in wds
        for ep in epoch_values(t, tcfg)
    ]
