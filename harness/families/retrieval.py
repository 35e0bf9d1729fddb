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
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from harness import results
from harness.data.catalog import DatasetEntry, check_entries, resolve_entries
from harness.errors import HarnessError, TrainingDivergedError
from harness.evaluation.ir_metrics import METRICS
from harness.evaluation.settings import Batching, Ranking
from harness.evaluation.shards import ShardSettings
from harness.families.base import Cell, Family
from harness.families.lineage import Lineage, resolve
from harness.identity import drop, put
from harness.registry import load_target
from harness.results import ResultRecord
from harness.specs import stages
from harness.typed import count, excluded, excluded_keys, flat, nonempty, role_keys

log = logging.getLogger(__name__)

#: the marker of a finished training in its output folder (its content: the training facts of the record)
TRAIN_DONE = "train_done.json"


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
    train: bool                         # whether the run fine-tunes first (the train.* stage; its node: training)
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
        kept = set(self.settings_class.kept)
        self.identity_exclude = {k: v for k, v in excluded_keys(self.settings_class, "task").items() if k not in kept}
        self.model: Any = None

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
            replace_ = {**self.training_source.identity(self)}
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
        if self.trains and (self.cfg.overwrite or not self.trained(todo)):
            self.training_source.check(self)

    def train_dir(self, todo: Sequence[Cell]) -> Path:
        """Where this run's trained model goes (``train_done.json`` marks it finished)."""
        return self.require_trainer().train_dir(self, todo)

    def trained(self, todo: Sequence[Cell]) -> bool:
        """This run's training already finished (its model is reused, its data not read)."""
        return (self.train_dir(todo) / TRAIN_DONE).exists()

    def require_trainer(self) -> Any:
        if self.trainer is None:
            raise HarnessError(f"task={self.name} trains (task.train=true) but its spec lists no train.* stage: add "
                               "one (e.g. train.dense) to spec.stages, or set task.train=false.")
        return self.trainer

    # ---------------------------------------------------------------------------------------- running
    def load_model(self) -> tuple[Any, dict[str, Any]]:
        """(model, the record's model block) from the load stage; with a source, its trained weights, checked
        against the fingerprint that run recorded. Fails fast, naming the local alternative, when the hub is
        needed and unreachable."""
        lin = self.lineage
        spec = replace(self.spec, path=lin.model_dir) if lin is not None and lin.model_dir else self.spec
        model, block = stages.code_of(str(self.stage("load")))(self, spec)
        if lin is not None:
            if lin.model_dir and lin.fingerprint and block["fingerprint"] != lin.fingerprint:
                raise HarnessError(
                    f"the weights in {lin.model_dir} changed since task={lin.task} run {lin.run_id} recorded them "
                    f"(fingerprint {block['fingerprint']} != {lin.fingerprint}); re-run that configuration or pass "
                    "the directory as model.path=<dir> with task.source.run=null."
                )
            from harness.models import usable_positions

            block |= {"path": self.spec.path, "lineage": lin.record(), "max_positions": usable_positions(model)}
        self.model = model
        return model, block

    def train(self, model: Any, todo: Sequence[Cell]) -> dict[str, Any] | None:
        """Fine-tune ``model`` in place when the run trains, or load this run's finished training (unless
        ``overwrite``; e.g. after a pre-emption during evaluation); returns the training facts for the record
        (``train_s`` and the trained weights' ``fingerprint`` included), or None."""
        if not self.trains:
            return None
        trainer = self.require_trainer()
        out_dir = trainer.train_dir(self, todo)
        marker = out_dir / TRAIN_DONE
        if marker.exists() and not self.cfg.overwrite:
            info = json.loads(marker.read_text())
            log.info("reusing trained model %s", info["model_dir"])
            model.load_state_dict(trainer.load_trained(self, info["model_dir"]).state_dict())
        else:
            from harness.models import fingerprint
            from harness.results import atomic_write_json

            t0 = time.perf_counter()
            info = trainer.fit(self, model, todo, out_dir)
            info |= {"train_s": time.perf_counter() - t0, "fingerprint": fingerprint(info["model_dir"])}
            atomic_write_json(marker, info)
        if self.lineage is not None:
            info["fine_tuned_from"] = self.lineage.record()
        return info

    def retriever(self, model: Any, cache_identity: Mapping[str, Any]) -> Any:
        """The retrieve stage's retriever for ``model``; ``cache_identity`` keys its on-disk corpus cache."""
        return stages.code_of(str(self.stage("retrieve")))(self, model, cache_identity)

    def run(self, todo: Sequence[Cell]) -> Iterator[ResultRecord]:
        from harness.families import retrieval_eval

        model, block = self.load_model()
        try:
            trained = self.train(model, todo)
        except TrainingDivergedError as exc:
            for cell in todo:
                yield self.failed(cell, exc, model=block, split=self.settings.split or cell.payload.split)
            raise
        if trained:
            block["trained"] = trained
        retriever = retrieval_eval.sharded(self, self.retriever(model, self.cache_identity(todo, block, trained)))
        for cell in todo:
            try:
                yield from retrieval_eval.evaluate_cell(self, cell, retriever, block)
            except HarnessError as exc:
                log.error("%s/%s failed: %s", self.name, cell.dataset, exc)
                yield self.failed(cell, exc, model=block, split=self.settings.split or cell.payload.split)

    def cache_identity(self, todo: Sequence[Cell], block: Mapping[str, Any],
                       trained: Mapping[str, Any] | None) -> dict[str, Any]:
        """What the cached corpus encodings depend on: the run (less its search-only keys), the weights, and the
        attention ``auto`` resolved to where it is not padded sdpa (the unpadded GPU path runs attention in bf16:
        its embeddings are never handed to a padded run, or back)."""
        out = {"run": drop(todo[0].identity, self.cache_exclude()),
               "weights": trained["fingerprint"] if trained else block["fingerprint"]}
        attention = (block.get("attention") or {}).get("implementation")
        if attention not in (None, "sdpa"):
            out["attention"] = attention
        return out

    def part_job(self) -> bool:
        """Whether this run is a shard job (``task.shard``): it computes one shard and writes no record."""
        return self.settings.sharding.shard is not None

    def run_part(self, todo: Sequence[Cell]) -> None:
        from harness.families import retrieval_eval

        retrieval_eval.run_part(self, todo)
