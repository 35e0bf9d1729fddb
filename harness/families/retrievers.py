"""The ``retrieve.<name>`` stages of the retrieval runner: ``task.retriever: <name>`` (or the one retrieve stage a
spec lists) picks the stage, whose ``code`` is a builder here (or in a user's module: docs/layout.md, "Adding a
retriever"). A builder gets the running task (its settings, device, precision), the loaded model and the
corpus-cache identity, and returns a :class:`~harness.evaluation.retriever.Retriever`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.evaluation.retriever import Retriever


def single_vector(task: Any, model: Any, cache_identity: Mapping[str, Any]) -> Retriever:
    """DPR: the SentenceTransformer's embeddings, exact search (``task.similarity``), corpus embeddings cached;
    documents written by ``task.title_convention`` where the task has one (task=code)."""
    from pathlib import Path

    from harness.evaluation.dense import DenseRetriever, DenseSettings
    from harness.evaluation.documents import TitleConvention

    s = task.settings
    cache_dir = str(Path(str(task.cfg.paths.cache)).expanduser() / "embeddings") if s.embedding_cache else None
    e = s.evaluation
    dense = DenseRetriever(model, DenseSettings(
        device=task.device, precision=task.precision, max_length=e.max_length, similarity=e.search.similarity,
        batch_tokens=s.batching.batch_tokens, max_batch_size=s.batching.max_batch_size,
        corpus_chunk_size=e.search.corpus_chunk_size, cache_dir=cache_dir,
    ), cache_identity)
    convention = getattr(s, "title_convention", None)
    return TitleConvention(dense, convention) if convention else dense


def multi_vector(task: Any, model: Any, cache_identity: Mapping[str, Any]) -> Retriever:
    """ColBERT: token embeddings, PLAID or exact MaxSim; documents up to the task's document length (capped at the
    model's positions, recorded)."""
    from harness.evaluation.multivector import MultiVectorRetriever, MultiVectorSettings, token_cache_dir

    s = task.settings
    mv = s.multi_vector
    return MultiVectorRetriever(model, MultiVectorSettings(
        device=task.device, precision=task.precision, query_length=mv.search.query_length,
        document_length=s.document_length, index=mv.search.index, plaid=mv.search.plaid,
        batch_tokens=s.batching.batch_tokens, max_batch_size=s.batching.max_batch_size,
        maxsim_chunk_tokens=mv.maxsim_chunk_tokens, cache_dir=token_cache_dir(task.cfg.paths.cache, s.embedding_cache),
        plaid_max_memory_gb=mv.search.plaid_max_memory_gb,
    ), cache_identity)
