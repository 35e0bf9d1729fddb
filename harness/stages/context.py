"""What a stage gets from the run it computes: values, never the runner. A ``load.*``, ``train.*`` or ``retrieve.*``
stage reads its own nodes from the task's typed settings and the facts of the run (device, precision, seed,
learning rate, where its files go: :class:`StageContext`); the retrieval stages together read what planning
resolved for them (:class:`RetrievalStages`). Both are built by planning (:mod:`harness.families.retrieval`) and
carried by the :class:`~harness.runplan.RunPlan`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from harness.layout import RunLayout

if TYPE_CHECKING:
    from harness.training.settings import TrainRun

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

    def train_run(self) -> TrainRun:
        """The values a training run resolves: the learning rate, the epochs and seed of the training node, where
        it runs."""
        from harness.training.settings import TrainRun

        t = self.settings.training   # type: ignore[attr-defined]
        assert self.lr is not None, "a run that trains has a learning rate"
        return TrainRun(lr=self.lr, epochs=t.epochs, seed=t.train_seed, precision=self.precision, device=self.device)


@dataclass(frozen=True, kw_only=True)
class RetrievalStages:
    """What planning resolved for one retrieval run's stages: which ``load.*``, ``train.*`` and ``retrieve.*``
    stage computes it (by name: :data:`harness.stages.CODE`), the training rows' source (its registry's object),
    where a finished training is kept, what the corpus cache is keyed by (the run less its search-only keys), the
    query length of each dataset where the task sets one (ColBERT) and each composite member's data spec."""

    ctx: StageContext[Any]
    load: str
    retrieve: str
    train: str | None = None
    source: Any = None                     # the train_data node's source (its ``load``), when the run trains
    train_dir: Path | None = None          # where its trained model goes (``train_done.json`` marks it finished)
    cache_run: Mapping[str, Any] = field(default_factory=dict)
    query_lengths: Mapping[str, int] | None = None
    member_specs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class MtebStages:
    """What ``task=mteb``'s evaluation reads: the mteb task objects (restricted to the configured subsets and
    splits, no data loaded), the local ones' classes and files, and the mteb module."""

    tasks: Mapping[str, Any]
    local: Mapping[str, Any]
    mteb: Any


@dataclass(frozen=True, kw_only=True)
class GlueStages:
    """What ``task=glue``'s computation reads beyond the settings: the GLUE tasks of the run, resolved from their
    definitions (labels, metric, data files)."""

    tasks: tuple[Any, ...]


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
    """Where a GLUE run's encoder weights come from: the pretrained model, or a fine-tuned checkpoint."""

    kind: str                        # pretrained | mnli | path
    checkpoint: str | None = None
    run_id: str | None = None        # the MNLI record it came from
    candidates: int = 0              # MNLI records compared
