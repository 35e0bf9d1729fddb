"""Multi-vector (ColBERT) evaluation settings as typed config nodes, PyLate's PLAID parameters among them, and
which PLAID backend ``auto`` resolves to: what planning a ColBERT run needs (its settings and identity), with no
model library imported."""

from __future__ import annotations

import importlib.util
from dataclasses import asdict, dataclass
from typing import ClassVar

from harness.errors import HarnessError
from harness.typed import choices, count, flat, positive


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
    ef_construction 500, ef_search 500; :53 ``retrieve(k=100)``, so PyLate keeps its 100 neighbours per query
    token). Constants of the ``voyager`` path, not settings: they enter the run identity of voyager runs only."""

    M: int = 200                 # PyLate's name
    ef_construction: int = 500
    ef_search: int = 500
    k: int = 100                 # documents a query's search returns (metrics past it are left out, listed)


def voyager_identity(index: str) -> dict[str, int]:
    """What a ``voyager`` run's identity holds besides its config (the constants above); {} for other indexes."""
    return asdict(VoyagerSettings()) if index == "voyager" else {}


@dataclass(kw_only=True)
class MultiVectorSearch:
    """How a multi-vector model's ranking is searched: queries of ``query_length`` tokens, the index (PLAID with its
    parameters, exact MaxSim, or the authors' Voyager, whose constants the run resolves into ``voyager``)."""

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
    """How a multi-vector (ColBERT) model is evaluated: the projection size of a plain encoder (a ColBERT checkpoint
    keeps its own), exact MaxSim's chunking, and the search. task=colbert has these keys at the task's top level
    (a flat node), MLDR under ``task.multi_vector``."""

    embedding_size: int = count()
    maxsim_chunk_tokens: int = count(excluded="how exact MaxSim is chunked")
    search: MultiVectorSearch = flat()
