"""A PLAID build's host memory, modelled on the build as each backend runs it (pure: no torch, no corpus), for the
run's check before anything is loaded and the paper graph's ``--mem``: the phases (k-means sample, k-means,
compression, IVF, the index the search holds) do not overlap, so the peak is the largest, plus the document ids.
Sizes are read off PyLate 1.6's Stanford backend and fast-plaid 1.4.6 (CPU: on a GPU the host needs less) and checked
against measured builds by ``benchmarks/plaid_memory.py`` (docs/retrieval.md, "PLAID's memory")."""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.core.errors import HarnessError
from harness.core.work import cost_data
from harness.tasks.retrieval.settings import MultiVectorSearch, PlaidSettings, plaid_backend

#: fastkmeans' distance block (points x centroids, float32)
KMEANS_POINTS, KMEANS_CENTROIDS, MAX_POINTS_PER_CENTROID = 51_200, 10_240, 256
#: documents per compressed chunk: Stanford's Collection.get_chunksize, fast-plaid's create batch_size
CHUNK_DOCS = 25_000
#: Stanford: tokens per ResidualCodec.compress batch and floats of its centroid-score block (compress_into_codes)
COMPRESS_TOKENS, SCORE_FLOATS = 1 << 18, 1 << 29
#: fast-plaid: tokens per centroid-score block (rust/index/create.rs compress_into_codes)
FAST_SCORE_TOKENS = 2048
#: per document: its id as a string in a list and PyLate's two id maps (dict entries), and the per-document
#: lengths and tensors views the backends keep (bytes; Python objects)
ID_BYTES, DOC_BYTES = 320, 160
#: bytes per token of the IVF phase: codes int64, sorted values and positions, token-to-document int32, IVF int32
IVF_BYTES = 8 + 16 + 4 + 4


@dataclass(frozen=True)
class PlaidMemory:
    """The estimate: bytes per phase (the peak is the largest, plus ``ids``)."""

    phases: dict[str, float]
    ids: float

    @property
    def peak(self) -> float:
        return max(self.phases.values()) + self.ids

    @property
    def gb(self) -> float:
        return self.peak / 2**30

    @property
    def phase(self) -> str:
        return max(self.phases, key=lambda k: self.phases[k])

    def describe(self) -> dict[str, float | str]:
        return {"index_memory_gb_estimate": round(self.gb, 3), "index_memory_phase": self.phase}


def sample_docs(n_docs: int) -> int:
    """ColBERTv2's k-means sample: 1 + 16 sqrt(120 N) documents (at most N)."""
    return min(1 + int(16 * math.sqrt(120 * n_docs)), n_docs)


def partitions(n_tokens: float) -> int:
    """Centroids: 2^floor(log2(16 sqrt(tokens)))."""
    return int(2 ** math.floor(math.log2(16 * math.sqrt(max(n_tokens, 1.0)))))


def plaid_memory(n_docs: int, n_tokens: float, dim: int, settings: PlaidSettings, backend: str) -> PlaidMemory:
    """Host bytes of a PLAID build and its search over ``n_docs`` documents of ``n_tokens`` tokens in all, ``dim``
    wide, with ``settings`` (nbits per residual dimension, n_full_scores candidates decompressed per query) on
    ``backend`` (``stanford`` | ``fast``: :func:`~harness.tasks.retrieval.settings.plaid_backend`)."""
    nbits, n_full_scores = settings.nbits, settings.n_full_scores
    n = max(int(n_docs), 1)
    per_doc = n_tokens / n
    t_sample = sample_docs(n) * per_doc
    k = partitions(n_tokens)
    t_chunk = min(CHUNK_DOCS, n + 1) * per_doc
    packed = dim * nbits / 8
    dist = 4.0 * min(t_sample, KMEANS_POINTS) * min(k, KMEANS_CENTROIDS)
    subsample = 4.0 * dim * k * MAX_POINTS_PER_CENTROID if t_sample > k * MAX_POINTS_PER_CENTROID else 0.0
    phases = {
        "sample": 4.0 * dim * t_sample,
        # the next distance block is allocated before the last one is dropped: two at a time
        "kmeans": max(10.0 * dim * t_sample, 6.0 * dim * t_sample + 8 * t_sample + subsample + 2 * dist),
        "ivf": IVF_BYTES * n_tokens + DOC_BYTES * n,
    }
    if backend == "fast":
        score = 4.0 * FAST_SCORE_TOKENS * k
        phases["compress"] = (12 + nbits) * dim * t_chunk + score + 2 * (8 + packed) * t_chunk
        phases["index"] = DOC_BYTES * n + 3.0 * dim * per_doc * n_full_scores    # codes, residuals: memory-mapped
    else:
        batch = min(COMPRESS_TOKENS, t_chunk)
        score = 4.0 * min(SCORE_FLOATS, k * batch)
        phases["compress"] = 4 * dim * t_chunk + score + (12 + 2 * nbits) * dim * batch + 2 * (8 + packed) * t_chunk
        phases["index"] = (8 + packed) * n_tokens + DOC_BYTES * n + 3.0 * dim * per_doc * n_full_scores
    return PlaidMemory(phases, ID_BYTES * n)


def job_host_gb(n_docs: float, n_queries: float, tokens_per_doc: float, search: MultiVectorSearch | None, dim: int,
                shards: int) -> float:
    """Host GB a retrieval job needs for one dataset (conf/paper/cost.yaml ``host_memory``: a fixed part, bytes per
    document and per query), plus, for a multi-vector ``search`` with PLAID, the build's peak over a corpus shard
    (``shards``: K, each built and searched on its own). Dense and exact MaxSim read their embeddings memory-mapped."""
    c = cost_data()["host_memory"]
    gb = c["fixed_gb"] + (c["bytes_per_doc"] * n_docs + c["bytes_per_query"] * n_queries) / 2**30
    if search is not None and search.index == "plaid":
        k = max(int(shards), 1)
        asked = search.plaid.backend      # as asked where it is (the planning machine may lack fast-plaid)
        gb += plaid_memory(math.ceil(n_docs / k), n_docs * tokens_per_doc / k, dim, search.plaid,
                           asked if asked != "auto" else plaid_backend(asked)).gb
    return gb


def check_plaid_memory(dataset: str, estimate: PlaidMemory, limit_gb: float | None, backend: str) -> None:
    """One line, before anything is loaded, when the build needs more than ``task.plaid_max_memory_gb``."""
    if limit_gb is None or estimate.gb <= limit_gb:
        return
    raise HarnessError(f"{dataset}: a PLAID index ({backend} backend) needs about {estimate.gb:.1f} GB of host memory "
                       f"(its {estimate.phase} phase), over task.plaid_max_memory_gb={limit_gb:g}: run it on a node "
                       "with more memory and raise the limit, split the corpus with task.shards=K (an index per "
                       "shard), or use task.index=exact")
