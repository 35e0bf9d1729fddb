"""Multi-vector (ColBERT) evaluation settings as typed config nodes, PyLate's PLAID parameters among them, and
which PLAID backend ``auto`` resolves to: what planning a ColBERT run needs (its settings and identity), with no
model library imported."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from harness.errors import HarnessError
from harness.typed import choices


@dataclass(kw_only=True)
class PlaidSettings:
    """PyLate's ``indexes.PLAID`` parameters (its defaults, as PyLate's BEIR example runs them)."""

    backend: str = choices("auto", "fast", "stanford")                   # auto: fast-plaid when installed
    nbits: int
    kmeans_niters: int
    n_ivf_probe: int
    n_full_scores: int
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


@dataclass(kw_only=True)
class MultiVectorEval:
    """How a multi-vector (ColBERT) model is evaluated: queries of ``query_length`` tokens, the index, the
    projection size of a plain encoder (a ColBERT checkpoint keeps its own). task=colbert has these keys at the
    task's top level, MLDR under ``task.multi_vector`` (the settings say where: ``multi_vector_node``)."""

    query_length: int
    index: str = choices("plaid", "exact", "voyager")
    plaid: PlaidSettings
    embedding_size: int
    maxsim_chunk_tokens: int
    plaid_max_memory_gb: float | None   # PLAID: refuse a corpus whose index build needs more (null: no check)
