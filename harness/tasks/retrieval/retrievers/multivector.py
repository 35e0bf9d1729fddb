"""Multi-vector (ColBERT) retrieval with PyLate: token embeddings of the corpus (cached fp16, memory-mapped), then a
PLAID index (fast-plaid, else PyLate's Stanford backend) or exact MaxSim; document lengths capped at the positions."""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from harness.core.console import step
from harness.core.errors import HarnessError
from harness.core.typed import from_conf, nodes_from_conf
from harness.encoding.packing import token_budget_batches
from harness.encoding.settings import Batching
from harness.models import usable_positions
from harness.tasks.retrieval.retrievers.colbert_model import capped_length, encode_tokens, token_lengths
from harness.tasks.retrieval.retrievers.embedding_cache import cache_key, cached_embeddings, texts_key
from harness.tasks.retrieval.retrievers.maxsim import maxsim_search, pad_queries, rerank_exact
from harness.tasks.retrieval.retrievers.plaid_index import (
    build_plaid,
    build_voyager,
    check_plaid_backend,
    check_voyager,
    plaid_fits,
    plaid_search,
    voyager_search,
)
from harness.tasks.retrieval.retrievers.plaid_memory import plaid_memory
from harness.tasks.retrieval.retrievers.search import id_rank
from harness.tasks.retrieval.retrievers.token_store import TokenStore
from harness.tasks.retrieval.settings import (
    MultiVectorEval,
    MultiVectorSearch,
    PlaidSettings,
    VoyagerSettings,
    plaid_backend,
)

if TYPE_CHECKING:
    from pylate.models import ColBERT

    from harness.tasks.retrieval.data.dataset import RetrievalDataset

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class MultiVectorSettings:
    """What the multi-vector retriever gets (``cache_dir`` None: a temporary token store, removed after)."""

    device: str
    precision: str
    batching: Batching
    search: MultiVectorSearch
    maxsim_chunk_tokens: int            # exact MaxSim: document tokens (padded) per corpus chunk
    document_length: int
    cache_dir: str | None
    maxsim_score_budget: int = 1 << 26  # exact MaxSim: floats of query-token x document-token scores at a time
    show_progress: bool = True


def multi_vector_settings(*, document_length: int, device: str = "cpu", precision: str = "fp32",
                          cache_dir: str | None = None, show_progress: bool = False,
                          **keys: Any) -> MultiVectorSettings:
    """For code outside a composed config: task=colbert's values, with flat task ``keys`` on top."""
    keys.setdefault("plaid", from_conf(PlaidSettings, "plaid/default"))
    batching, mv = nodes_from_conf("task/colbert", Batching, MultiVectorEval, **keys)
    return MultiVectorSettings(device=device, precision=precision, batching=batching, search=mv.search,
                               maxsim_chunk_tokens=mv.maxsim_chunk_tokens, document_length=document_length,
                               cache_dir=cache_dir, show_progress=show_progress)


# ------------------------------------------------------------------------------------------------ the retriever
class MultiVectorRetriever:
    """:class:`~harness.tasks.retrieval.retrievers.retriever.Retriever` over a PyLate ColBERT model."""

    kind = "multi_vector"

    def __init__(self, model: ColBERT, settings: MultiVectorSettings, cache_identity: Mapping[str, Any]):
        self.model = model
        self.settings = settings
        self.cache_dir = settings.cache_dir      # ShardEngine (harness.tasks.retrieval.retrievers.shards)
        self.cache_identity = dict(cache_identity)
        self.limit = usable_positions(model)
        self.document_length = capped_length(settings.document_length, self.limit)
        if self.document_length < settings.document_length:
            log.warning("document_length %d exceeds the model's %d positions: capped to %d (recorded)",
                        settings.document_length, self.limit, self.document_length)
        search = settings.search
        self.query_length = search.query_length
        self.backend = plaid_backend(search.plaid.backend) if search.index == "plaid" else None
        if self.backend is not None:
            check_plaid_backend(self.backend)    # before any encoding
        if search.index == "voyager":
            check_voyager()                      # before any encoding
            self.max_depth: int | None = VoyagerSettings().k   # documents a search returns at most (the authors' k)
        else:
            self.max_depth = None
        self.store: TokenStore | None = None
        self.rank: np.ndarray | None = None
        self._plaid: Any = None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._tmp_store: tempfile.TemporaryDirectory | None = None
        self._mode = search.index      # what index() built: plaid falls back to exact on a small corpus

    # -------------------------------------------------------------------- Retriever protocol
    def index(self, ds: RetrievalDataset) -> tuple[dict[str, Any], dict[str, float]]:
        s = self.settings
        self.close()
        t0 = time.perf_counter()
        self.store, hit = self._corpus_tokens(ds)
        timings = {"encode_corpus_s": time.perf_counter() - t0}
        details: dict[str, Any] = {"embedding_cache_hit": hit, "n_doc_tokens": self.store.n_tokens}
        if s.search.index == "plaid":
            details |= self.plaid_memory(ds, self.store.n_tokens)
        self.rank = id_rank(ds.corpus_ids)
        self._mode = s.search.index
        if s.search.index == "plaid":
            t1 = time.perf_counter()
            self._plaid, self._tmp, fell_back = self._build_plaid(self.store, ds.name)
            self._mode = "exact" if fell_back else "plaid"
            details |= fell_back or {}
            timings |= {} if fell_back else {"index_s": time.perf_counter() - t1}
        elif s.search.index == "voyager":
            t1 = time.perf_counter()
            self._tmp = tempfile.TemporaryDirectory(prefix="harness-voyager-")
            self._plaid = build_voyager([self.store.doc(i) for i in range(len(self.store))], self.store.dim,
                                        VoyagerSettings(), Path(self._tmp.name))
            timings["index_s"] = time.perf_counter() - t1
        return details, timings

    def search(self, queries: list[str], top_k: int) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
        assert self.store is not None, "index() first"
        s = self.settings
        t0 = time.perf_counter()
        q = self.encode_queries(queries)
        t1 = time.perf_counter()
        if self._mode == "voyager":
            with step(f"Voyager search, {len(q):,} queries, exact MaxSim rerank", show=s.show_progress):
                scores, idx = voyager_search(self._plaid, q, top_k)
        elif self._mode == "plaid":
            scores, idx = self._plaid_search(self._plaid, q, self.store, top_k)
        else:
            scores, idx = self._maxsim(pad_queries(q, self.store.dim), self.store, top_k, self.rank)
        return scores, idx, {"encode_queries_s": t1 - t0, "search_s": time.perf_counter() - t1}

    def describe(self) -> dict[str, Any]:
        s = self.settings
        out: dict[str, Any] = {
            "similarity": "MaxSim", "document_text": "title + ' ' + text", "query_length": self.query_length,
            "document_length": self.document_length, "document_length_requested": s.document_length,
            "position_limit": self.limit, "index": s.search.index,
            "token_embeddings": "float16 on disk, L2-normalised",
        }
        if s.search.index == "plaid":
            out["index_params"] = {**asdict(s.search.plaid), "backend": self.backend}
        elif s.search.index == "voyager":
            out["index_params"] = {**asdict(VoyagerSettings()), "rerank": "exact MaxSim (pylate retrieve.ColBERT)"}
        else:
            out["index_params"] = {"exact": "pylate.scores.colbert_scores over every document"}
        return out

    def plaid_memory(self, ds: RetrievalDataset, n_tokens: int) -> dict[str, Any]:
        """What the record says of the PLAID build: its backend and modelled host memory."""
        est = plaid_memory(len(ds), n_tokens, int(self.model[-1].out_features), self.settings.search.plaid,
                           str(self.backend))
        return {"index_backend": self.backend, **est.describe()}

    def _build_plaid(self, store: TokenStore, name: str) -> tuple[Any, Any, dict[str, Any] | None]:
        """(index, temporary folder, None), or (None, None, why) where the corpus is too small for k-means."""
        ok, why = plaid_fits(store.n_tokens)
        if not ok:
            log.warning("%s: %s", name, why)
            return None, None, {"index": "exact", "index_requested": "plaid", "index_fallback": why}
        s = self.settings
        tmp = tempfile.TemporaryDirectory(prefix="harness-plaid-")
        try:
            return build_plaid(store, s.search.plaid, str(self.backend), Path(tmp.name), s.device,
                               s.show_progress), tmp, None
        except (RuntimeError, OSError, ImportError) as exc:   # e.g. a C++ extension that does not build
            tmp.cleanup()
            raise HarnessError(f"{name}: building the PLAID index ({self.backend}) failed: {exc}. Use "
                               "task.index=exact, or fix the backend (README: Multi-vector retrieval).") from exc

    def _plaid_search(self, index: Any, q: list[np.ndarray], store: TokenStore, top_k: int
                      ) -> tuple[np.ndarray, np.ndarray]:
        s = self.settings
        rerank = ", exact MaxSim rerank" if s.search.plaid.rerank else ""
        with step(f"PLAID search, {len(q):,} queries{rerank}", show=s.show_progress):
            scores, idx = plaid_search(index, q, top_k)
            if s.search.plaid.rerank:
                scores, idx = rerank_exact(q, store, idx, chunk_tokens=s.maxsim_chunk_tokens, device=s.device)
        return scores, idx

    # -------------------------------------------------------------------- ShardEngine (harness.tasks.retrieval.retrievers.shards)
    def token_lengths(self, texts: list[str]) -> np.ndarray:
        """Document tokens per text (prefix included), as :func:`encode_tokens` batches them."""
        if self.settings.search.index == "voyager":
            raise HarnessError("task.shards with ColBERT needs task.index=exact or plaid (an index per shard, their "
                               "top-k lists merged by score); Voyager builds one index over the whole corpus")
        return token_lengths(self.model, texts, self.document_length)

    def batches(self, lengths: np.ndarray) -> list[np.ndarray]:
        b = self.settings.batching
        return token_budget_batches(lengths, b.fixed_tokens, b.max_batch_size)

    def query_embeddings(self, queries: list[str]) -> np.ndarray:
        """Queries' token embeddings, zero-padded to one length [n, tokens, dim]; cached by text and query length."""
        length = capped_length(self.query_length, self.limit)
        key = cache_key({"identity": self.cache_identity, "query_length": length}, texts_key(queries), side="queries")
        dim = int(self.model[-1].out_features)
        return cached_embeddings(self.settings.cache_dir, key,
                                 lambda: pad_queries(self.encode_queries(queries), dim).numpy())[0]

    def search_shard(self, segments: Sequence[Callable[[], list[str]]], n_docs: int, key: str, queries: np.ndarray,
                     top_k: int, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        s = self.settings
        store, hit = TokenStore.cached(Path(str(s.cache_dir)) / key, n_docs,
                                       lambda: self._document_batches(segments, "corpus shard"),
                                       {"identity": self.cache_identity, "document_length": self.document_length})
        if s.search.index == "plaid":   # an index per shard (its own k-means sample and centroids)
            index, tmp, fell_back = self._build_plaid(store, f"corpus shard {key}")
            if not fell_back:
                try:
                    q = [x[np.abs(x).sum(axis=1) > 0] for x in queries]    # the padding rows dropped
                    return *self._plaid_search(index, q, store, top_k), hit
                finally:
                    tmp.cleanup()
        # a copy: the cached query array is read-only, which torch.from_numpy does not support
        return *self._maxsim(torch.from_numpy(np.array(queries)), store, top_k, rank), hit

    def search_settings(self) -> dict[str, Any]:
        index = self.settings.search.index
        return {"query_length": capped_length(self.query_length, self.limit), "index": index,
                **({"plaid": asdict(self.settings.search.plaid), "backend": self.backend} if index == "plaid" else {})}

    # -------------------------------------------------------------------- helpers
    def _maxsim(self, queries: torch.Tensor, store: TokenStore, top_k: int,
                rank: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        s = self.settings
        return maxsim_search(queries, store, top_k, chunk_tokens=s.maxsim_chunk_tokens,
                             score_budget=s.maxsim_score_budget, device=s.device, show_progress=s.show_progress,
                             rank=rank)

    def encode_queries(self, queries: list[str]) -> list[np.ndarray]:
        s = self.settings
        self.model.query_length = capped_length(self.query_length, self.limit)
        out: list[np.ndarray] = [np.zeros((0, 0), dtype=np.float32)] * len(queries)
        for idx, embs in encode_tokens(self.model, queries, is_query=True, device=s.device, precision=s.precision,
                                       batching=s.batching, desc="queries", show_progress=s.show_progress):
            for i, e in zip(idx, embs, strict=True):
                out[i] = e
        return out

    def _corpus_tokens(self, ds: RetrievalDataset) -> tuple[TokenStore, bool]:
        s = self.settings
        key = cache_key({"identity": self.cache_identity, "document_length": self.document_length},
                        ds.fingerprint, side="colbert-tokens")
        meta = {"identity": self.cache_identity, "data": ds.fingerprint, "dataset": ds.name,
                "document_length": self.document_length}
        chunks = [lambda a=a, b=b: ds.corpus.texts(a, b) for a, b in ds.corpus.bounds()]
        if s.cache_dir is not None:
            return TokenStore.cached(Path(s.cache_dir) / key, len(ds),
                                     lambda: self._document_batches(chunks, f"{ds.name}: corpus"), meta)
        self._tmp_store = tempfile.TemporaryDirectory(prefix="harness-tokens-")
        root = Path(self._tmp_store.name) / key
        return TokenStore.write(root, self._document_batches(chunks, f"{ds.name}: corpus"), len(ds), meta), False

    def _document_batches(self, chunks: Sequence[Callable[[], list[str]]],
                          desc: str) -> Iterator[tuple[np.ndarray, list[np.ndarray]]]:
        """The documents' token embeddings, batch by batch, chunk by chunk, positions counted across them."""
        s = self.settings
        self.model.document_length = self.document_length
        start = 0
        for read in chunks:
            texts = read()
            for idx, embs in encode_tokens(self.model, texts, is_query=False, device=s.device, precision=s.precision,
                                           batching=s.batching, desc=desc, show_progress=s.show_progress):
                yield idx + start, embs
            start += len(texts)

    def close(self) -> None:
        """Drop the last dataset's index and temporary files (the cache stays)."""
        self._plaid = None
        for attr in ("_tmp", "_tmp_store"):
            tmp = getattr(self, attr, None)
            if tmp is not None:
                tmp.cleanup()
                setattr(self, attr, None)
