"""The typed settings nodes of the retrieval stages, importable without torch: each the schema of its (flat) YAML keys
and what the stage receives; a node's ``role`` says what its keys do to a run."""

from __future__ import annotations

import importlib.util
from dataclasses import asdict, dataclass
from typing import ClassVar

from harness.core.errors import HarnessError
from harness.core.typed import choices, count, excluded, flat, positive

#: the cutoff of every retrieval task's main metric (nDCG@10): task.top_k may not be smaller
MAIN_CUTOFF = 10


@dataclass(kw_only=True)
class Ranking:
    """How deep every retriever ranks: ``score.ir`` reports the metrics whose cutoff is within it."""

    role: ClassVar[str] = "search"
    top_k: int

    def __post_init__(self) -> None:
        if self.top_k < MAIN_CUTOFF:
            raise HarnessError(f"task.top_k={self.top_k} is below {MAIN_CUTOFF}, the cutoff of the main metric "
                               f"(nDCG@{MAIN_CUTOFF}): set task.top_k to at least {MAIN_CUTOFF} (1000 reports every "
                               "metric; a smaller top_k leaves out the metrics whose cutoff exceeds it)")


@dataclass(kw_only=True)
class ExactSearch:
    """Exact top-k search over the corpus embeddings (:func:`harness.tasks.retrieval.retrievers.search.exact_search`)."""

    role: ClassVar[str] = "search"
    similarity: str = choices("cosine", "dot")
    corpus_chunk_size: int = count(excluded="how the search is chunked")


@dataclass(kw_only=True)
class SingleVectorEval:
    """``retrieve.single_vector``: texts encoded up to ``max_length`` tokens, searched exactly."""

    max_length: int = count()
    search: ExactSearch = flat()


@dataclass(kw_only=True)
class PlaidSettings:
    """PyLate's ``indexes.PLAID`` parameters (its defaults, as PyLate's BEIR example runs them)."""

    backend: str = choices("auto", "fast", "stanford")                   # auto: fast-plaid when installed
    nbits: int = count()
    kmeans_niters: int = count()
    n_ivf_probe: int = count()
    n_full_scores: int = count()
    seed: int
    #: score PLAID's candidates with exact MaxSim on the stored token embeddings (as PyLate's retrieve.ColBERT
    #: does for a Voyager index, the paper's evaluate_pylate.py); false: keep PLAID's compressed-residual scores
    rerank: bool


def plaid_backend(requested: str) -> str:
    """auto -> ``fast`` when fast-plaid is installed, else ``stanford`` (PyLate's bundled backend)."""
    if requested == "auto":
        return "fast" if importlib.util.find_spec("fast_plaid") is not None else "stanford"
    if requested == "fast" and importlib.util.find_spec("fast_plaid") is None:
        raise HarnessError(
            "task.plaid.backend=fast needs fast-plaid, which is not installed (pip install fast-plaid; it pins a "
            "torch build). Use task.plaid.backend=stanford or auto, or task.index=exact."
        )
    return requested


@dataclass(frozen=True)
class VoyagerSettings:
    """The authors' PyLate ``indexes.Voyager`` HNSW and search (MB@8c57a0f:examples/evaluate_pylate.py:23 M 200,
    ef_construction 500, ef_search 500; :53 ``retrieve(k=100)``): constants of voyager runs' identity."""

    M: int = 200                 # PyLate's name
    ef_construction: int = 500
    ef_search: int = 500
    k: int = 100                 # documents a query's search returns (metrics past it are left out, listed)


def voyager_identity(index: str) -> dict[str, int]:
    """What a ``voyager`` run's identity holds besides its config (the constants above); {} for other indexes."""
    return asdict(VoyagerSettings()) if index == "voyager" else {}


@dataclass(kw_only=True)
class MultiVectorSearch:
    """How a multi-vector ranking is searched: query length, and the index (PLAID, exact MaxSim, Voyager)."""

    role: ClassVar[str] = "search"
    derived: ClassVar[tuple[str, ...]] = ("voyager",)
    query_length: int = count()
    index: str = choices("plaid", "exact", "voyager")
    plaid: PlaidSettings
    #: PLAID: refuse a corpus whose index build needs more
    plaid_max_memory_gb: float | None = positive(null="no check",
                                                 excluded="a limit that refuses a plan, never changes a number")


@dataclass(kw_only=True)
class MultiVectorEval:
    """How a ColBERT model is evaluated (flat in task=colbert, ``task.multi_vector`` in MLDR)."""

    embedding_size: int = count()
    maxsim_chunk_tokens: int = count(excluded="how exact MaxSim is chunked")
    search: MultiVectorSearch = flat()


#: where a run's corpus shards run (``task.shard_launcher``)
LAUNCHERS = ("sequential", "devices", "external")


@dataclass(kw_only=True)
class ShardSettings:
    """``task.shards`` (K, or ``auto``: by ``shard_tokens``), ``task.shard`` (one shard's job), ``shard_launcher``."""

    shards: int | str = count(excluded="how the corpus is split for encoding: the merged ranking is the unsharded one")
    shard_tokens: int = count(excluded="how the corpus is split for encoding (task.shards=auto)")
    shard: int | None = excluded("which shard a shard job computes")
    shard_launcher: str = choices(*LAUNCHERS, excluded="where the shards run")

    def __post_init__(self) -> None:
        if self.shard is not None and (self.shard < 0 or (isinstance(self.shards, int) and self.shard >= self.shards)):
            upper = f"< task.shards={self.shards}" if isinstance(self.shards, int) else "a shard of the plan"
            raise HarnessError(f"task.shard={self.shard} is not a shard of this run: it must be >= 0 and {upper} "
                               "(shards are numbered from 0)")

    @property
    def sharded(self) -> bool:
        return self.shards != 1 or self.shard is not None or self.shard_launcher != "sequential"
