"""``task=colbert``: multi-vector (ColBERT) retrieval as the paper ran it (section 3.1.2, appendix E.2): a PyLate
ColBERT on the encoder trained by KL distillation on MS MARCO (``train.kd``; sources: :data:`KD_SOURCES`), then
nDCG@10 on the 15 BEIR sets through a PLAID index or exact MaxSim (``retrieve.multi_vector``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

from harness.core.errors import DataError, HarnessError
from harness.core.registry import Registry
from harness.core.results import file_sha
from harness.core.typed import choices, count, excluded, flat
from harness.core.work import Work, cost_data
from harness.tasks.retrieval import beir
from harness.tasks.retrieval.data.catalog import DatasetEntry
from harness.tasks.retrieval.planner import Resolved, RetrievalKind, RetrievalSettings, RowSource
from harness.tasks.retrieval.settings import MultiVectorEval
from harness.training.settings import HubRows, KdTraining, TrainRows

#: the KD file and the files it may join
FILE_KEYS = ("path", "queries_path", "documents_path")


def kd_load(source: Any, s: Any, model: Any) -> tuple[Any, dict[str, Any]]:
    """What the KD sources share: their samples for settings ``s`` (every id checked) and facts."""
    from harness.core.console import step
    d = s.train_data   # n_ways >= 2: typed (KdData)
    with step(f"KD data: reading, validating and joining {source.name(d)}",
              starting="every query and document id is checked") as done:
        data, facts = source.read(d, s.training.train_seed)
        done.outcome = f"{len(data):,} samples, {d.n_ways}-way"
    return data, facts


class HubKd(RowSource):
    """A hub dataset of queries, documents and teacher scores (PyLate's MS MARCO KD set by default)."""

    hub, load = "KD training set {d.hub.hub_path!r}", kd_load

    @property
    def offline(self) -> str:   # type: ignore[override]
        from harness.tasks.retrieval.data.kd import HUB_FIX  # the KD reader's own (it imports datasets)
        return HUB_FIX

    def describe(self, s: Any) -> dict[str, Any]:
        return asdict(s.train_data.hub)

    def name(self, d: Any) -> str:
        return str(d.hub.hub_path)

    def work(self, s: Any) -> Work:
        return kd_work(s, None)

    def read(self, d: Any, seed: int) -> tuple[Any, dict[str, Any]]:
        from harness.tasks.retrieval.data import kd
        return kd.load_kd_hub(d.hub.hub_path, d.hub.hub_revision, n_ways=d.n_ways, max_samples=d.max_samples, seed=seed)


class FileKd(RowSource):
    """A local JSONL or Parquet KD file (and the files it joins); their hashes enter the run identity."""

    load = kd_load
    hashes_files = True

    def identity(self, s: Any) -> dict[str, Any]:
        d = s.train_data
        return {f"task.train_data.{k}": {"sha256": file_sha(getattr(d, k))} for k in FILE_KEYS if getattr(d, k)}

    def files(self, s: Any) -> list[Path]:
        return beir.existing([getattr(s.train_data, k) for k in FILE_KEYS])

    def describe(self, s: Any) -> dict[str, Any]:
        d = s.train_data
        return {**{k: getattr(d, k) for k in FILE_KEYS if getattr(d, k)}, "file_sha": file_sha(d.path)}

    def check(self, s: Any) -> None:
        d = s.train_data
        _path(d)
        for key in FILE_KEYS:
            path = getattr(d, key)
            if path and not Path(path).expanduser().is_file():
                raise DataError(f"KD training file not found: {path} (task.train_data.{key}). Point it at an "
                                "existing file (see docs/retrieval.md, Multi-vector retrieval, for the layouts).")

    def name(self, d: Any) -> str:
        return _path(d)

    def work(self, s: Any) -> Work:
        from harness.data.sizes import train_file
        rows = train_file(s.train_data.path)
        w = kd_work(s, rows)
        w.local += rows is not None
        return w

    def read(self, d: Any, seed: int) -> tuple[Any, dict[str, Any]]:
        from harness.tasks.retrieval.data import kd
        return kd.load_kd_file(_path(d), n_ways=d.n_ways, queries_path=d.queries_path,
                               documents_path=d.documents_path, max_samples=d.max_samples, seed=seed)


def kd_work(s: Any, rows: tuple[float, float] | None) -> Work:
    """Training tokens of the samples: a query and its ``n_ways`` documents each (capped lengths), per epoch."""
    c, d, t = cost_data(), s.train_data, s.training
    per = c["query_tokens"] + int(d.n_ways) * min(c["kd_doc_tokens"], int(t.train_document_length))
    n = rows[0] if rows else float(d.max_samples or 0)
    cap = float(d.max_samples) if d.max_samples else None
    return Work(train=min(n, cap or n) * per * int(t.epochs))


def _path(d: Any) -> str:
    if not d.path:
        raise HarnessError("task.train_data.source=file needs task.train_data.path=<KD JSONL or Parquet>.")
    return str(d.path)


#: ``task.train_data.source`` -> the source
KD_SOURCES: Registry[Any] = Registry("KD data source", {"hub": HubKd(), "file": FileKd()},
                                     hint="Set task.train_data.source to one of them.")


@dataclass(kw_only=True)
class KdData(TrainRows):
    """Teacher scores to distil (:mod:`harness.tasks.retrieval.data.kd`): the hub's, or a local file's."""

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
    """Per-dataset query lengths by recipe (a search key); each cell's own length is part of its data spec."""

    role: ClassVar[str] = "search"
    query_length_recipe: str = choices("authors_code", "pylate_beir")
    query_length_recipes: dict[str, dict[str, int]] = excluded(
        "the recipe in use (task.query_length_recipe) is in the identity; each cell's own query length is part of "
        "its data spec")
    query_lengths: dict[str, int] = count(excluded="each cell's own query length is part of its data spec")


@dataclass(kw_only=True)
class ColbertSettings(RetrievalSettings):
    """task=colbert's stages: ``train.kd``, ``load.colbert`` and ``retrieve.multi_vector`` (top-level, per-dataset)."""

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
    """``task.query_lengths[<dataset>]`` (a member: its own, else its composite's), else ``task.query_length``."""
    lengths = s.queries.query_lengths
    parent = (entry.local or "").split("/")[0] if "/" in (entry.local or "") else None
    return int(lengths.get(entry.name, lengths.get(parent or "", s.multi_vector.search.query_length)))


def readable(r: Resolved) -> dict[str, Any]:
    index = r.settings.multi_vector.search.index
    return {"lr": r.lr, "index": index} if r.trains else {"eval": r.precision, "index": index}


def resolved(s: ColbertSettings) -> dict[str, Any]:
    """PLAID's backend (``auto`` resolves per machine, and the two backends differ); Voyager's constants (the
    authors' index and search depth: a change to them changes the numbers, so it changes the run id)."""
    from harness.tasks.retrieval.settings import plaid_backend, voyager_identity
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
        from harness.tasks.retrieval.settings import plaid_backend
        hp["plaid"] = asdict(mv.search.plaid) | {"backend": plaid_backend(mv.search.plaid.backend)}
    if not r.trains:
        return hp
    d, t = s.train_data, s.training
    data = {"source": d.source, "n_ways": d.n_ways, "max_samples": d.max_samples, **r.data}
    return hp | beir.training(r, data, query_length=t.train_query_length, document_length=t.train_document_length,
                              loss="distillation", normalize_scores=t.normalize_scores)


COLBERT = RetrievalKind(ColbertSettings, hyperparameters, readable=readable, validate=check,
                        query_length=query_length, resolved=resolved)
