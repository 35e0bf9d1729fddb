"""``task=colbert``: multi-vector (ColBERT) retrieval as the paper ran it (section 3.1.2, appendix E.2): a PyLate
ColBERT on the encoder (``load.colbert``), trained by KL distillation of teacher scores on MS MARCO
(``lightonai/ms-marco-en-bge``; ``train.kd``), then nDCG@10 on the 15 BEIR sets through a PLAID index (or exact
MaxSim; ``retrieve.multi_vector``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from harness.data.catalog import DatasetEntry
from harness.errors import HarnessError
from harness.evaluation.multivector_settings import MultiVectorEval, PlaidSettings
from harness.families.retrieval import RetrievalFamily, RetrievalKind, RetrievalSettings
from harness.typed import choices, count, positive


@dataclass(kw_only=True)
class KdData:
    """Where the distillation data comes from (``task.train_data``); see :mod:`harness.data.kd`."""

    sources: ClassVar[str] = "harness.families.kd_sources:KD_SOURCES"
    source: str = choices("hub", "file")
    hub_path: str
    hub_revision: str | None
    max_samples: int | None = count(null="every row")
    n_ways: int = count(2)              # a query's documents: one alone gives the KL loss nothing to compare
    path: str | None
    queries_path: str | None
    documents_path: str | None


@dataclass(kw_only=True)
class ColbertSettings(RetrievalSettings):
    #: where the multi-vector keys are (retrieve.multi_vector's search-only keys): the task's top level
    multi_vector_node: ClassVar[str] = "task"
    # training (KD)
    train_query_length: int = count()
    train_document_length: int = count()
    normalize_scores: bool
    train_data: KdData
    # the model and evaluation
    embedding_size: int = count()
    query_length: int = count()
    query_lengths: dict[str, int] = count()
    query_length_recipe: str = choices("authors_code", "pylate_beir")
    query_length_recipes: dict[str, dict[str, int]]
    document_length: int = count()
    index: str = choices("plaid", "exact", "voyager")
    plaid: PlaidSettings
    maxsim_chunk_tokens: int = count()
    plaid_max_memory_gb: float = positive()

    @property
    def multi_vector(self) -> MultiVectorEval:
        """The evaluation keys as ``retrieve.multi_vector`` and ``load.colbert`` read them."""
        return MultiVectorEval(query_length=self.query_length, index=self.index, plaid=self.plaid,
                               embedding_size=self.embedding_size, maxsim_chunk_tokens=self.maxsim_chunk_tokens,
                               plaid_max_memory_gb=self.plaid_max_memory_gb)


#: DPR keys that mean nothing here, and the ColBERT key to use instead
_NOT_HERE = {"max_length": "task.document_length / task.query_length", "corpus_chunk_size": "task.maxsim_chunk_tokens"}


def check(task_config: Any) -> None:
    """A DPR key here is named with its ColBERT counterpart (before the typed check calls it unknown)."""
    for key, instead in _NOT_HERE.items():
        if key in task_config:
            raise HarnessError(f"task.{key} is a DPR setting; task=colbert uses {instead}.")


def query_length(task: RetrievalFamily, entry: DatasetEntry) -> int:
    """``task.query_lengths[<dataset>]`` (a composite's member: its own, else the composite's), else
    ``task.query_length``."""
    lengths = task.settings.query_lengths
    parent = (entry.local or "").split("/")[0] if "/" in (entry.local or "") else None
    return int(lengths.get(entry.name, lengths.get(parent or "", task.settings.query_length)))


def readable(task: RetrievalFamily) -> dict[str, Any]:
    s = task.settings
    return {"lr": float(s.lr), "index": s.index} if task.trains else {"eval": task.precision, "index": s.index}


def resolved(task: RetrievalFamily) -> dict[str, Any]:
    """PLAID's backend (``auto`` resolves per machine, and the two backends differ); Voyager's constants (the
    authors' index and search depth: a change to them changes the numbers, so it changes the run id)."""
    from harness.evaluation.multivector_settings import plaid_backend, voyager_identity

    if task.settings.index == "voyager":
        return {"task.voyager": voyager_identity("voyager")}
    if task.settings.index != "plaid":
        return {}
    return {"task.plaid.backend": plaid_backend(task.settings.plaid.backend)}


def hyperparameters(task: RetrievalFamily) -> dict[str, Any]:
    s = task.settings
    hp: dict[str, Any] = {
        "train": None, "precision": task.precision, "embedding_size": s.embedding_size,
        "query_length": s.query_length, "document_length": s.document_length, "index": s.index,
        "top_k": s.top_k, "max_queries": s.max_queries, "max_docs": s.max_docs,
    }
    if s.index == "plaid":
        from harness.evaluation.multivector_settings import plaid_backend

        hp["plaid"] = asdict(s.plaid) | {"backend": plaid_backend(s.plaid.backend)}
    if not task.trains:
        return hp
    d = s.train_data
    data = {"source": d.source, "n_ways": d.n_ways, "max_samples": d.max_samples,
            **task.training_source.describe(task)}
    train = {"data": data, "lr": float(s.lr), "epochs": s.epochs, "warmup_ratio": s.warmup_ratio,
             "batch_size": s.batch_size, "gradient_accumulation_steps": s.gradient_accumulation_steps,
             "query_length": s.train_query_length, "document_length": s.train_document_length,
             "loss": "distillation", "normalize_scores": s.normalize_scores, "seed": s.train_seed}
    return hp | {"train": train, "lr": float(s.lr), "epochs": s.epochs, "batch_size": s.batch_size,
                 "gradient_accumulation_steps": s.gradient_accumulation_steps, "seed": s.train_seed}


COLBERT = RetrievalKind(
    ColbertSettings, hyperparameters, readable=readable, validate=check, query_length=query_length, resolved=resolved,
    identity_exclude={
        "task.maxsim_chunk_tokens": "how exact MaxSim is chunked",
        "task.plaid_max_memory_gb": "a limit that refuses a plan, never changes a number",
        "task.query_lengths": "each cell's own query length is part of its data spec",
        "task.query_length_recipes": "the recipe in use (task.query_length_recipe) is in the identity; each cell's "
                                     "own query length is part of its data spec",
    },
)
