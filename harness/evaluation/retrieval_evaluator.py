"""One dense-retrieval evaluation: encode corpus (cached) and queries, exact top-k search, IR metrics."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.evaluation.embedding_cache import cache_key, cached_embeddings
from harness.evaluation.encode import encode
from harness.evaluation.ir_metrics import evaluate_run
from harness.evaluation.search import exact_search, to_run

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from harness.data.retrieval import RetrievalDataset


@dataclass
class RetrievalEvalSettings:
    device: str = "cpu"
    precision: str = "fp32"
    max_length: int = 512
    top_k: int = 1000
    similarity: str = "cosine"
    batch_tokens: int = 16384
    max_batch_size: int = 512
    corpus_chunk_size: int = 50_000
    cache_dir: str | None = None
    show_progress: bool = True


def evaluate_retrieval(
    model: SentenceTransformer,
    model_fingerprint: str,
    ds: RetrievalDataset,
    settings: RetrievalEvalSettings,
    *,
    ignore_identical_ids: bool = False,
) -> tuple[dict[str, float], dict[str, Any], dict[str, float]]:
    """(metrics, details, timings) of ``model`` on ``ds``. Documents are title + " " + text."""
    model.max_seq_length = settings.max_length
    timings: dict[str, float] = {}
    enc = dict(
        device=settings.device, precision=settings.precision, batch_tokens=settings.batch_tokens,
        max_batch_size=settings.max_batch_size, show_progress=settings.show_progress,
    )
    t0 = time.perf_counter()
    key = cache_key(model_fingerprint, ds.fingerprint, settings.precision, settings.max_length)
    doc_emb, hit = cached_embeddings(
        settings.cache_dir, key,
        lambda: encode(model, ds.documents(), desc=f"{ds.name}: corpus", **enc),
        meta={"model": model_fingerprint, "data": ds.fingerprint, "precision": settings.precision,
              "max_length": settings.max_length, "dataset": ds.name, "n_docs": len(ds)},
    )
    timings["encode_corpus_s"] = time.perf_counter() - t0
    queries = ds.evaluated_queries()
    qids = list(queries)
    t0 = time.perf_counter()
    q_emb = encode(model, list(queries.values()), desc=f"{ds.name}: queries", **enc)
    timings["encode_queries_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    k = settings.top_k + (1 if ignore_identical_ids else 0)
    scores, idx = exact_search(
        q_emb, doc_emb, k, similarity=settings.similarity, corpus_chunk_size=settings.corpus_chunk_size
    )
    run = to_run(qids, ds.corpus_ids, scores, idx, top_k=settings.top_k, ignore_identical_ids=ignore_identical_ids)
    timings["search_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    qrels = {q: ds.qrels[q] for q in qids}
    metrics = evaluate_run(qrels, run)
    timings["metrics_s"] = time.perf_counter() - t0
    details = {
        "n_docs": len(ds), "n_queries": len(qids), "embedding_cache_hit": hit, "top_k": settings.top_k,
        "similarity": settings.similarity, "ignore_identical_ids": ignore_identical_ids,
        "document_text": "title + ' ' + text", "max_length": settings.max_length, "source": ds.source,
    }
    return metrics, details, timings
