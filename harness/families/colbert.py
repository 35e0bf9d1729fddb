"""``task=colbert``: multi-vector (ColBERT) retrieval as the paper ran it (section 3.1.2, appendix E.2): a PyLate
ColBERT on the encoder, trained by KL distillation of teacher scores on MS MARCO (``lightonai/ms-marco-en-bge``),
then nDCG@10 on the 15 BEIR sets through a PLAID index (or exact MaxSim)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

from harness import layout, results
from harness.console import step
from harness.data.catalog import DatasetEntry
from harness.errors import HarnessError
from harness.evaluation.multivector import MultiVectorSettings
from harness.evaluation.plaid_index import PlaidSettings
from harness.evaluation.retriever import Retriever
from harness.families.base import Cell
from harness.families.retrieval import RetrievalFamily, RetrievalSettings
from harness.typed import choices

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class KdData:
    """Where the distillation data comes from (``task.train_data``); see :mod:`harness.data.kd`."""

    source: str = choices("hub", "file")
    hub_path: str
    hub_revision: str | None
    max_samples: int | None
    n_ways: int
    path: str | None
    queries_path: str | None
    documents_path: str | None


@dataclass(kw_only=True)
class ColbertSettings(RetrievalSettings):
    # training (KD)
    lr: float
    epochs: float
    warmup_ratio: float
    batch_size: int
    gradient_accumulation_steps: int
    train_seed: int
    train_query_length: int
    train_document_length: int
    normalize_scores: bool
    train_data: KdData
    # the model and evaluation
    embedding_size: int
    query_length: int
    query_lengths: dict[str, int]
    query_length_recipe: str = choices("authors_code", "pylate_beir")
    query_length_recipes: dict[str, dict[str, int]]
    document_length: int
    index: str = choices("plaid", "exact", "voyager")
    plaid: PlaidSettings
    maxsim_chunk_tokens: int
    plaid_max_memory_gb: float


#: DPR keys that mean nothing here, and the ColBERT key to use instead
_NOT_HERE = {"max_length": "task.document_length / task.query_length", "corpus_chunk_size": "task.maxsim_chunk_tokens"}


class ColbertFamily(RetrievalFamily):
    settings_class = ColbertSettings
    identity_exclude: ClassVar[Mapping[str, str]] = {
        **RetrievalFamily.identity_exclude,
        "task.maxsim_chunk_tokens": "how exact MaxSim is chunked",
        "task.plaid_max_memory_gb": "a limit that refuses a plan, never changes a number",
        "task.query_lengths": "each cell's own query length is part of its data spec",
        "task.query_length_recipes": "the recipe in use (task.query_length_recipe) is in the identity; each cell's "
                                     "own query length is part of its data spec",
    }
    training_keys = ("task.lr", "task.epochs", "task.warmup_ratio", "task.batch_size",
                     "task.gradient_accumulation_steps", "task.train_seed", "task.train_query_length",
                     "task.train_document_length", "task.normalize_scores", "task.train_data")
    #: keys that change the ranking but not the corpus token embeddings (left out of their cache key)
    search_only_keys = ("task.top_k", "task.index", "task.plaid", "task.query_length", "task.query_length_recipe")

    def __init__(self, cfg: Any) -> None:
        for key, instead in _NOT_HERE.items():
            if key in cfg.task:
                raise HarnessError(f"task.{key} is a DPR setting; task=colbert uses {instead}.")
        super().__init__(cfg)

    # ---------------------------------------------------------------------------------------- planning
    def readable(self) -> dict[str, Any]:
        s = self.settings
        return {"lr": float(s.lr), "index": s.index} if self.trains else {"eval": self.precision, "index": s.index}

    def run_identity(self) -> dict[str, Any]:
        ident = super().run_identity()
        if self.settings.index == "plaid":   # auto resolves per machine, and the two backends differ
            from harness.evaluation.plaid_index import plaid_backend

            ident.setdefault("task", {}).setdefault("plaid", {})["backend"] = plaid_backend(self.settings.plaid.backend)
        return ident

    @property
    def kd_source(self) -> Any:
        """Where the distillation data comes from (:mod:`harness.families.kd_sources`)."""
        from harness.families.kd_sources import KD_SOURCES

        return KD_SOURCES.lookup(self.settings.train_data.source)

    def training_identity(self) -> dict[str, Any]:
        return self.kd_source.identity(self.settings.train_data)

    def query_length_of(self, entry: DatasetEntry) -> int:
        """``task.query_lengths[<dataset>]`` (a composite's member: its own, else the composite's), else
        ``task.query_length``."""
        lengths = self.settings.query_lengths
        parent = (entry.local or "").split("/")[0] if "/" in (entry.local or "") else None
        return int(lengths.get(entry.name, lengths.get(parent or "", self.settings.query_length)))

    def data_spec(self, entry: DatasetEntry) -> str:
        return results.stable_hash({"data": super().data_spec(entry), "query_length": self.query_length_of(entry)})

    def hyperparameters(self) -> dict[str, Any]:
        s = self.settings
        hp: dict[str, Any] = {
            "train": None, "precision": self.precision, "embedding_size": s.embedding_size,
            "query_length": s.query_length, "document_length": s.document_length, "index": s.index,
            "top_k": s.top_k, "max_queries": s.max_queries, "max_docs": s.max_docs,
        }
        if s.index == "plaid":
            from harness.evaluation.plaid_index import plaid_backend

            hp["plaid"] = asdict(s.plaid) | {"backend": plaid_backend(s.plaid.backend)}
        if not self.trains:
            return hp
        d = s.train_data
        data = {"source": d.source, "n_ways": d.n_ways, "max_samples": d.max_samples, **self.kd_source.describe(d)}
        train = {"data": data, "lr": float(s.lr), "epochs": s.epochs, "warmup_ratio": s.warmup_ratio,
                 "batch_size": s.batch_size, "gradient_accumulation_steps": s.gradient_accumulation_steps,
                 "query_length": s.train_query_length, "document_length": s.train_document_length,
                 "loss": "distillation", "normalize_scores": s.normalize_scores, "seed": s.train_seed}
        return hp | {"train": train, "lr": float(s.lr), "epochs": s.epochs, "batch_size": s.batch_size,
                     "gradient_accumulation_steps": s.gradient_accumulation_steps, "seed": s.train_seed}

    # ---------------------------------------------------------------------------------------- running
    def load_model(self) -> tuple[Any, dict[str, Any]]:
        from harness.evaluation.colbert_model import load_colbert

        s = self.settings
        return load_colbert(self.spec, device=self.device, embedding_size=s.embedding_size,
                            seed=s.train_seed if self.trains else int(self.cfg.seed))

    def retriever(self, model: Any, cache_identity: Mapping[str, Any]) -> Retriever:
        from harness.evaluation.multivector import MultiVectorRetriever, token_cache_dir

        s = self.settings
        cache_dir = token_cache_dir(self.cfg.paths.cache, s.embedding_cache)
        return MultiVectorRetriever(model, MultiVectorSettings(
            device=self.device, precision=self.precision, query_length=s.query_length,
            document_length=s.document_length, index=s.index, plaid=s.plaid, batch_tokens=s.batch_tokens,
            max_batch_size=s.max_batch_size, maxsim_chunk_tokens=s.maxsim_chunk_tokens, cache_dir=cache_dir,
            plaid_max_memory_gb=s.plaid_max_memory_gb,
        ), cache_identity)

    def prepare(self, retriever: Retriever, entry: DatasetEntry) -> None:
        engine = getattr(retriever, "engine", retriever)   # a sharded retriever's engine is the MultiVectorRetriever
        engine.query_length = self.query_length_of(entry)

    def fit(self, model: Any, todo: Sequence[Cell], out_dir: Path) -> dict[str, Any]:
        """KD training. Its folder is keyed by :meth:`training_key` (index, top-k, query length and evaluation
        document length do not change it, so runs that differ only in those share one trained model)."""
        from harness.evaluation.colbert_model import capped_length
        from harness.models import usable_positions
        from harness.training.late_interaction import KdTrainingConfig, train_kd

        s = self.settings
        train_ds, facts = self.training_data()
        limit = usable_positions(model)
        tcfg = KdTrainingConfig(
            lr=float(s.lr), epochs=s.epochs, warmup_ratio=s.warmup_ratio, batch_size=s.batch_size,
            gradient_accumulation_steps=s.gradient_accumulation_steps, seed=s.train_seed,
            query_length=capped_length(s.train_query_length, limit),
            document_length=capped_length(s.train_document_length, limit), normalize_scores=s.normalize_scores,
            precision=self.precision, use_cpu=self.device == "cpu",
        )
        return {**train_kd(model, train_ds, tcfg, out_dir, self.tracker(todo[0])), "data": facts}

    def train_dir(self, todo: Sequence[Cell]) -> Path:
        """Where this training's model goes (``train_done.json`` marks it finished)."""
        return layout.trained_model_dir(str(self.cfg.paths.outputs), self.name, self.model_name, self.training_key(todo))

    def load_trained(self, model_dir: str) -> Any:
        from pylate.models import ColBERT

        return ColBERT(model_dir, device=self.device)

    def check_training_data(self) -> None:
        """The KD file (and its queries/documents files) exist, or the hub is reachable for the hub set."""
        self.kd_source.check(self.settings.train_data)

    def training_key(self, todo: Sequence[Cell]) -> str:
        """Hash of what the trained weights depend on: the run identity without its evaluation-only task keys."""
        ident = dict(todo[0].identity)
        task = ident.get("task", {})
        kept = {k: task[k] for k in (*(t.split(".", 1)[1] for t in self.training_keys), "embedding_size", "name")
                if k in task}
        return "train-" + results.stable_hash({**ident, "task": kept}, length=16)

    def training_data(self):
        d, source = self.settings.train_data, self.kd_source
        if d.n_ways < 1:
            raise HarnessError(f"task.train_data.n_ways must be >= 1, got {d.n_ways}.")
        with step(f"KD data: reading, validating and joining {source.name(d)}",
                  starting="every query and document id is checked") as done:
            data, facts = source.load(d, self.settings.train_seed)
            done.outcome = f"{len(data):,} samples, {d.n_ways}-way"
        return data, facts

