"""The ``retrieve.<name>`` stages of a retrieval run: ``task.retriever: <name>`` (or the one retrieve stage a
spec lists) picks the stage, whose ``code`` is a builder here (or in a user's module: docs/layout.md, "Adding a
retriever"). A builder gets the run's :class:`~harness.tasks.runplan.RunPlan` (the task's typed settings, device,
precision, where caches go), the loaded model and the corpus-cache identity, and returns a
:class:`~harness.tasks.retrieval.retrievers.retriever.Retriever`. Which keys change its ranking but not its corpus encoding follows
from the settings (their ``search`` nodes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.tasks.retrieval.retrievers.retriever import Retriever
    from harness.tasks.runplan import RunPlan


def single_vector(plan: RunPlan, model: Any, cache_identity: Mapping[str, Any]) -> Retriever:
    """DPR: the SentenceTransformer's embeddings, exact search (``task.similarity``), corpus embeddings cached;
    documents written by ``task.title_convention`` where the task has one (task=code)."""
    from harness.tasks.retrieval.retrievers.dense import DenseRetriever, DenseSettings
    from harness.tasks.retrieval.retrievers.retriever import TitleConvention

    s = plan.settings
    dense = DenseRetriever(model, DenseSettings(
        device=plan.device, precision=plan.precision, batching=s.batching, evaluation=s.evaluation,
        cache_dir=str(plan.layout.embeddings()) if s.embedding_cache else None,
    ), cache_identity)
    convention = getattr(s, "title_convention", None)
    return TitleConvention(dense, convention) if convention else dense


def multi_vector(plan: RunPlan, model: Any, cache_identity: Mapping[str, Any]) -> Retriever:
    """ColBERT: token embeddings, PLAID or exact MaxSim; documents up to the task's document length (capped at the
    model's positions, recorded)."""
    from harness.tasks.retrieval.retrievers.multivector import MultiVectorRetriever, MultiVectorSettings

    s = plan.settings
    return MultiVectorRetriever(model, MultiVectorSettings(
        device=plan.device, precision=plan.precision, batching=s.batching, search=s.multi_vector.search,
        maxsim_chunk_tokens=s.multi_vector.maxsim_chunk_tokens, document_length=s.document_length,
        cache_dir=str(plan.layout.colbert_tokens()) if s.embedding_cache else None,
    ), cache_identity)
