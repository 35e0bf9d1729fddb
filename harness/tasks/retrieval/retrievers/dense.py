"""Single-vector retrieval: encode the corpus once (cached on disk), encode queries, exact top-k search."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.core.console import step
from harness.core.typed import nodes_from_conf
from harness.encoding.encode import batch_budget, batch_tokens_facts, encode, token_ids
from harness.encoding.packing import token_budget_batches
from harness.encoding.settings import Batching
from harness.tasks.retrieval.retrievers import search as _search
from harness.tasks.retrieval.retrievers.embedding_cache import (
    cache_key,
    cached_embeddings,
    cached_rows,
    texts_key,
)
from harness.tasks.retrieval.settings import SingleVectorEval

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from harness.tasks.retrieval.data.dataset import RetrievalDataset


@dataclass(kw_only=True)
class DenseSettings:
    """What the single-vector retriever gets: device, precision, batching and evaluation nodes, embedding cache."""

    device: str
    precision: str
    batching: Batching
    evaluation: SingleVectorEval
    cache_dir: str | None
    show_progress: bool = True


def dense_settings(*, max_length: int, device: str = "cpu", precision: str = "fp32", cache_dir: str | None = None,
                   show_progress: bool = False, **keys: Any) -> DenseSettings:
    """task=beir's values (conf/task/beir.yaml) with flat task ``keys`` on top, for code outside a composed config."""
    batching, evaluation = nodes_from_conf("task/beir", Batching, SingleVectorEval, max_length=max_length, **keys)
    return DenseSettings(device=device, precision=precision, batching=batching, evaluation=evaluation,
                         cache_dir=cache_dir, show_progress=show_progress)


class DenseRetriever:
    """:class:`~harness.tasks.retrieval.retrievers.retriever.Retriever` over a SentenceTransformer."""

    kind = "single_vector"

    def __init__(self, model: SentenceTransformer, settings: DenseSettings, cache_identity: Mapping[str, Any]):
        self.model = model
        self.settings = settings
        self.cache_dir = settings.cache_dir      # ShardEngine (harness.tasks.retrieval.retrievers.shards)
        self.cache_identity = dict(cache_identity)
        self.doc_emb: np.ndarray | None = None
        self.rank: np.ndarray | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None
        model.max_seq_length = settings.evaluation.max_length

    def _encode(self, texts: list[str], desc: str, keep_width: bool = False) -> np.ndarray:
        s = self.settings
        return encode(self.model, texts, batching=s.batching, device=s.device, precision=s.precision, desc=desc,
                      show_progress=s.show_progress, keep_width=keep_width)

    def index(self, ds: RetrievalDataset) -> tuple[dict[str, Any], dict[str, float]]:
        """The corpus encoded chunk by chunk into a memory-mapped matrix (a miss searched from disk as a hit)."""
        t0 = time.perf_counter()
        self.close()
        s = self.settings
        n = len(ds.corpus.bounds())       # each chunk says how its encoding went (on a GPU: how busy it kept it)
        self.doc_emb, hit = cached_rows(
            s.cache_dir or self._scratch(), (self.cache_identity, ds.corpus.key),   # the corpus' content
            ((start, encode(self.model, texts, batching=s.batching, device=s.device, precision=s.precision,
                            desc=f"{ds.name}: corpus" + (f", chunk {i + 1} of {n}" if n > 1 else ""),
                            show_progress=s.show_progress, keep_width=True))
             for i, (start, texts) in enumerate(ds.corpus.chunks())),
            len(ds), meta={"identity": self.cache_identity, "data": ds.fingerprint, "dataset": ds.name,
                           "n_docs": len(ds)})
        self.rank = _search.id_rank(ds.corpus_ids)
        return {"embedding_cache_hit": hit}, {"encode_corpus_s": time.perf_counter() - t0}

    def _scratch(self) -> str:
        """A temporary folder for this dataset's matrix when no cache is kept (removed by :meth:`close`)."""
        self._tmp = tempfile.TemporaryDirectory(prefix="harness-dense-")
        return self._tmp.name

    def close(self) -> None:
        self.doc_emb = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def search(self, queries: list[str], top_k: int) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
        assert self.doc_emb is not None, "index() first"
        t0 = time.perf_counter()
        q_emb = self._encode(queries, "queries")
        t1 = time.perf_counter()
        with step(f"exact search, {len(queries):,} queries x {len(self.doc_emb):,} documents",
                  show=self.settings.show_progress):
            scores, idx = self._exact(q_emb, self.doc_emb, top_k, self.rank)
        return scores, idx, {"encode_queries_s": t1 - t0, "search_s": time.perf_counter() - t1}

    def _exact(self, q_emb: np.ndarray, doc_emb: np.ndarray, top_k: int,
               rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = self.settings
        search = s.evaluation.search
        return _search.exact_search(q_emb, doc_emb, top_k, similarity=search.similarity,
                                    corpus_chunk_size=search.corpus_chunk_size, device=s.device, rank=rank)

    def describe(self) -> dict[str, Any]:
        e = self.settings.evaluation
        chosen = batch_tokens_facts(self.model)   # task.batch_tokens=auto measured on a GPU: what it chose, and why
        return {"similarity": e.search.similarity, "document_text": "title + ' ' + text", "max_length": e.max_length,
                **({"batch_tokens": chosen} if chosen else {})}

    # -------------------------------------------------------------------- ShardEngine (harness.tasks.retrieval.retrievers.shards)
    def token_lengths(self, texts: list[str]) -> np.ndarray:
        return np.fromiter((len(x) for x in token_ids(self.model, texts)), dtype=np.int64, count=len(texts))

    def batches(self, lengths: np.ndarray) -> list[np.ndarray]:
        s = self.settings
        return token_budget_batches(lengths, batch_budget(s.device, s.batching.fixed_tokens),   # the same plan in
                                    s.batching.max_batch_size)                               # every shard job

    def query_embeddings(self, queries: list[str]) -> np.ndarray:
        """Query embeddings, cached by the queries' text: encoded once for every shard."""
        key = cache_key(self.cache_identity, texts_key(queries), side="queries")
        return cached_embeddings(self.settings.cache_dir, key, lambda: self._encode(queries, "queries"))[0]

    def search_shard(self, segments: Sequence[Callable[[], list[str]]], n_docs: int, key: str, queries: np.ndarray,
                     top_k: int, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        emb, hit = cached_rows(str(self.settings.cache_dir), key, self._segment_rows(segments), n_docs,
                               meta={"identity": self.cache_identity, "n_docs": n_docs})
        return *self._exact(queries, emb, top_k, rank), hit

    def _segment_rows(self, segments: Sequence[Callable[[], list[str]]]) -> Iterator[tuple[int, np.ndarray]]:
        """(start, embeddings) of each segment's texts, read and encoded in turn."""
        start = 0
        for read in segments:
            texts = read()
            yield start, self._encode(texts, "corpus shard", keep_width=True)
            start += len(texts)

    def search_settings(self) -> dict[str, Any]:
        return {"similarity": self.settings.evaluation.search.similarity}
