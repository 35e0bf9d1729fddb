"""The ``retrieve.<name>`` stages of the retrieval runner: ``task.retriever: <name>`` (or the one retrieve stage a
spec lists) picks the stage, whose ``code`` is a builder here (or in a user's module: docs/layout.md, "Adding a
retriever"). A builder gets the running task (its settings, device, precision), the loaded model and the
corpus-cache identity, and returns a :class:`~harness.evaluation.retriever.Retriever`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.evaluation.retriever import Retriever

#: identity keys that change a ranking but never the corpus encoding, for a builder that declares none
SEARCH_ONLY = ("task.top_k",)


@dataclass(frozen=True)
class Builder:
    """A retrieve stage's code: ``build(task, model, cache_identity)``, and the identity keys (dotted) that change
    its ranking but not its corpus encoding (left out of the corpus cache key)."""

    build: Callable[[Any, Any, Mapping[str, Any]], Retriever]
    search_only: Callable[[Any], tuple[str, ...]]

    def __call__(self, task: Any, model: Any, cache_identity: Mapping[str, Any]) -> Retriever:
        return self.build(task, model, cache_identity)


def search_only_keys(builder: Any, task: Any) -> tuple[str, ...]:
    """What ``builder`` declares (a plain function: :data:`SEARCH_ONLY`)."""
    return builder.search_only(task) if isinstance(builder, Builder) else SEARCH_ONLY


def _single_vector(task: Any, model: Any, cache_identity: Mapping[str, Any]) -> Retriever:
    """DPR: the SentenceTransformer's embeddings, exact search (``task.similarity``), corpus embeddings cached;
    documents written by ``task.title_convention`` where the task has one (task=code)."""
    from pathlib import Path

    from harness.evaluation.dense import DenseRetriever, DenseSettings
    from harness.evaluation.documents import TitleConvention

    s = task.settings
    cache_dir = str(Path(str(task.cfg.paths.cache)).expanduser() / "embeddings") if s.embedding_cache else None
    dense = DenseRetriever(model, DenseSettings(
        device=task.device, precision=task.precision, max_length=s.max_length, similarity=s.similarity,
        batch_tokens=s.batch_tokens, max_batch_size=s.max_batch_size, corpus_chunk_size=s.corpus_chunk_size,
        cache_dir=cache_dir,
    ), cache_identity)
    convention = getattr(s, "title_convention", None)
    return TitleConvention(dense, convention) if convention else dense


def _multi_vector(task: Any, model: Any, cache_identity: Mapping[str, Any]) -> Retriever:
    """ColBERT: token embeddings, PLAID or exact MaxSim; documents up to the task's document length (capped at the
    model's positions, recorded)."""
    from harness.evaluation.multivector import MultiVectorRetriever, MultiVectorSettings, token_cache_dir

    s = task.settings
    mv = s.multi_vector
    return MultiVectorRetriever(model, MultiVectorSettings(
        device=task.device, precision=task.precision, query_length=mv.query_length,
        document_length=s.document_length, index=mv.index, plaid=mv.plaid, batch_tokens=s.batch_tokens,
        max_batch_size=s.max_batch_size, maxsim_chunk_tokens=mv.maxsim_chunk_tokens,
        cache_dir=token_cache_dir(task.cfg.paths.cache, s.embedding_cache), plaid_max_memory_gb=mv.plaid_max_memory_gb,
    ), cache_identity)


def _multi_vector_search_only(task: Any) -> tuple[str, ...]:
    node = type(task.settings).multi_vector_node
    return ("task.top_k", "task.similarity", "task.query_length_recipe",
            *(f"{node}.{key}" for key in ("index", "plaid", "query_length", "voyager")))


single_vector = Builder(_single_vector, lambda task: ("task.top_k", "task.similarity"))
multi_vector = Builder(_multi_vector, _multi_vector_search_only)
