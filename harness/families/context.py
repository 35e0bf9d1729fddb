"""What a stage gets from the run it computes: a small typed context, never the runner. The runner plans and drives;
a ``load.*``, ``train.*`` or ``retrieve.*`` stage reads its own nodes from the task's typed settings and the facts
of the run (device, precision, seed, learning rate, where its files go)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

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


class RetrievalTask(Protocol):
    """What a retrieval run's computing half (:mod:`~harness.families.retrieval_run`) and its per-dataset
    evaluation (:mod:`~harness.families.retrieval_eval`) read of the runner that planned it: its name, config and
    typed settings, its task's declaration, its stages, and how a record is made. The runner,
    :class:`~harness.families.retrieval.RetrievalFamily`, is one (declared here so that the computing half does
    not import the planning half back)."""

    name: str
    cfg: Any
    settings: Any
    kind: Any

    @property
    def trains(self) -> bool: ...

    @property
    def spec(self) -> Any: ...

    @property
    def lineage(self) -> Any: ...

    @property
    def trainer(self) -> Any: ...

    @property
    def training_source(self) -> Any: ...

    @property
    def train_keys(self) -> tuple[str, ...]: ...

    def stage(self, kind: str) -> str | None: ...

    def cache_exclude(self) -> tuple[str, ...]: ...

    def context(self) -> StageContext[Any]: ...

    def data_spec(self, entry: Any) -> str: ...

    def new_record(self, cell: Any, **fields: Any) -> Any: ...

    def failed(self, cell: Any, error: BaseException | str, **kw: Any) -> Any: ...

    def tracker(self, cell: Any, *, folder: bool = True) -> Any: ...
