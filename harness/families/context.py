"""What a stage gets from the run it computes: a small typed context, never the runner. The runner plans and drives;
a ``load.*``, ``train.*`` or ``retrieve.*`` stage reads its own nodes from the task's typed settings and the facts
of the run (device, precision, seed, learning rate, where its files go)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from harness.layout import RunLayout

S = TypeVar("S")


@dataclass(frozen=True, kw_only=True)
class StageContext(Generic[S]):
    """``settings``: the task's typed settings, composed of its stages' nodes; ``seed``: what anything new a stage
    creates starts from (``task.train_seed`` when the run trains, else the top-level ``seed``); ``lr``: the
    learning rate the run trains at (``task.lr``, or the source run's), None when it does not train."""

    settings: S
    task: str            # the records' task name
    model: str           # the model's name (the records' folder)
    device: str
    precision: str
    seed: int
    trains: bool
    lr: float | None
    layout: RunLayout
