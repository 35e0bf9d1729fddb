"""What every retrieval family shares (beir, code; later colbert, mldr, nanobeir): datasets from a typed
catalog, one cell per dataset under one run id, composite datasets (CQADupstack) as the mean of their members,
and evaluation through a :class:`~harness.evaluation.retriever.Retriever`. A subclass supplies the model, the
optional training, and the retriever."""

from __future__ import annotations

import abc
import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from harness import layout, results
from harness.data.catalog import DatasetEntry, check_entries, load_entry, resolve_entries
from harness.data.retrieval import RetrievalDataset, subset
from harness.errors import HarnessError, TrainingDivergedError
from harness.evaluation.ir_metrics import METRICS
from harness.evaluation.retriever import Retriever, evaluate_per_query, search_width
from harness.evaluation.shards import LAUNCHERS, ShardedRetriever, ShardSettings
from harness.evaluation.subgroups import QueryGroups
from harness.families.base import Cell, Family
from harness.identity import drop
from harness.results import ResultRecord
from harness.typed import choices

log = logging.getLogger(__name__)

#: the cutoff of every retrieval family's main metric (nDCG@10): task.top_k may not be smaller
MAIN_CUTOFF = 10

#: the marker of a finished training in its output folder (its content: the training facts of the record)
TRAIN_DONE = "train_done.json"



@dataclass(kw_only=True)
class RetrievalSettings:
    """Keys every retrieval task config has (conf/task/beir.yaml documents each). No defaults here: each task's YAML
    writes its values, once (tests/test_defaults.py)."""

    name: str
    datasets: list[str]
    catalog: dict[str, Any]
    data_dir: str | None
    split: str | None
    strict_qrels: bool
    max_queries: int | None
    max_docs: int | None
    train: bool
    top_k: int
    batch_tokens: int
    max_batch_size: int
    embedding_cache: bool
    shards: int | str                   # conf/sharding/default.yaml (harness.evaluation.shards)
    shard_tokens: int
    shard: int | None
    shard_launcher: str = choices(*LAUNCHERS)

    def __post_init__(self) -> None:
        """Values no run can score right, refused before any work (typed checks come first)."""
        if self.top_k < MAIN_CUTOFF:
            raise HarnessError(f"task.top_k={self.top_k} is below {MAIN_CUTOFF}, the cutoff of the main metric "
                               f"(nDCG@{MAIN_CUTOFF}): set task.top_k to at least {MAIN_CUTOFF} (1000 reports every "
                               "metric; a smaller top_k leaves out the metrics whose cutoff exceeds it)")
        if self.shard is not None and (self.shard < 0 or (isinstance(self.shards, int) and self.shard >= self.shards)):
            upper = f"< task.shards={self.shards}" if isinstance(self.shards, int) else "a shard of the plan"
            raise HarnessError(f"task.shard={self.shard} is not a shard of this run: it must be >= 0 and {upper} "
                               "(shards are numbered from 0)")


class RetrievalFamily(Family):
    """Plan -> (train) -> evaluate each dataset -> one record per dataset (and per composite member)."""

    identity_exclude: ClassVar[Mapping[str, str]] = {
        "task.datasets": "which datasets to evaluate: each one is its own cell of the same run",
        "task.catalog": "each cell's own catalog entry is part of its data spec",
        "task.data_dir": "part of each cell's data spec",
        "task.strict_qrels": "part of each cell's data spec",
        "task.batch_tokens": "how texts are batched for the encoder",
        "task.max_batch_size": "how texts are batched for the encoder",
        "task.corpus_chunk_size": "how the search is chunked",
        "task.embedding_cache": "whether corpus embeddings are cached",
        "task.shards": "how the corpus is split for encoding: the merged ranking is the unsharded one",
        "task.shard_tokens": "how the corpus is split for encoding (task.shards=auto)",
        "task.shard": "which shard a shard job computes",
        "task.shard_launcher": "where the shards run",
    }
    metrics: ClassVar[tuple[str, ...] | None] = METRICS
    #: task keys that only matter when ``task.train`` is true (left out of an evaluation-only run's identity)
    training_keys: ClassVar[tuple[str, ...]] = ()
    #: identity keys that change the ranking but not the corpus encoding (left out of the cache key)
    search_only_keys: ClassVar[tuple[str, ...]] = ("task.top_k",)

    # ---------------------------------------------------------------------------------------- planning
    def entries(self) -> list[DatasetEntry]:
        return resolve_entries(list(self.settings.datasets), self.settings.catalog)

    def training_identity(self) -> dict[str, Any]:
        """Replacements for the run identity when training (e.g. a data file's path -> its content hash)."""
        return {}

    def readable(self) -> dict[str, Any]:
        return {"eval": self.precision}

    @property
    def trains(self) -> bool:
        """Whether this run fine-tunes before it evaluates (``task.train``; MLDR derives it from its setting)."""
        return bool(self.settings.train)

    def run_identity(self) -> dict[str, Any]:
        if self.trains:
            return self.identity(replace=self.training_identity())
        return self.identity(exclude=self.training_keys)

    def data_spec(self, entry: DatasetEntry) -> str:
        """Hash of what defines a dataset's data (catalog entry, local folder, split, qrels strictness)."""
        s = self.settings
        return results.stable_hash({
            "entry": entry.definition(), "data_dir": str(Path(s.data_dir).expanduser().resolve()) if s.data_dir else None,
            "split": s.split, "strict_qrels": s.strict_qrels,
        })

    def cells(self) -> list[Cell]:
        ident = self.run_identity()
        rid = results.run_id(ident, self.readable())
        return [Cell(e.name, rid, ident, self.data_spec(e), e) for e in self.entries()]

    def hyperparameters(self) -> dict[str, Any]:
        """The settings a record shows (selection and the leaderboard read them; the run id hashes more)."""
        s = self.settings
        return {"train": None, "precision": self.precision, "max_length": s.max_length, "top_k": s.top_k,
                "max_queries": s.max_queries, "max_docs": s.max_docs}

    def new_record(self, cell: Cell, **fields: Any) -> ResultRecord:
        fields.setdefault("hyperparameters", self.hyperparameters())
        return super().new_record(cell, **fields)

    # ---------------------------------------------------------------------------------------- checking
    def check(self, todo: Sequence[Cell]) -> None:
        """Before any model is loaded: every dataset's local folder and files are there, or the hub is reachable
        for its pinned copy (else one error naming each local alternative); then the training data, when this run
        still has to train."""
        super().check(todo)
        s = self.settings
        check_entries([cell.payload for cell in todo], s.data_dir, s.split)
        if self.trains and (self.cfg.overwrite or not self.trained(todo)):
            self.check_training_data()

    def train_dir(self, todo: Sequence[Cell]) -> Path:
        """Where this run's trained model goes (``train_done.json`` marks it finished)."""
        return layout.trained_model_dir(str(self.cfg.paths.outputs), self.name, self.model_name, todo[0].run_id)

    def trained(self, todo: Sequence[Cell]) -> bool:
        """This run's training already finished (its model is reused, its data not read)."""
        return (self.train_dir(todo) / TRAIN_DONE).exists()

    def load_trained(self, model_dir: str) -> Any:
        """A model this family trained, from its folder (to reuse a finished training)."""
        raise NotImplementedError(f"{type(self).__name__} does not train")

    def check_training_data(self) -> None:
        """The training data is where the config says (a file exists, the hub is reachable): no parsing."""

    # ---------------------------------------------------------------------------------------- running
    @abc.abstractmethod
    def load_model(self) -> tuple[Any, dict[str, Any]]:
        """(model, the record's model block). Fails fast, naming the local alternative, when the hub is needed
        and unreachable."""

    def train(self, model: Any, todo: Sequence[Cell]) -> dict[str, Any] | None:
        """Fine-tune ``model`` in place when ``task.train`` (:meth:`fit`), or load this run's finished training
        (unless ``overwrite``; e.g. after a pre-emption during evaluation); returns the training facts for the
        record (``train_s`` and the trained weights' ``fingerprint`` included), or None."""
        if not self.trains:
            return None
        out_dir = self.train_dir(todo)
        marker = out_dir / TRAIN_DONE
        if marker.exists() and not self.cfg.overwrite:
            info = json.loads(marker.read_text())
            log.info("reusing trained model %s", info["model_dir"])
            model.load_state_dict(self.load_trained(info["model_dir"]).state_dict())
            return info
        from harness.models import fingerprint
        from harness.results import atomic_write_json

        t0 = time.perf_counter()
        info = self.fit(model, todo, out_dir)
        info |= {"train_s": time.perf_counter() - t0, "fingerprint": fingerprint(info["model_dir"])}
        atomic_write_json(marker, info)
        return info

    def fit(self, model: Any, todo: Sequence[Cell], out_dir: Path) -> dict[str, Any]:
        """Train ``model`` in place, saving it under ``out_dir``; the training facts (``model_dir`` included)."""
        raise NotImplementedError(f"{type(self).__name__} does not train")

    @abc.abstractmethod
    def retriever(self, model: Any, cache_identity: Mapping[str, Any]) -> Retriever:
        """The retriever that evaluates ``model``; ``cache_identity`` keys its on-disk corpus cache."""

    def run(self, todo: Sequence[Cell]) -> Iterator[ResultRecord]:
        model, block = self.load_model()
        try:
            trained = self.train(model, todo)
        except TrainingDivergedError as exc:
            for cell in todo:
                yield self.failed(cell, exc, model=block, split=self.settings.split or cell.payload.split)
            raise
        if trained:
            block["trained"] = trained
        cache_identity = {
            "run": drop(todo[0].identity, self.search_only_keys),
            "weights": trained["fingerprint"] if trained else block["fingerprint"],
        }
        retriever = self.sharded(self.retriever(model, cache_identity))
        for cell in todo:
            try:
                yield from self.evaluate_cell(cell, retriever, block)
            except HarnessError as exc:
                log.error("%s/%s failed: %s", self.name, cell.dataset, exc)
                yield self.failed(cell, exc, model=block, split=self.settings.split or cell.payload.split)

    def sharded(self, retriever: Retriever) -> Retriever:
        """``retriever``, evaluated shard by shard where ``task.shards`` asks for it (single-vector retrievers and
        exact MaxSim: their engines implement :class:`~harness.evaluation.shards.ShardEngine`)."""
        s = self.settings
        plan = ShardSettings(shards=s.shards, shard_tokens=s.shard_tokens, shard=s.shard,
                             shard_launcher=s.shard_launcher)
        if not plan.sharded:
            return retriever
        if not hasattr(retriever, "search_shard"):
            raise HarnessError(f"task.shards: {type(retriever).__name__} cannot be sharded (single-vector retrieval "
                               "and exact MaxSim can)")
        launch = None
        if plan.shard_launcher == "devices":
            from harness.families.devices import launcher

            launch = launcher(self.cfg)
        return ShardedRetriever(retriever, plan, launch)

    def part_job(self) -> bool:
        """Whether this run is a shard job (``task.shard``): it computes one shard and writes no record."""
        return self.settings.shard is not None

    def run_part(self, todo: Sequence[Cell]) -> None:
        """A shard job: shard ``task.shard`` of every dataset of ``todo`` into the cache (no record, no run lock:
        the shards of one run compute side by side)."""
        model, block = self.load_model()
        trained = self.train(model, todo) if self.trains and self.trained(todo) else None
        if self.trains and trained is None:
            raise HarnessError(f"shard job {self.settings.shard}: this run's training has not finished; shards "
                               "evaluate a trained model")
        cache_identity = {"run": drop(todo[0].identity, self.search_only_keys),
                          "weights": trained["fingerprint"] if trained else block["fingerprint"]}
        retriever = self.sharded(self.retriever(model, cache_identity))
        assert isinstance(retriever, ShardedRetriever)
        for cell in todo:
            entries = list(cell.payload.members.values()) or [cell.payload]
            for entry in entries:
                ds = self.loaded(entry)
                self.prepare(retriever, entry)
                retriever.index(ds)
                queries = list(ds.evaluated_queries().values())
                retriever.run_shard(int(self.settings.shard), queries,
                                    search_width(self.settings.top_k, entry.ignore_identical_ids))

    def evaluate_cell(self, cell: Cell, retriever: Retriever, block: dict[str, Any]) -> Iterator[ResultRecord]:
        """One dataset's record; a composite yields one record per member, then their mean."""
        entry: DatasetEntry = cell.payload
        members = list(entry.members.values())
        if not members:
            yield self.evaluate_entry(cell, entry, retriever, block)
            return
        parts = []
        for m in members:
            mcell = Cell(m.name, cell.run_id, cell.identity, self.data_spec(m), m)
            rec = self.evaluate_entry(mcell, m, retriever, block, member_of=entry.name)
            parts.append(rec)
            yield rec
        yield self.new_record(
            cell, model=block, split=self.settings.split or entry.split,
            metrics={k: float(np.mean([p.metrics[k] for p in parts])) for k in parts[0].metrics},
            details={"members": [m.name for m in members], "aggregate": "mean over members"},
            timings={k: float(sum(p.timings.get(k, 0.0) for p in parts)) for k in parts[0].timings},
            data_fingerprint=results.stable_hash([p.data_fingerprint for p in parts], length=16),
        )

    def subgroups(self, retriever: Retriever) -> list[QueryGroups]:
        """Query groups the evaluation also scores (``task.subgroups`` where a task has it; none by default)."""
        return []

    def load_dataset(self, entry: DatasetEntry) -> RetrievalDataset:
        """One catalog entry's data (a family with its own storage layout overrides this)."""
        s = self.settings
        return load_entry(entry, data_dir=s.data_dir, split=s.split, strict_qrels=s.strict_qrels)

    def prepare(self, retriever: Retriever, entry: DatasetEntry) -> None:
        """Per-dataset retriever settings (ColBERT: the dataset's query length)."""

    def loaded(self, entry: DatasetEntry) -> RetrievalDataset:
        """The entry's data as evaluated (``task.max_queries`` / ``task.max_docs`` applied)."""
        s = self.settings
        ds = self.load_dataset(entry)
        return subset(ds, s.max_queries, s.max_docs) if s.max_queries or s.max_docs else ds

    def evaluate_entry(self, cell: Cell, entry: DatasetEntry, retriever: Retriever, block: dict[str, Any],
                       member_of: str | None = None) -> ResultRecord:
        s = self.settings
        t0 = time.perf_counter()
        self.prepare(retriever, entry)
        ds = self.loaded(entry)
        load_s = time.perf_counter() - t0
        log.info("%s: %d docs, %d queries (%s)", entry.name, len(ds), len(ds.evaluated_queries()), ds.source)
        metrics, details, timings, per_query = evaluate_per_query(
            retriever, ds, top_k=s.top_k, ignore_identical_ids=entry.ignore_identical_ids,
            subgroups=self.subgroups(retriever),
        )
        if member_of:
            details["member_of"] = member_of
        rec = self.new_record(cell, model=block, split=ds.split, metrics=metrics, details=details,
                              timings={"load_s": load_s, **timings}, data_fingerprint=ds.fingerprint)
        if not self.cfg.get("save_run"):
            per_query.run = None
        rec.per_query = per_query
        return rec
