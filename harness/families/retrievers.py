"""The retrievers a retrieval task can name (``task.retriever: <name>``): each is the ``retrieve.<name>`` stage of
:data:`harness.specs.stages.STAGES`, whose ``code`` is a builder here or in a user's module. A builder takes the
running family (its typed settings, device, precision, cache folder), the loaded model and the corpus-cache
identity, and returns a :class:`~harness.evaluation.retriever.Retriever`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.evaluation.retriever import Retriever
from harness.specs import stages


def build(family: Any, model: Any, cache_identity: Mapping[str, Any]) -> Retriever:
    """The retriever ``task.retriever`` names, built by its stage's code."""
    builder = stages.code_of(f"retrieve.{family.settings.retriever}")
    return builder(family, model, cache_identity)


def single_vector(family: Any, model: Any, cache_identity: Mapping[str, Any]) -> Retriever:
    """DPR: the SentenceTransformer's embeddings, exact search (``task.similarity``), corpus embeddings cached."""
    from pathlib import Path

    from harness.evaluation.dense import DenseRetriever, DenseSettings

    s = family.settings
    cache_dir = str(Path(str(family.cfg.paths.cache)).expanduser() / "embeddings") if s.embedding_cache else None
    return DenseRetriever(model, DenseSettings(
        device=family.device, precision=family.precision, max_length=s.max_length, similarity=s.similarity,
        batch_tokens=s.batch_tokens, max_batch_size=s.max_batch_size, corpus_chunk_size=s.corpus_chunk_size,
        cache_dir=cache_dir,
    ), cache_identity)


def multi_vector(family: Any, model: Any, cache_identity: Mapping[str, Any]) -> Retriever:
    """ColBERT (a task's ``multi_vector`` node): token embeddings, PLAID or exact MaxSim; documents up to
    ``task.max_length`` (capped at the model's positions)."""
    from harness.evaluation.multivector import MultiVectorRetriever, MultiVectorSettings, token_cache_dir

    s, mv = family.settings, family.settings.multi_vector
    return MultiVectorRetriever(model, MultiVectorSettings(
        device=family.device, precision=family.precision, query_length=mv.query_length,
        document_length=s.max_length, index=mv.index, plaid=mv.plaid, batch_tokens=s.batch_tokens,
        max_batch_size=s.max_batch_size, maxsim_chunk_tokens=mv.maxsim_chunk_tokens,
        cache_dir=token_cache_dir(family.cfg.paths.cache, s.embedding_cache),
    ), cache_identity)
