"""What a stage gets from the run it computes beyond the :class:`~harness.runplan.RunPlan`'s own values (the typed
settings, device, precision, seed, learning rate, where its files go): values, never the runner. The retrieval
stages together read what planning resolved for them (:class:`RetrievalStages`, built by
:mod:`harness.families.retrieval`), GLUE and mteb theirs; all carried by the plan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True, kw_only=True)
class RetrievalStages:
    """What planning resolved for one retrieval run's stages: which ``load.*``, ``train.*`` and ``retrieve.*``
    stage computes it (by name: :data:`harness.stages.CODE`), the training rows' source (its registry's object),
    where a finished training is kept, what the corpus cache is keyed by (the run less its search-only keys), the
    query length of each dataset where the task sets one (ColBERT) and each composite member's data spec."""

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
    """Where a GLUE run's weights come from: the pretrained model, or a fine-tuned checkpoint (all but its final
    classifier)."""

    kind: str                        # pretrained | mnli | path
    checkpoint: str | None = None
    run_id: str | None = None        # the MNLI record it came from
    candidates: int = 0              # MNLI records compared
