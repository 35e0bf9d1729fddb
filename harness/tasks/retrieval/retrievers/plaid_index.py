"""ColBERT indexes with PyLate. PLAID: the backend (fast-plaid when installed, else Stanford's C++ extensions), a
memory check, the build, the search. Voyager, the authors' index: PyLate's HNSW over document tokens then exact
MaxSim rerank (``retrieve.ColBERT``) with MB@8c57a0f:examples/evaluate_pylate.py:23's parameters (M 200,
ef_construction 500, ef_search 500) and depth k=100 (:53): :class:`VoyagerSettings`; CPU, offline. Document ids are
corpus positions as strings, so both give (scores, positions) arrays."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import os
import random
import shutil
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.core.console import step
from harness.core.errors import HarnessError
from harness.tasks.retrieval.retrievers.plaid_memory import partitions
from harness.tasks.retrieval.retrievers.token_store import TokenStore
from harness.tasks.retrieval.settings import PlaidSettings, VoyagerSettings

log = logging.getLogger(__name__)


#: C++ extensions PyLate's Stanford PLAID backend compiles on first use
_STANFORD_EXTENSIONS = ("segmented_lookup_cpp", "filter_pids_cpp", "decompress_residuals_cpp", "segmented_maxsim_cpp")
_STALE_LOCK_S = 900


def plaid_fits(n_tokens: int) -> tuple[bool, str]:
    """Whether PLAID's k-means (2^floor(log2(16 sqrt(n))) centroids, 5% held out) has a token per centroid."""
    if n_tokens < 1:
        return False, "the corpus has no document tokens"
    k = partitions(n_tokens)
    points = n_tokens - int(min(0.05 * n_tokens, 50_000))
    if points >= k:
        return True, ""
    return False, (f"corpus too small for PLAID's k-means ({points} training token embeddings < {k} "
                   "centroids); evaluated with exact MaxSim instead")


def prepare_stanford_extensions() -> None:
    """The Stanford backend compiles 4 C++ extensions on first use (~100 s; TORCH_EXTENSIONS_DIR): make that work or
    fail at once with the fix (this environment's ninja on PATH, a C++ compiler, no lock left by a killed build)."""
    from torch.utils import cpp_extension

    bindir = str(Path(sys.executable).parent)
    if shutil.which("ninja") is None and Path(bindir, "ninja").exists():
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    if shutil.which("ninja") is None:
        raise HarnessError("PLAID (Stanford backend) needs ninja to build its C++ extensions: pip install "
                           "ninja==1.11.1.4, or use task.index=exact.")
    cxx = os.environ.get("CXX", "c++")
    if shutil.which(cxx) is None:
        raise HarnessError(f"PLAID (Stanford backend) compiles C++ extensions on first use and needs a C++ compiler "
                           f"({cxx!r} not found): install one (apt-get install g++), install fast-plaid, or use "
                           "task.index=exact.")
    for name in _STANFORD_EXTENSIONS:
        lock = Path(cpp_extension._get_build_directory(name, verbose=False)) / "lock"
        if lock.exists() and time.time() - lock.stat().st_mtime > _STALE_LOCK_S:
            log.warning("removing stale build lock %s (left by an interrupted build)", lock)
            lock.unlink(missing_ok=True)


def stanford_extensions_built() -> bool:
    """Whether the Stanford backend's C++ extensions are already compiled (else its first use compiles them)."""
    from torch.utils import cpp_extension

    return all(any(Path(cpp_extension._get_build_directory(name, verbose=False)).glob(f"{name}*.so"))
               for name in _STANFORD_EXTENSIONS)


class _LogWriter(io.TextIOBase):
    """stdout of the Stanford backend (dozens of lines per index) -> debug log."""

    def write(self, s: str) -> int:
        if s.strip():
            log.debug("plaid: %s", s.rstrip())
        return len(s)


class StoreDocs(Sequence):
    """The store's documents, each read on demand as an fp16 view of its memory map (nothing is copied until a
    backend reads it): PyLate's Stanford ``Collection`` iterates it chunk by chunk."""

    def __init__(self, store: TokenStore) -> None:
        self.store = store

    def __len__(self) -> int:
        return len(self.store)

    def __getitem__(self, i: int) -> np.ndarray:   # type: ignore[override]
        if not 0 <= i < len(self.store):
            raise IndexError(i)
        return self.store.doc(i)


def store_views(store: TokenStore) -> list[torch.Tensor]:
    """fast-plaid's list of documents as torch views of the store's memory map (no copy: its ``create`` reads them
    batch by batch)."""
    with warnings.catch_warnings():   # read-only memory map: torch warns that it cannot write to it; nothing does
        warnings.simplefilter("ignore", UserWarning)
        whole = torch.from_numpy(np.asarray(store.emb))
    return [whole[int(s) : int(s) + int(n)] for s, n in zip(store.starts, store.lengths, strict=True)]


def check_plaid_backend(backend: str) -> None:
    """Before any encoding: the backend's imports and, for Stanford, its C++ extensions' prerequisites."""
    if backend == "fast":
        try:
            import fast_plaid.search  # noqa: F401
        except (ImportError, OSError) as exc:
            raise HarnessError(f"task.plaid.backend=fast: fast-plaid does not import ({exc}); reinstall it for this "
                               "torch, use task.plaid.backend=stanford, or task.index=exact") from None
    else:
        prepare_stanford_extensions()
        from pylate.indexes.stanford_nlp.data.collection import Collection  # noqa: F401


def build_plaid(store: TokenStore, settings: PlaidSettings, backend: str, folder: Path, device: str,
                show_progress: bool = True):
    """A seeded PyLate PLAID index over the store's documents (ids = corpus positions as strings), read from its
    memory map as the backend needs them: Stanford's indexer samples its k-means documents, then compresses
    25,000 documents at a time (a lazy ``Collection``); fast-plaid's ``create`` gets zero-copy views."""
    from pylate import indexes

    first_use = ""
    if backend == "stanford":
        from pylate.indexes.stanford_nlp.data.collection import Collection

        prepare_stanford_extensions()
        if not stanford_extensions_built():
            first_use = "first use: compiling PyLate's 4 C++ extensions first, about 2 minutes"
    random.seed(settings.seed)
    np.random.seed(settings.seed)
    torch.manual_seed(settings.seed)
    kwargs: dict[str, Any] = dict(
        index_folder=str(folder), index_name="index", override=True, use_fast=backend == "fast", nbits=settings.nbits,
        kmeans_niters=settings.kmeans_niters, n_ivf_probe=settings.n_ivf_probe, n_full_scores=settings.n_full_scores,
        seed=settings.seed, show_progress=show_progress,
    )
    if backend == "fast":
        kwargs["device"] = device
        docs: Any = store_views(store)
    else:
        kwargs["embedding_size"] = store.dim
        docs = Collection(data=StoreDocs(store))    # Collection.cast passes a Collection through as it is
    with step(f"PLAID index ({backend}) over {len(store):,} documents, {store.n_tokens:,} tokens",
              show=show_progress, starting=first_use), contextlib.redirect_stdout(_LogWriter()):
        index = indexes.PLAID(**kwargs)
        index.add_documents(documents_ids=[str(i) for i in range(len(store))], documents_embeddings=docs)
    return index


def plaid_search(index: Any, queries: list[np.ndarray], top_k: int) -> tuple[np.ndarray, np.ndarray]:
    same = len({q.shape for q in queries}) == 1
    with contextlib.redirect_stdout(_LogWriter()):
        hits = index(np.stack(queries) if same else queries, k=top_k)
    return _arrays(hits, max((len(h) for h in hits), default=0))


def _arrays(hits: list[list[dict[str, Any]]], width: int) -> tuple[np.ndarray, np.ndarray]:
    """PyLate's hits as [queries, width] scores and positions, -inf / -1 where fewer came back."""
    scores = np.full((len(hits), width), -np.inf, dtype=np.float32)
    idx = np.full((len(hits), width), -1, dtype=np.int64)
    for row, h in enumerate(hits):
        for j, r in enumerate(h[:width]):
            scores[row, j], idx[row, j] = r["score"], int(r["id"])
    return scores, idx


# ------------------------------------------------------------------------------------------------ Voyager
def check_voyager() -> None:
    """One ``error:``-style refusal, before any encoding, when the voyager package is missing."""
    if importlib.util.find_spec("voyager") is None:
        raise HarnessError("task.index=voyager needs the voyager package (pip install voyager; PyLate's Voyager "
                           "index), which is not installed; or use task.index=plaid or exact")


def build_voyager(docs: Sequence[np.ndarray], dim: int, settings: VoyagerSettings, folder: Path) -> Any:
    """A PyLate Voyager index over ``docs`` (one [tokens, dim] array per document, ids = positions)."""
    check_voyager()
    from pylate import indexes

    index = indexes.Voyager(index_folder=str(folder), index_name="index", override=True, embedding_size=dim,
                            M=settings.M, ef_construction=settings.ef_construction, ef_search=settings.ef_search)
    with contextlib.redirect_stderr(io.StringIO()):          # PyLate's per-batch progress bar
        index.add_documents(documents_ids=[str(i) for i in range(len(docs))],
                            documents_embeddings=[np.asarray(d, dtype=np.float32) for d in docs])
    return index


def voyager_search(index: Any, queries: Sequence[np.ndarray], top_k: int, depth: int = VoyagerSettings.k
                   ) -> tuple[np.ndarray, np.ndarray]:
    """PyLate's ``retrieve.ColBERT`` over the index (token candidates, exact MaxSim rerank): [queries, top_k] scores
    and positions, -inf / -1 where fewer came back; at most ``depth`` (the authors' k=100: PyLate keeps its
    default 100 neighbours per query token; a deeper k raises them, a different search)."""
    from pylate import retrieve

    with contextlib.redirect_stderr(io.StringIO()):
        hits = retrieve.ColBERT(index=index).retrieve(
            queries_embeddings=[np.asarray(q, dtype=np.float32) for q in queries], k=min(top_k, depth))
    return _arrays(hits, top_k)
