"""``task=mldr``: long-document retrieval as the paper ran it (section 3.1.3): MLDR English, nDCG@10.

- ``task.setting=ood`` (out-of-domain): the DPR model ``task=beir`` trained on MS MARCO (``task.source``: the
  selected run, a run id, or ``model.path`` as is), evaluated with no further training.
- ``task.setting=id`` (in-domain): that model fine-tuned further on MLDR's English train set (``Shitao/MLDR``
  ``mldr-v1.0-en/train.jsonl.gz``, or a local folder in MLDR's layout), then evaluated. The paper gives no
  recipe: loss, learning rate (default: the source run's, i.e. the selected DPR LR), epochs, sequence length,
  batch and accumulation are config and recorded.

Documents are encoded up to ``task.max_length`` (the model's own maximum by default: 8,192 for ModernBERT and
GTE-en-MLM, 512 for BERT/RoBERTa/DeBERTa); a length above the model's positions is refused before any work.
Every record names its setting, retriever and training lineage; sets that record where each query's answer starts
in its document (the long-document set of source files) also get nDCG@10 before and after the truncation point.

The retriever is the dense one of :class:`~harness.families.beir.DenseFamily`; everything MLDR-specific here
(settings, lineage, data, records, leaderboard columns) is independent of it, so a family that overrides
``load_model``/``retriever`` (a multi-vector model) reuses it, and its records land in ``mldr-en/ood-colbert``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from harness.errors import HarnessError
from harness.evaluation.plaid_index import PlaidSettings
from harness.families.base import Cell
from harness.families.beir import DenseFamily, DenseSettings
from harness.families.lineage import SOURCE_EXCLUDE, SourceSettings, TrainedSource
from harness.families.retrieval import RetrievalFamily
from harness.typed import choices

if TYPE_CHECKING:

    from harness.data.catalog import DatasetEntry
    from harness.evaluation.retriever import Retriever
    from harness.evaluation.subgroups import QueryGroups
    from harness.results import ResultRecord

log = logging.getLogger(__name__)



@dataclass(kw_only=True)
class MldrTrainData:
    """``task.train_data``: MLDR training rows (query, positive_passages, negative_passages)."""

    source: str = choices("hub", "local")
    hub_path: str
    hub_revision: str
    hub_dir: str
    path: str | None                # local: a folder in MLDR's layout (null: the evaluated dataset's folder)
    split: str
    num_negatives: int              # triplets per query: its first positive with each of its first N negatives
    max_samples: int | None         # seeded sample of training rows (null: all)


@dataclass(kw_only=True)
class MultiVectorEval:
    """``task.multi_vector``: how a ColBERT model (``task.retriever=multi_vector``) is evaluated on MLDR: documents
    up to ``task.max_length`` (capped at the model's positions, recorded), queries of ``query_length`` tokens."""

    query_length: int
    index: str = choices("plaid", "exact")
    plaid: PlaidSettings
    embedding_size: int                # only for a plain encoder (a ColBERT checkpoint keeps its projection)
    maxsim_chunk_tokens: int


@dataclass(kw_only=True)
class MldrSettings(DenseSettings):
    setting: str = choices("ood", "id")
    multi_vector: MultiVectorEval
    subgroups: list[str]            # query groups also scored (harness.evaluation.subgroups: truncation)
    lr: float | None                # null: the source run's LR (the selected DPR LR), else model.dpr.lr
    path: str | None                # datasets=[files]: the source tree read as long documents
    source: SourceSettings
    train_data: MldrTrainData
    #: not a config key here: MLDR trains when task.setting=id (:attr:`MldrFamily.trains`)
    train: bool = field(default=False, init=False)


class MldrFamily(TrainedSource, DenseFamily):
    settings_class = MldrSettings
    identity_exclude: ClassVar[Mapping[str, str]] = {
        **RetrievalFamily.identity_exclude,
        "task.path": "the tree's root is part of the `files` catalog entry (each cell's data spec)",
        **SOURCE_EXCLUDE,
        "task.train": "derived from task.setting (id trains, ood does not)",
    }

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        s = self.settings
        self.multi_vector = s.retriever == "multi_vector"
        if self.multi_vector and (s.setting != "ood" or s.source.task != "colbert"):
            raise HarnessError(
                "task.retriever=multi_vector evaluates the ColBERT model of task=colbert on MLDR out-of-domain, as the "
                "paper did: set task.setting=ood and task.source.task=colbert (the selected ColBERT run; or "
                "task.source.run=null with model.path=<ColBERT checkpoint>)."
            )
        from harness.evaluation.subgroups import SUBGROUPS

        for name in s.subgroups:
            SUBGROUPS.lookup(name)
        self._model: Any = None
        self._train_stats: dict[str, Any] = {}

    # ------------------------------------------------------------------------------------------- identity
    @property
    def trains(self) -> bool:
        """In-domain (``task.setting=id``) fine-tunes on MLDR's train set; out-of-domain evaluates as is."""
        return self.settings.setting == "id"

    @property
    def search_only_keys(self) -> tuple[str, ...]:   # type: ignore[override]
        """Keys that change the ranking, not the corpus encoding (left out of the embedding cache key)."""
        if self.multi_vector:   # the corpus token embeddings do not depend on how they are searched
            return ("task.top_k", "task.similarity", "task.multi_vector.index", "task.multi_vector.plaid",
                    "task.multi_vector.query_length")
        return DenseFamily.search_only_keys

    @property
    def lr(self) -> float:
        return self.effective_lr

    @property
    def effective_lr(self) -> float:
        """``task.lr``, else the source run's LR (the selected DPR LR), else the model's Table 9 DPR LR."""
        if self.settings.lr is not None:
            return float(self.settings.lr)
        if self.lineage.lr is not None:
            return self.lineage.lr
        dpr = self.cfg.model.get("dpr")
        if dpr is None or dpr.get("lr") is None:
            raise HarnessError("task.setting=id needs a learning rate: the source has no recorded LR and the model "
                               "config no dpr.lr; set task.lr=<value>.")
        return float(dpr.lr)

    def run_identity(self) -> dict[str, Any]:
        unused = () if self.multi_vector else ("task.multi_vector",)   # a dense run does not read it
        if self.trains:
            return self.identity(exclude=unused, replace={"task.lr": self.effective_lr, **self.training_identity()})
        return self.identity(exclude=(*self.training_keys, *unused))

    def readable(self) -> dict[str, Any]:
        s = self.settings
        return {"setting": s.setting + ("-colbert" if self.multi_vector else ""),
                **({"lr": self.effective_lr} if self.trains else {})}

    @property
    def train_source(self) -> Any:
        """Where the in-domain training rows come from (:mod:`harness.families.mldr_sources`)."""
        from harness.families.mldr_sources import MLDR_SOURCES

        return MLDR_SOURCES.lookup(self.settings.train_data.source)

    def training_identity(self) -> dict[str, Any]:
        return self.train_source.identity(self)

    def hyperparameters(self) -> dict[str, Any]:
        s = self.settings
        hp = RetrievalFamily.hyperparameters(self) | {"setting": s.setting, "source_run": self.lineage.run_id}
        if not self.trains:
            return hp
        d = s.train_data
        data = {"source": d.source, "split": d.split, "num_negatives": d.num_negatives, "max_samples": d.max_samples,
                **self.train_source.describe(self)}
        lr = self.effective_lr
        train = {"data": data, "lr": lr, "epochs": s.epochs, "warmup_ratio": s.warmup_ratio, "batch_size": s.batch_size,
                 "gradient_accumulation_steps": s.gradient_accumulation_steps, "loss": s.loss,
                 "mini_batch_size": s.mini_batch_size, "max_seq_length": s.max_seq_length, "seed": s.train_seed}
        return hp | {"train": train, "lr": lr, "epochs": s.epochs, "batch_size": s.batch_size,
                     "gradient_accumulation_steps": s.gradient_accumulation_steps, "seed": s.train_seed}

    def new_record(self, cell: Cell, **fields: Any) -> ResultRecord:
        rec = super().new_record(cell, **fields)
        rec.details.setdefault("setting", self.settings.setting)   # failed records too: the right column
        return rec

    # ------------------------------------------------------------------------------------------- running
    def load_model(self) -> tuple[Any, dict[str, Any]]:
        model, block = super().load_model()
        self._model = model
        return model, block

    def load_weights(self, spec: Any) -> tuple[Any, dict[str, Any]]:
        if not self.multi_vector:
            return super().load_weights(spec)
        from harness.evaluation.colbert_model import load_colbert

        return load_colbert(spec, device=self.device, embedding_size=self.settings.multi_vector.embedding_size,
                            seed=int(self.cfg.seed))

    def check_lengths(self, model: Any) -> None:
        if not self.multi_vector:   # ColBERT: document length capped at the positions and recorded, as the paper
            super().check_lengths(model)

    def check_training_data(self) -> None:
        """In-domain training: the hub reachable for the hub set, or the local folder's train file present."""
        self.train_source.check(self)

    def train(self, model: Any, todo: Sequence[Cell]) -> dict[str, Any] | None:
        if not self.trains:
            return None
        info = super().train(model, todo)
        assert info is not None
        return {**info, "fine_tuned_from": self.lineage.record(), "data": self._train_stats or info.get("data")}

    def training_data(self, model: Any):
        from harness.data import mldr

        s, d = self.settings, self.settings.train_data
        rows = self.train_source.rows(self)
        ds, self._train_stats = mldr.triplets(rows, d.num_negatives, d.max_samples, s.train_seed)
        log.info("MLDR training data: %s", self._train_stats)
        return ds

    def document_length(self, retriever: Retriever) -> int:
        """The length documents are encoded at (ColBERT: capped at the model's positions, as the retriever says)."""
        return int(retriever.describe().get("document_length", self.settings.max_length))

    def subgroups(self, retriever: Retriever) -> list[QueryGroups]:
        from harness.evaluation.subgroups import SUBGROUPS

        tokenizer = self._model[0].tokenizer
        return [SUBGROUPS[name](tokenizer, self.document_length(retriever)) for name in self.settings.subgroups]

    def evaluate_entry(self, cell: Cell, entry: DatasetEntry, retriever: Retriever, block: dict[str, Any],
                       member_of: str | None = None) -> ResultRecord:
        rec = super().evaluate_entry(cell, entry, retriever, block, member_of)
        rec.details["max_length"] = self.document_length(retriever)
        return rec


