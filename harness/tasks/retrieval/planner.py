"""The retrieval tasks' planner (task=beir, nanobeir, code, mldr, colbert): datasets from a typed catalog, one cell
per dataset under one run id, composite datasets (CQADupstack) as the mean of their members.

A run is composed from its spec's stages (:mod:`harness.tasks.retrieval.stages`): ``load.*`` (``task.source``'s
trained weights where there is one), ``train.*`` when the run trains, ``retrieve.*``, ``score.ir``; planning
resolves them into the :class:`~harness.tasks.runplan.RunPlan` the stages compute from. What differs between tasks
is declared: typed settings and a :class:`RetrievalKind` (identity exclusions, run-id slug, what a record shows),
reading a :class:`Resolved`, never the planner."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from harness.core import file_hash, results
from harness.core.errors import HarnessError
from harness.core.identity import drop, put
from harness.core.typed import build, count, excluded, flat, nonempty, role_keys
from harness.core.work import Work
from harness.encoding.settings import Batching
from harness.specs import TaskSpec
from harness.specs.stages import code_of
from harness.tasks.retrieval import compute
from harness.tasks.retrieval import stages as declared
from harness.tasks.retrieval.data.catalog import KINDS, DatasetEntry, check_entries, resolve_entries
from harness.tasks.retrieval.data.reads import entry_files
from harness.tasks.retrieval.retrievers.ir_metrics import METRICS
from harness.tasks.retrieval.settings import Ranking, ShardSettings
from harness.tasks.retrieval.stages import RetrievalStages
from harness.tasks.runplan import (
    Cell,
    Lineage,
    RunPlan,
    Setup,
    check_model,
    data_free_key,
    excluded_keys,
    with_files,
)
from harness.training.settings import Training


@dataclass(kw_only=True)
class RetrievalSettings:
    """Keys every retrieval task config has (conf/task/beir.yaml documents each) and the nodes of the stages every
    retrieval task composes; no defaults (each YAML writes its values once); identity roles declared per key."""

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
    sharding: ShardSettings = flat()    # conf/sharding/default.yaml (harness.tasks.retrieval.retrievers.shards)
    train: bool                         # whether the run fine-tunes first (the train.* stage)
    training: Training = flat()         # the train.* stage's node (each task's trainer narrows it)
    #: excluded keys this task's run ids have always hashed: kept, so those ids do not change
    kept: ClassVar[tuple[str, ...]] = ()


@dataclass(frozen=True)
class Resolved:
    """What a retrieval task's declarations read: its typed settings and what planning resolved for the run (the
    evaluation precision, whether it trains and at which LR, the source run, the training rows' description)."""

    settings: Any
    spec: TaskSpec
    precision: str
    trains: bool
    lr: float | None
    lineage: Lineage | None
    data: dict[str, Any]          # what the training source says of its rows, when the run trains


def lr_or_eval(r: Resolved) -> dict[str, Any]:
    """The run-id slug of most tasks: the learning rate when training, else the evaluation precision."""
    return {"lr": r.lr} if r.trains else {"eval": r.precision}


@dataclass(frozen=True)
class RetrievalKind:
    """What one retrieval task declares beyond its YAML: typed settings (its stages' nodes), run-id slug, the record's
    hyperparameters and details, a per-dataset query length (ColBERT), checks the types cannot express, and
    identity facts only the executing machine resolves. Called with a config, it gives its planner."""

    settings_class: type
    hyperparameters: Callable[[Resolved], dict[str, Any]]
    readable: Callable[[Resolved], dict[str, Any]] = lr_or_eval
    details: Callable[[Resolved], dict[str, Any]] = lambda r: {}
    query_length: Callable[[Any, DatasetEntry], int] | None = None   # (settings, entry)
    validate: Callable[[Any], None] = lambda task_config: None       # on the task's config node, before it is typed
    resolved: Callable[[Any], dict[str, Any]] = lambda settings: {}  # (settings)

    metrics: tuple[str, ...] = METRICS

    def __call__(self, setup: Setup) -> RetrievalPlanner:
        return RetrievalPlanner(setup, self)

    def plan(self, setup: Setup, *, mode: str = "run", skip: Sequence[str] = (), round: int = 0
             ) -> RunPlan[Any, RetrievalStages]:
        """The plan of the run ``setup`` holds (its planner made and asked for it: :meth:`RetrievalPlanner.runplan`)."""
        return RetrievalPlanner(setup, self).runplan(mode=mode, skip=skip, round=round)

    def __repr__(self) -> str:
        return f"RetrievalKind({self.settings_class.__module__}:{self.settings_class.__qualname__})"


def entries(s: Any) -> list[DatasetEntry]:
    """The datasets the settings ``s`` name, as catalog entries."""
    return resolve_entries(list(s.datasets), s.catalog)


def data_spec(s: Any, entry: DatasetEntry, query_length: int | None = None) -> str:
    """Hash of what defines a dataset's data (entry, local folder, split, qrels strictness; ColBERT: query length)."""
    spec = results.stable_hash({
        "entry": entry.definition(), "data_dir": str(Path(s.data_dir).expanduser().resolve()) if s.data_dir else None,
        "split": s.split, "strict_qrels": s.strict_qrels,
    })
    return spec if query_length is None else results.stable_hash({"data": spec, "query_length": query_length})


class RowSource:
    """What every ``task.train_data.source`` shares: nothing enters the run identity by default (a pinned hub copy);
    a hub source's check: the hub reachable, else one line naming ``hub`` (over the node ``d``) and ``offline``."""

    hub = offline = ""   # what a hub source reads, and its local alternative
    #: its identity holds its files' content hashes: a new version of a file is a new run id, and the records of
    #: the run on the earlier version are set aside when the new run's are written (``Cell.data_free_key``)
    hashes_files: ClassVar[bool] = False

    def identity(self, s: Any) -> dict[str, Any]:
        return {}

    def files(self, s: Any) -> list[Path]:
        """The local files its rows are read from (none: a pinned hub copy): in each cell's data spec."""
        return []

    def check(self, s: Any) -> None:
        from harness.models import require_hub

        require_hub(self.hub.format(d=s.train_data), self.offline)


def training_source(s: Any) -> Any:
    """Where the training rows come from: ``task.train_data.source`` in the registry its typed node names."""
    data = s.train_data
    return type(data).sources.lookup(data.source)


def host_memory(s: Any, shards: int) -> Any:
    """(documents, queries, tokens per document) -> host GB of one dataset's evaluation under settings ``s``
    (:func:`~harness.tasks.retrieval.retrievers.plaid_memory.job_host_gb`; a multi-vector run's PLAID build too)."""
    from harness.tasks.retrieval.retrievers.plaid_memory import job_host_gb

    mv = getattr(s, "multi_vector", None)
    search = mv.search if mv is not None and getattr(s, "retriever", "multi_vector") == "multi_vector" else None
    dim = int(mv.embedding_size) if mv is not None else 0
    return lambda docs, queries, tokens: job_host_gb(docs, queries, tokens, search, dim, shards)


class RetrievalPlanner:
    """Plan: settings -> cells (one run id, one cell per dataset) -> the stages' resolved facts -> RunPlan."""

    metrics = METRICS

    def __init__(self, setup: Setup, kind: RetrievalKind) -> None:
        self.setup, self.kind, self.settings_class = setup, kind, kind.settings_class
        kind.validate(setup.cfg.task)
        self.settings = build(self.settings_class, setup.task, f"task {setup.name!r}", key="task")
        self.identity_exclude = excluded_keys(self.settings_class)

    # ---------------------------------------------------------------------------------------- composition
    def stage(self, kind: str) -> str | None:
        """The ``<kind>.*`` stage that computes this run (None: the spec lists none)."""
        return next((s for s in self.setup.spec.stages_for(self.setup.config) if s.startswith(kind + ".")), None)

    @cached_property
    def trainer(self) -> str | None:
        """The ``train.*`` stage the spec lists (:data:`~harness.tasks.retrieval.stages.STAGES`), or None."""
        return next((s for s in self.setup.spec.stages if s.startswith("train.")), None)

    # ---------------------------------------------------------------------------------------- planning
    @property
    def trains(self) -> bool:
        """Whether this run fine-tunes before it evaluates (``task.train``; MLDR derives it from its setting)."""
        return bool(self.settings.train)

    @cached_property
    def lr(self) -> float:
        """``task.lr``; null: the source run's LR, else the model's Table 9 DPR LR (tasks without a source name one)."""
        if self.settings.training.lr is not None:
            return float(self.settings.training.lr)
        if self.setup.lineage is not None and self.setup.lineage.lr is not None:
            return self.setup.lineage.lr
        dpr = self.setup.cfg.model.get("dpr") if self.setup.lineage is not None else None
        if dpr is None or dpr.get("lr") is None:
            raise HarnessError(f"task={self.setup.name} needs a learning rate to train: the source has no recorded LR "
                               "and the model config no dpr.lr; set task.lr=<value>.")
        return float(dpr.lr)

    @cached_property
    def resolved(self) -> Resolved:
        """What the task's declarations read."""
        data = training_source(self.settings).describe(self.settings) if self.trains else {}
        return Resolved(self.settings, self.setup.spec, self.setup.precision, self.trains,
                        self.lr if self.trains else None, self.setup.lineage, data)

    def train_keys(self) -> tuple[str, ...]:
        """The keys that count only when the run trains: those of its ``train`` nodes (the trainer's, the data's)."""
        return role_keys(self.settings_class, "train", "task")

    def identity(self, without: Sequence[str] = (), replace: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.setup.identity(declared.STAGES, self.identity_exclude, without=without, replace=replace)

    def run_identity(self) -> dict[str, Any]:
        if self.trains:
            replace_ = {**training_source(self.settings).identity(self.settings), **self.settings.training.identity()}
            if self.settings.training.lr is None:
                replace_["task.lr"] = self.lr
            ident = self.identity(replace=replace_)
        else:
            ident = self.identity(without=self.train_keys() if self.trainer else ())
        for key, value in self.kind.resolved(self.settings).items():
            put(ident, key, value)
        return ident

    @cached_property
    def train_files(self) -> list[Path]:
        """The local files the run's training rows are read from (none when it does not train, or from the hub)."""
        return training_source(self.settings).files(self.settings) if self.trains else []

    def local_files(self, entry: DatasetEntry) -> dict[str, Any] | None:
        """What the local files a cell of ``entry`` reads hold (its dataset's, and the training rows' when the run
        trains): :func:`harness.core.file_hash.describe`, or None (hub data only)."""
        s = self.settings
        found = entry_files(entry, s.data_dir, s.split, KINDS.lookup)
        paths = [*(found[1] if found else ()), *self.train_files]
        return file_hash.describe(paths, found[0] if found else None) if paths else None

    def data_spec(self, entry: DatasetEntry) -> str:
        """The dataset's definition (:func:`data_spec`) and what its local files (and training files) hold."""
        length = None if self.kind.query_length is None else self.kind.query_length(self.settings, entry)
        return with_files(data_spec(self.settings, entry, length), self.local_files(entry))

    def data_free_key(self, ident: dict[str, Any]) -> str | None:
        """Where the training files' content is in the run id: the identity without it (:class:`Cell`)."""
        if not self.train_files or not training_source(self.settings).hashes_files:
            return None
        return data_free_key(ident, list(training_source(self.settings).identity(self.settings)), self.train_files)

    def cells(self) -> list[Cell]:
        ident = self.run_identity()
        rid = results.run_id(ident, self.kind.readable(self.resolved))
        free = self.data_free_key(ident)
        return [Cell(e.name, rid, ident, self.data_spec(e), e, files=self.local_files(e), data_free_key=free)
                for e in entries(self.settings)]

    def fitted_lengths(self) -> dict[str, int]:
        """``task.max_length`` (training: ``max_seq_length``) checked from the config before ``load.encoder`` does."""
        if "load.encoder" not in self.setup.spec.stages_for(self.setup.config):
            return {}
        s: Any = self.settings
        out = {"task.max_length": int(s.evaluation.max_length)}
        if self.trains:
            out["task.max_seq_length"] = int(s.training.max_seq_length)
        return out

    def work(self, mode: str, skip: Sequence[str] = ()) -> Work:
        """Evaluation tokens of the datasets not in ``skip`` (a shard's share; the merge: none), plus the training
        source's when the run trains; documents at their encoded length (``task.document_length`` or ``max_length``)."""
        from harness.data.sizes import retrieval_work

        s: Any = self.settings
        length = int(getattr(s, "document_length", None) or s.evaluation.max_length)
        shards = s.sharding
        k = shards.shards if isinstance(shards.shards, int) else 1
        w = retrieval_work([d for d in s.datasets if d not in skip], length, s.data_dir, s.catalog,
                           memory=host_memory(s, k))
        if shards.shard_launcher == "external" and k > 1:
            # a shard job encodes 1/K of the corpora (queries: each shard searches with every query); the merge reads
            return Work(short=w.short / k, long=w.long / k, host=w.host) if shards.shard is not None else Work()
        if mode == "report" or not self.trains:
            return w
        w += training_source(s).work(s)
        return w

    # ---------------------------------------------------------------------------------------- the plan
    def stages(self, cells: Sequence[Cell]) -> RetrievalStages:
        """What the stages of this run read, resolved (beyond the plan's own values)."""
        train_dir = None
        if self.trainer and self.trains and cells:   # where its training is kept: a run that trains has one
            key = code_of(declared.STAGES, self.trainer).key(cells[0], self.train_keys())
            train_dir = self.setup.layout.trained_model(self.setup.name, self.setup.model.name, key)
        every = [m for e in entries(self.settings) for m in [e, *e.members.values()]]
        lengths = None if self.kind.query_length is None else {
            m.name: int(self.kind.query_length(self.settings, m)) for m in every}
        return RetrievalStages(
            load=str(self.stage("load")), retrieve=str(self.stage("retrieve")), train=self.trainer,
            source=training_source(self.settings) if self.trains else None, train_dir=train_dir,
            # the corpus cache key: the run less the keys that change the ranking, not the encoding (``search`` nodes)
            cache_run=drop(cells[0].identity, role_keys(self.settings_class, "search", "task")) if cells else {},
            query_lengths=lengths,
            member_specs={m.name: self.data_spec(m) for e in every for m in e.members.values()},
            train_files=file_hash.files_fingerprint(self.train_files) if self.train_files else None,
        )

    def runplan(self, *, mode: str = "run", skip: Sequence[str] = (), round: int = 0) -> RunPlan[Any, RetrievalStages]:
        """The run's :class:`~harness.tasks.runplan.RunPlan` (one round), its work estimate for a ``mode`` job."""
        su, s = self.setup, self.settings
        cells = self.cells() if round == 0 else []
        details = dict(self.kind.details(self.resolved))
        if self.setup.lineage is not None:
            details["lineage"] = self.setup.lineage.record()
        part = s.sharding.shard is not None   # a shard job (task.shard): one shard, no record
        return RunPlan(
            task=su.name, model_name=su.model.name, model=su.model, device=su.device, layout=su.layout,
            config=su.config, overwrite=bool(su.cfg.overwrite), save_run=bool(su.cfg.get("save_run")), lineage=self.setup.lineage, settings=s,
            precision=su.precision, lr=self.lr if self.trains else None, trains=self.trains,
            # what anything new a stage creates starts from: task.train_seed when the run trains, else seed
            seed=s.training.train_seed if self.trains else int(su.cfg.seed), cells=cells, later=False,
            header=su.header(hyperparameters=self.kind.hyperparameters(self.resolved), details=details),
            work=self.work(mode, skip), compute=compute.run_part if part else compute.run, part=part, check=check,
            fitted=self.fitted_lengths(), weights=su.weights_dir(), stages=self.stages(cells))


def check(plan: RunPlan[Any, RetrievalStages], todo: Sequence[Cell]) -> None:
    """Before any model loads: the model's checks (:func:`~harness.tasks.runplan.check_model`), every dataset's
    local files or its pinned hub copy reachable (else one error naming each local alternative); then the
    training data, when this run still has to train; a PLAID build's memory, from the corpus alone."""
    from harness.tasks.retrieval.plaid_check import check_plaid

    check_model(plan, todo)
    s = plan.settings
    if plan.trains and plan.stages.train is None:
        raise HarnessError(f"task={plan.task} trains (task.train=true) but its spec lists no train.* stage: add one "
                           "(e.g. train.dense) to spec.stages, or set task.train=false.")
    check_entries([cell.payload for cell in todo], s.data_dir, s.split)
    check_plaid(plan, todo)
    if plan.trains and (plan.overwrite or not compute.trained(plan)):
        plan.stages.source.check(s)
