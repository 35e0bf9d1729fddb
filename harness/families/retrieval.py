"""The retrieval runner (task=beir, nanobeir, code, mldr, colbert): datasets from a typed catalog, one cell per
dataset under one run id, composite datasets (CQADupstack) as the mean of their members.

A run is composed from the stages its spec lists: the ``load.*`` stage that computes it loads the weights
(:mod:`~harness.families.loaders`; ``task.source``'s trained weights where the task has a source), the ``train.*``
stage fine-tunes them when the run trains (:mod:`~harness.families.trainers`, rows from the ``train_data`` node's
source registry), the ``retrieve.*`` stage builds the retriever (:mod:`~harness.families.retrievers`), and
``score.ir`` scores it (:mod:`~harness.families.retrieval_eval`). What differs between tasks is declared: their
typed settings and a :class:`RetrievalKind` (identity exclusions, the run-id slug, what a record shows).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from harness import results
from harness.data.catalog import DatasetEntry, check_entries, resolve_entries
from harness.errors import HarnessError
from harness.evaluation.ir_metrics import METRICS
from harness.evaluation.settings import Batching, Ranking
from harness.evaluation.shards import ShardSettings
from harness.families.base import Cell, Family
from harness.families.context import StageContext
from harness.families.lineage import Lineage, resolve
from harness.identity import put
from harness.registry import load_target
from harness.results import ResultRecord
from harness.specs import stages
from harness.training.settings import Training
from harness.typed import count, excluded, flat, nonempty, role_keys
from harness.work import Work

if TYPE_CHECKING:
    from harness.families.retrieval_run import RetrievalRun

log = logging.getLogger(__name__)

@dataclass(kw_only=True)
class RetrievalSettings:
    """Keys every retrieval task config has (conf/task/beir.yaml documents each), and the nodes of the stages every
    retrieval task composes; each task adds the nodes of its own stages. No defaults here: each task's YAML writes
    its values, once (tests/test_defaults.py). What a key does to the run identity is declared where the key is
    (:func:`~harness.typed.excluded`, a node's ``role``)."""

    name: str
    datasets: list[str] = nonempty("catalog", excluded="which datasets to evaluate: each one is its own cell of the "
                                               "same run")
    catalog: dict[str, Any] = excluded("each cell's own catalog entry is part of its data spec")
    data_dir: str | None = excluded("part of each cell's data spec")
    split: str | None
    strict_qrels: bool = excluded("part of each cell's data spec")
    max_queries: int | None = count(null="every judged query")
    max_docs: int | None = count(null="the whole corpus")
    ranking: Ranking = flat()
    batching: Batching = flat()
    embedding_cache: bool = excluded("whether corpus embeddings are cached")
    sharding: ShardSettings = flat()    # conf/sharding/default.yaml (harness.evaluation.shards)
    train: bool                         # whether the run fine-tunes first (the train.* stage)
    training: Training = flat()         # the train.* stage's node (each task's trainer narrows it)
    #: excluded keys this task's run ids have always hashed: kept, so those ids do not change
    kept: ClassVar[tuple[str, ...]] = ()


def lr_or_eval(task: RetrievalFamily) -> dict[str, Any]:
    """The run-id slug of most tasks: the learning rate when training, else the evaluation precision."""
    return {"lr": task.lr} if task.trains else {"eval": task.precision}


@dataclass(frozen=True)
class RetrievalKind:
    """What one retrieval task declares beyond its YAML: its typed settings (the nodes of its stages), the run-id slug, the record's hyperparameters and details, a per-dataset query length (ColBERT), checks of
    combinations the types cannot express, and identity facts only the executing machine resolves. Calling it
    with a composed config gives the runner for it."""

    settings_class: type
    hyperparameters: Callable[[RetrievalFamily], dict[str, Any]]
    readable: Callable[[RetrievalFamily], dict[str, Any]] = lr_or_eval
    details: Callable[[RetrievalFamily], dict[str, Any]] = lambda task: {}
    query_length: Callable[[RetrievalFamily, DatasetEntry], int] | None = None
    validate: Callable[[Any], None] = lambda task_config: None   # on the task's config node, before it is typed
    resolved: Callable[[RetrievalFamily], dict[str, Any]] = lambda task: {}

    def __call__(self, cfg: Any) -> RetrievalFamily:
        return RetrievalFamily(cfg, self)


class RetrievalFamily(Family):
    """Plan -> load -> (train) -> retrieve each dataset -> score -> one record per dataset (and composite member)."""

    metrics = METRICS

    def __init__(self, cfg: Any, kind: RetrievalKind) -> None:
        self.kind = kind
        self.settings_class = kind.settings_class
        kind.validate(cfg.task)
        super().__init__(cfg)

    # ---------------------------------------------------------------------------------------- composition
    def stage(self, kind: str) -> str | None:
        """The ``<kind>.*`` stage that computes this run (None: the spec lists none)."""
        return next((s for s in self.task_spec.stages_for(self.config) if s.startswith(kind + ".")), None)

    @cached_property
    def trainer(self) -> Any:
        """The ``train.*`` stage the spec lists (:mod:`harness.families.trainers`), or None."""
        name = next((s for s in self.task_spec.stages if s.startswith("train.")), None)
        return stages.code_of(name) if name else None

    @property
    def training_source(self) -> Any:
        """Where the training rows come from: ``task.train_data.source`` in the registry its typed node names."""
        data = self.settings.train_data
        return load_target(type(data).sources).lookup(data.source)

    @property
    def source(self) -> Any:
        """``task.source`` (the weights of another task's run) where the task has one, else None."""
        return getattr(self.settings, "source", None)

    @cached_property
    def lineage(self) -> Lineage | None:
        src = self.source
        return None if src is None else resolve(src, str(src.results or self.cfg.paths.results), self.model_name)

    # ---------------------------------------------------------------------------------------- planning
    @property
    def trains(self) -> bool:
        """Whether this run fine-tunes before it evaluates (``task.train``; MLDR derives it from its setting)."""
        return bool(self.settings.train)

    @property
    def lr(self) -> float:
        """``task.lr``; null: the source run's LR (the selected DPR LR), else the model's Table 9 DPR LR (tasks with
        a ``task.source`` only: a task without one names its LR)."""
        if self.settings.training.lr is not None:
            return float(self.settings.training.lr)
        if self.lineage is not None and self.lineage.lr is not None:
            return self.lineage.lr
        dpr = self.cfg.model.get("dpr") if self.source is not None else None
        if dpr is None or dpr.get("lr") is None:
            raise HarnessError(f"task={self.name} needs a learning rate to train: the source has no recorded LR and "
                               "the model config no dpr.lr; set task.lr=<value>.")
        return float(dpr.lr)

    def train_keys(self) -> tuple[str, ...]:
        """The keys that count only when the run trains: those of its ``train`` nodes (the trainer's, the data's)."""
        return role_keys(self.settings_class, "train", "task")

    def entries(self) -> list[DatasetEntry]:
        return resolve_entries(list(self.settings.datasets), self.settings.catalog)

    def run_identity(self) -> dict[str, Any]:
        if self.trains:
            replace_ = {**self.training_source.identity(self), **self.settings.training.identity()}
            if self.settings.training.lr is None:
                replace_["task.lr"] = self.lr
            ident = self.identity(replace=replace_)
        else:
            ident = self.identity(exclude=self.train_keys() if self.trainer else ())
        for key, value in self.kind.resolved(self).items():
            put(ident, key, value)
        return ident

    def data_spec(self, entry: DatasetEntry) -> str:
        """Hash of what defines a dataset's data (catalog entry, local folder, split, qrels strictness; ColBERT: the
        dataset's query length)."""
        s = self.settings
        spec = results.stable_hash({
            "entry": entry.definition(), "data_dir": str(Path(s.data_dir).expanduser().resolve()) if s.data_dir else None,
            "split": s.split, "strict_qrels": s.strict_qrels,
        })
        if self.kind.query_length is None:
            return spec
        return results.stable_hash({"data": spec, "query_length": self.kind.query_length(self, entry)})

    def cells(self) -> list[Cell]:
        ident = self.run_identity()
        rid = results.run_id(ident, self.kind.readable(self))
        return [Cell(e.name, rid, ident, self.data_spec(e), e) for e in self.entries()]

    def cache_exclude(self) -> tuple[str, ...]:
        """Identity keys that change the ranking but not the corpus encoding (left out of the corpus cache key): the
        keys of the settings' ``search`` nodes."""
        return role_keys(self.settings_class, "search", "task")

    @cached_property
    def hyperparameters(self) -> dict[str, Any]:
        """The settings every record of this run shows, worked out once per run (a training file is hashed for
        them, not once per record)."""
        return self.kind.hyperparameters(self)

    def new_record(self, cell: Cell, **fields: Any) -> ResultRecord:
        fields.setdefault("hyperparameters", copy.deepcopy(self.hyperparameters))
        rec = super().new_record(cell, **fields)
        for key, value in self.kind.details(self).items():
            rec.details.setdefault(key, value)   # failed records too: the right column
        if self.lineage is not None:
            rec.details.setdefault("lineage", self.lineage.record())
        return rec

    # ---------------------------------------------------------------------------------------- checking
    @cached_property
    def model_ref(self) -> dict[str, Any]:
        """The model's content reference; with a source, the source run and its trained weights' fingerprint."""
        from harness.models import model_ref

        if self.lineage is None:
            return model_ref(self.spec)
        return self.lineage.ref({} if self.lineage.model_dir is not None else model_ref(self.spec))

    def check_model(self) -> None:
        """``model.path`` is checked when it is what runs (a source run's trained weights are local)."""
        if self.lineage is None or self.lineage.model_dir is None:
            super().check_model()

    def check(self, todo: Sequence[Cell]) -> None:
        """Before any model is loaded: every dataset's local folder and files are there, or the hub is reachable
        for its pinned copy (else one error naming each local alternative); then the training data, when this run
        still has to train."""
        super().check(todo)
        s = self.settings
        check_entries([cell.payload for cell in todo], s.data_dir, s.split)
        if self.trains and (self.cfg.overwrite or not self.compute().trained(todo)):
            self.training_source.check(self)

    def document_length(self) -> int:
        """The length documents are encoded at (the work estimate's cap): ``task.document_length`` where the task
        has it (ColBERT; MLDR: its ``max_length``), else ``task.max_length``."""
        s: Any = self.settings
        return int(getattr(s, "document_length", None) or s.evaluation.max_length)

    def work(self, mode: str, skip: Sequence[str] = ()) -> Work:
        """Evaluation tokens of the datasets not in ``skip`` (a shard job's: its share; the merge's: none), and when
        the run trains (``mode`` run), its training source's."""
        from harness.data.sizes import retrieval_work

        s = self.settings
        w = retrieval_work([d for d in s.datasets if d not in skip], self.document_length(), s.data_dir, s.catalog)
        shards = s.sharding
        if shards.shard_launcher == "external" and isinstance(shards.shards, int) and shards.shards > 1:
            # a shard job encodes 1/K of the corpora (queries: each shard searches with every query); the merge reads
            k = shards.shards
            return Work(short=w.short / k, long=w.long / k) if shards.shard is not None else Work()
        if mode == "report" or not self.trains:
            return w
        w += self.training_source.work(self)
        return w

    def context(self) -> StageContext[Any]:
        """What this run's stages get: the typed settings and the run's facts, never the runner."""
        from harness.layout import RunLayout

        s = self.settings
        return StageContext(settings=s, task=self.name, model=self.model_name, device=self.device,
                            precision=self.precision, trains=self.trains, lr=self.lr if self.trains else None,
                            seed=s.training.train_seed if self.trains else int(self.cfg.seed),
                            layout=RunLayout.of(self.cfg.paths))

    def compute(self) -> RetrievalRun:
        """This run's computing half (:mod:`~harness.families.retrieval_run`)."""
        from harness.families.retrieval_run import RetrievalRun

        return RetrievalRun(self)

    def run(self, todo: Sequence[Cell]) -> Iterator[ResultRecord]:
        return self.compute().run(todo)

    def part_job(self) -> bool:
        """Whether this run is a shard job (``task.shard``): it computes one shard and writes no record."""
        return self.settings.sharding.shard is not None

    def run_part(self, todo: Sequence[Cell]) -> None:
        self.compute().run_part(todo)
