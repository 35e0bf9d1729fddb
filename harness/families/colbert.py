"""``task=colbert``: multi-vector (ColBERT) retrieval as the paper ran it (section 3.1.2, appendix E.2): a PyLate
ColBERT on the encoder (``load.colbert``), trained by KL distillation of teacher scores on MS MARCO
(``lightonai/ms-marco-en-bge``; ``train.kd``), then nDCG@10 on the 15 BEIR sets through a PLAID index (or exact
MaxSim; ``retrieve.multi_vector``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from harness.data.catalog import DatasetEntry
from harness.errors import HarnessError
from harness.evaluation.settings import MultiVectorEval
from harness.families import beir
from harness.families.kd_sources import KD_SOURCES
from harness.families.retrieval import Resolved, RetrievalKind, RetrievalSettings
from harness.registry import Registry
from harness.training.settings import HubRows, KdTraining, TrainRows
from harness.typed import choices, count, excluded, flat


@dataclass(kw_only=True)
class KdData(TrainRows):
    """Teacher scores to distil (:mod:`harness.data.kd`): the hub's, or a local file's."""

    sources: ClassVar[Registry[Any]] = KD_SOURCES
    source: str = choices("hub", "file")
    n_ways: int = count(2)              # a query's documents: one alone gives the KL loss nothing to compare
    max_samples: int | None = count(null="every row")
    hub: HubRows = flat()
    path: str | None
    queries_path: str | None
    documents_path: str | None


@dataclass(kw_only=True)
class QueryLengths:
    """Per-dataset query lengths by recipe: which recipe changes the ranking (not the corpus encoding); each cell's
    own length is part of its data spec."""

    role: ClassVar[str] = "search"
    query_length_recipe: str = choices("authors_code", "pylate_beir")
    query_length_recipes: dict[str, dict[str, int]] = excluded(
        "the recipe in use (task.query_length_recipe) is in the identity; each cell's own query length is part of "
        "its data spec")
    query_lengths: dict[str, int] = count(excluded="each cell's own query length is part of its data spec")


@dataclass(kw_only=True)
class ColbertSettings(RetrievalSettings):
    """task=colbert's stages: ``train.kd`` (its training node and data), ``load.colbert`` and
    ``retrieve.multi_vector`` (the multi-vector evaluation at the task's top level, per-dataset query lengths)."""

    training: KdTraining = flat()
    train_data: KdData
    multi_vector: MultiVectorEval = flat()
    queries: QueryLengths = flat()
    document_length: int = count()


#: DPR keys that mean nothing here, and the ColBERT key to use instead
_NOT_HERE = {"max_length": "task.document_length / task.query_length", "corpus_chunk_size": "task.maxsim_chunk_tokens"}


def check(task_config: Any) -> None:
    """A DPR key here is named with its ColBERT counterpart (before the typed check calls it unknown)."""
    for key, instead in _NOT_HERE.items():
        if key in task_config:
            raise HarnessError(f"task.{key} is a DPR setting; task=colbert uses {instead}.")


def query_length(s: ColbertSettings, entry: DatasetEntry) -> int:
    """``task.query_lengths[<dataset>]`` (a composite's member: its own, else the composite's), else
    ``task.query_length``."""
    lengths = s.queries.query_lengths
    parent = (entry.local or "").split("/")[0] if "/" in (entry.local or "") else None
    return int(lengths.get(entry.name, lengths.get(parent or "", s.multi_vector.search.query_length)))


def readable(r: Resolved) -> dict[str, Any]:
    index = r.settings.multi_vector.search.index
    return {"lr": r.lr, "index": index} if r.trains else {"eval": r.precision, "index": index}


def resolved(s: ColbertSettings) -> dict[str, Any]:
    """PLAID's backend (``auto`` resolves per machine, and the two backends differ); Voyager's constants (the
    authors' index and search depth: a change to them changes the numbers, so it changes the run id)."""
    from harness.evaluation.settings import plaid_backend, voyager_identity

    search = s.multi_vector.search
    if search.index == "voyager":
        return {"task.voyager": voyager_identity("voyager")}
    if search.index != "plaid":
        return {}
    return {"task.plaid.backend": plaid_backend(search.plaid.backend)}


def hyperparameters(r: Resolved) -> dict[str, Any]:
    s = r.settings
    mv = s.multi_vector
    hp: dict[str, Any] = {
        "train": None, "precision": r.precision, "embedding_size": mv.embedding_size,
        "query_length": mv.search.query_length, "document_length": s.document_length, "index": mv.search.index,
        "top_k": s.ranking.top_k, "max_queries": s.max_queries, "max_docs": s.max_docs,
    }
    if mv.search.index == "plaid":
        from harness.evaluation.settings import plaid_backend

        hp["plaid"] = asdict(mv.search.plaid) | {"backend": plaid_backend(mv.search.plaid.backend)}
    if not r.trains:
        return hp
    d, t = s.train_data, s.training
    data = {"source": d.source, "n_ways": d.n_ways, "max_samples": d.max_samples, **r.data}
    train = {"data": data, "lr": r.lr, "epochs": t.epochs, "warmup_ratio": t.warmup_ratio,
             "batch_size": t.batch_size, "gradient_accumulation_steps": t.gradient_accumulation_steps,
             "query_length": t.train_query_length, "document_length": t.train_document_length,
             "loss": "distillation", "normalize_scores": t.normalize_scores, "seed": t.train_seed}
    return hp | {"train": train, **beir.schedule(r)}


COLBERT = RetrievalKind(ColbertSettings, hyperparameters, readable=readable, validate=check,
                        query_length=query_length, resolved=resolved)
