"""Multi-vector (ColBERT) retrieval with PyLate: token embeddings of the corpus (cached fp16 on disk,
memory-mapped), then a PLAID index (fast-plaid when installed, else PyLate's Stanford PLAID backend; seeded) or
exact MaxSim over every document (the parity reference).

Reusable by any family: ``load_colbert(spec, ...)`` gives the model, ``MultiVectorRetriever(model,
MultiVectorSettings(document_length=..., query_length=...), cache_identity)`` evaluates it (e.g. MLDR with
``document_length=8192``); lengths beyond the model's position limit are capped and the cap is recorded.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import logging
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from harness.console import Progress, step
from harness.errors import HarnessError
from harness.evaluation.embedding_cache import cache_key, content_hash
from harness.evaluation.encode import token_budget_batches
from harness.evaluation.search import id_rank
from harness.models import autocast, usable_positions
from harness.typed import choices

if TYPE_CHECKING:
    from pylate.models import ColBERT

    from harness.data.retrieval import RetrievalDataset
    from harness.models import ModelSpec

log = logging.getLogger(__name__)

#: C++ extensions PyLate's Stanford PLAID backend compiles on first use
_STANFORD_EXTENSIONS = ("segmented_lookup_cpp", "filter_pids_cpp", "decompress_residuals_cpp", "segmented_maxsim_cpp")
_STALE_LOCK_S = 900


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


def token_cache_dir(cache_root: object, enabled: bool) -> str | None:
    """Where a family keeps corpus token embeddings (``<paths.cache>/colbert-tokens``), or None when caching is off."""
    return str(Path(str(cache_root)).expanduser() / "colbert-tokens") if enabled else None


@dataclass(kw_only=True)
class MultiVectorSettings:
    device: str = "cpu"
    precision: str = "fp32"
    query_length: int = 32
    document_length: int = 510
    index: str = choices("plaid", "exact", "voyager", default="plaid")   # voyager: the authors' PyLate HNSW
    plaid: PlaidSettings | None = None  # index=plaid: PyLate's PLAID parameters (task.plaid: conf/plaid/default.yaml)
    batch_tokens: int = 16384           # encoding: padded tokens per batch
    max_batch_size: int = 512
    maxsim_chunk_tokens: int = 1 << 18  # exact MaxSim: document tokens (padded) per corpus chunk
    maxsim_score_budget: int = 1 << 26  # exact MaxSim: floats of query-token x document-token scores at a time
    cache_dir: str | None = None        # None: token embeddings in a temporary directory, removed afterwards
    plaid_max_memory_gb: float | None = None   # PLAID: refuse a corpus whose index build needs more (None: no check)
    show_progress: bool = True


# ------------------------------------------------------------------------------------------------ the model
def is_colbert_checkpoint(local: str | os.PathLike) -> bool:
    """A directory PyLate saved (it has its projection): loaded as is, no new head."""
    modules, config = Path(local) / "modules.json", Path(local) / "config.json"
    if modules.exists() and "pylate" in modules.read_text():
        return True
    return config.exists() and "HF_ColBERT" in config.read_text()   # a Stanford ColBERT checkpoint


def load_colbert(spec: ModelSpec, *, device: str = "cpu", embedding_size: int = 128,
                 seed: int = 42) -> tuple[ColBERT, dict[str, Any]]:
    """A PyLate ColBERT for ``spec`` (``[Q] ``/``[D] `` prefixes, query expansion) and the record's model block.

    A PyLate checkpoint loads with its own projection; a plain encoder (ModernBERT-base, MiniLM) gets a new
    ``embedding_size`` projection and new prefix-token embeddings, initialised from ``seed``.
    """
    from pylate import models

    from harness.models import _check_attn, model_identity, resolve_path

    _check_attn(spec)
    local, revision = resolve_path(spec)
    model_kwargs: dict[str, Any] = {"attn_implementation": spec.attn_implementation}
    if spec.dtype != "float32":
        model_kwargs["dtype"] = getattr(torch, spec.dtype)
    checkpoint = is_colbert_checkpoint(local)
    torch.manual_seed(seed)   # the new projection and [Q]/[D] rows of a base encoder are random
    try:
        model = models.ColBERT(
            model_name_or_path=local, device=device, embedding_size=None if checkpoint else embedding_size,
            trust_remote_code=spec.trust_remote_code, model_kwargs=model_kwargs,
            tokenizer_kwargs={"trust_remote_code": spec.trust_remote_code},
            config_kwargs={"trust_remote_code": spec.trust_remote_code},
        )
    except (OSError, ValueError, json.JSONDecodeError) as exc:
        raise HarnessError(f"could not load model {spec.name!r} from {local} as a ColBERT model: {exc}") from exc
    block = model_identity(spec, local, revision)
    block["colbert"] = {
        "head": "loaded from the checkpoint" if checkpoint else f"new projection, seed {seed}",
        "embedding_size": int(model[-1].out_features), "position_limit": usable_positions(model),
        "query_prefix": model.query_prefix, "document_prefix": model.document_prefix,
        "do_query_expansion": model.do_query_expansion, "attend_to_expansion_tokens": model.attend_to_expansion_tokens,
    }
    return model, block


def capped_length(requested: int, limit: int | None) -> int:
    return requested if limit is None else min(requested, limit)


# ------------------------------------------------------------------------------------------------ encoding
def _token_lengths(model: ColBERT, texts: list[str], max_length: int) -> np.ndarray:
    """Tokens per text after truncation (prefix included): only used to group texts into batches."""
    tok = model[0].tokenizer
    prefix = 1 if model.document_prefix_id is not None else 0
    stripped = [str(t).strip() for t in texts]
    if getattr(model[0], "do_lower_case", False):
        stripped = [t.lower() for t in stripped]
    enc = tok(stripped, truncation=True, max_length=max_length - prefix, padding=False)
    return np.fromiter((len(x) + prefix for x in enc["input_ids"]), dtype=np.int64, count=len(texts))


def encode_tokens(model: ColBERT, texts: list[str], *, is_query: bool, device: str, precision: str = "fp32",
                  batch_tokens: int = 16384, max_batch_size: int = 512, desc: str = "encoding",
                  show_progress: bool = True) -> Iterator[tuple[np.ndarray, list[np.ndarray]]]:
    """(text positions, their L2-normalised token embeddings as float32) batch by batch, longest texts first.

    The tokens kept are PyLate's (``ColBERT.encode``): documents without padding and skiplist (punctuation)
    tokens, queries padded with mask tokens to ``query_length`` (query expansion). Why not ``ColBERT.encode``:
    it batches a fixed number of texts sorted by characters and runs in the weights' dtype; token-budget
    batches keep short-text batches large and the configured precision is applied with autocast.
    """
    if not texts:
        return
    length = model.query_length if is_query else model.document_length
    lengths = np.full(len(texts), length) if is_query and model.do_query_expansion else \
        _token_lengths(model, texts, length)
    model.eval()
    with Progress(len(texts), desc, "texts", show=show_progress) as bar:
        for idx in token_budget_batches(lengths, batch_tokens, max_batch_size):
            features = model.tokenize([texts[i] for i in idx], is_query=is_query)
            features = {k: v.to(device) for k, v in features.items()}
            with torch.inference_mode(), autocast(precision, device):
                out = model(features)
            emb = out["token_embeddings"].float()
            if is_query:
                masks = torch.ones_like(features["input_ids"], dtype=torch.bool) if model.do_query_expansion \
                    else out["attention_mask"].bool()
            else:
                masks = model.skiplist_mask(features["input_ids"], model.skiplist) & out["attention_mask"].bool()
            yield idx, [torch.nn.functional.normalize(emb[i][m], p=2, dim=-1).cpu().numpy()
                        for i, m in enumerate(masks)]
            bar.update(len(idx))


# ------------------------------------------------------------------------------------------------ token store
class TokenStore:
    """Every document's token embeddings, fp16, in one memory-mapped file (in encoding order: longest first)
    with per-document ``starts`` and ``lengths``. Written to a temporary directory and renamed, so a
    half-written store is never read."""

    def __init__(self, root: Path):
        meta = json.loads((root / "meta.json").read_text())
        if meta.get("key") != root.name:
            raise ValueError(f"claims key {meta.get('key')!r}, not {root.name!r} (another store copied in, or one "
                             "written before claims were kept)")
        for name, claimed in (meta.get("files") or {}).items():
            if content_hash(root / name) != claimed:
                raise ValueError(f"{name} does not match its claimed content hash (altered, truncated or replaced)")
        if set(meta.get("files") or {}) != {"tokens.f16", "starts.npy", "lengths.npy"}:
            raise ValueError("keeps no content hashes of its files")
        self.root, self.dim, self.n_tokens = root, int(meta["dim"]), int(meta["n_tokens"])
        self.starts = np.load(root / "starts.npy")
        self.lengths = np.load(root / "lengths.npy")
        self.emb = np.memmap(root / "tokens.f16", dtype=np.float16, mode="r", shape=(self.n_tokens, self.dim)) \
            if self.n_tokens else np.zeros((0, self.dim), dtype=np.float16)

    def __len__(self) -> int:
        return len(self.starts)

    def doc(self, i: int) -> np.ndarray:
        s = int(self.starts[i])
        return self.emb[s : s + int(self.lengths[i])]

    def storage_order(self) -> np.ndarray:
        return np.argsort(self.starts, kind="stable")

    @staticmethod
    def write(root: Path, batches: Iterator[tuple[np.ndarray, list[np.ndarray]]], n_docs: int,
              meta: Mapping[str, Any]) -> TokenStore:
        root.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}.tmp"))
        try:
            starts = np.full(n_docs, -1, dtype=np.int64)
            lengths = np.zeros(n_docs, dtype=np.int64)
            pos, dim = 0, 0
            with open(tmp / "tokens.f16", "wb") as fh:
                for idx, embs in batches:
                    for i, e in zip(idx, embs, strict=True):
                        starts[i], lengths[i], dim = pos, len(e), e.shape[1]
                        fh.write(np.ascontiguousarray(e, dtype=np.float16).tobytes())
                        pos += len(e)
            if (starts < 0).any():
                raise HarnessError(f"encoding produced no embeddings for {int((starts < 0).sum())} documents")
            np.save(tmp / "starts.npy", starts)
            np.save(tmp / "lengths.npy", lengths)
            files = {name: content_hash(tmp / name) for name in ("tokens.f16", "starts.npy", "lengths.npy")}
            (tmp / "meta.json").write_text(json.dumps({**meta, "dim": dim, "n_tokens": pos, "n_docs": n_docs,
                                                       "dtype": "float16", "key": root.name, "files": files},
                                                      default=str, indent=2))
            if root.exists() and TokenStore.read(root) is None:   # a store that is not what it claims: set aside
                shutil.rmtree(root, ignore_errors=True)
            if root.exists():   # another process finished the same store first: keep theirs
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                os.replace(tmp, root)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return TokenStore(root)

    @staticmethod
    def read(root: Path) -> TokenStore | None:
        if not (root / "meta.json").exists():
            return None
        try:
            return TokenStore(root)
        except (OSError, ValueError, KeyError) as exc:   # damaged or foreign: re-encode, never trust it
            log.warning("token-embedding cache %s is not usable (%s): encoding it again", root, exc)
            return None


# ------------------------------------------------------------------------------------------------ exact MaxSim
def _chunks(store: TokenStore, chunk_tokens: int) -> Iterator[np.ndarray]:
    """Consecutive documents in storage order, each chunk's count x longest <= ``chunk_tokens``."""
    order = store.storage_order()
    start, longest = 0, 0
    for j, i in enumerate(order):
        n = max(int(store.lengths[i]), 1)
        if j > start and (j - start + 1) * max(longest, n) > chunk_tokens:
            yield order[start:j]
            start, longest = j, 0
        longest = max(longest, n)
    if start < len(order):
        yield order[start:]


def _padded(store: TokenStore, docs: np.ndarray, device: str) -> torch.Tensor:
    """[docs, longest, dim] float32; a shorter document is padded with copies of its own first token, so the
    max over its tokens, hence its MaxSim score, is exactly the unpadded one (no mask needed)."""
    s0 = int(store.starts[docs[0]])
    end = int(store.starts[docs[-1]] + store.lengths[docs[-1]])
    flat = torch.from_numpy(np.asarray(store.emb[s0:end], dtype=np.float32)).to(device)
    lens = torch.from_numpy(store.lengths[docs]).to(device)
    rel = torch.from_numpy(store.starts[docs] - s0).to(device)
    steps = torch.arange(int(lens.max()), device=device)
    gather = rel[:, None] + torch.where(steps[None, :] < lens[:, None], steps[None, :], 0)
    return flat[gather]


def maxsim_search(queries: torch.Tensor, store: TokenStore, top_k: int, *, chunk_tokens: int = 1 << 18,
                  score_budget: int = 1 << 26, device: str = "cpu", show_progress: bool = True,
                  rank: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact ColBERT scores of every (query, document) and the running top-k: (scores, doc positions), each
    [n_queries, min(top_k, n_docs)], best first; equal scores in ``rank`` order (a tie key per document; None:
    corpus position), exactly as :func:`harness.evaluation.search.ranked_topk`.

    Scores come from PyLate's ``scores.colbert_scores`` (the function ``rank.rerank`` uses). Why not
    ``rank.rerank`` over all documents: it pads the documents again for every query and returns a dict per
    document; here each corpus chunk is read from the memory-mapped store and padded once for all queries.
    """
    from pylate.scores import colbert_scores

    from harness.evaluation.search import ranked_topk

    n_q, q_len = queries.shape[0], queries.shape[1]
    k = min(top_k, len(store))
    best_s = torch.full((n_q, 0), float("-inf"), device=device)
    best_i = torch.zeros((n_q, 0), dtype=torch.long, device=device)
    if n_q == 0 or k == 0:
        return best_s.cpu().numpy(), best_i.cpu().numpy()
    q = queries.to(device)
    tie = None if rank is None else torch.from_numpy(np.asarray(rank, dtype=np.int64)).to(device)
    bar = Progress(len(store), f"MaxSim search, {n_q} queries", "documents", show=show_progress)
    for docs in _chunks(store, chunk_tokens):
        d = _padded(store, docs, device)
        ids = torch.from_numpy(docs).to(device)
        step = max(1, score_budget // (q_len * d.shape[0] * d.shape[1]))
        parts_s, parts_i = [], []
        for qs in range(0, n_q, step):
            with torch.inference_mode():
                s = colbert_scores(q[qs : qs + step], d, backend="torch")
            cs, ci = ranked_topk(s, ids, k, tie)
            top_s, top_i = ranked_topk(torch.cat([best_s[qs : qs + step], cs], dim=1),
                                       torch.cat([best_i[qs : qs + step], ci], dim=1), k, tie)
            parts_s.append(top_s)
            parts_i.append(top_i)
        best_s, best_i = torch.cat(parts_s), torch.cat(parts_i)
        bar.update(len(docs))
    bar.close()
    return best_s.cpu().numpy(), best_i.cpu().numpy()


def pad_queries(queries: list[np.ndarray], dim: int) -> torch.Tensor:
    """[n, longest, dim] float32; zero query vectors add 0 to a MaxSim sum, so the padding is exact."""
    width = max((len(x) for x in queries), default=0)
    padded = torch.zeros((len(queries), width, dim))
    for i, x in enumerate(queries):
        padded[i, : len(x)] = torch.from_numpy(x)
    return padded


# ------------------------------------------------------------------------------------------------ PLAID
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


def plaid_fits(n_tokens: int) -> tuple[bool, str]:
    """Whether PLAID's k-means can run on ``n_tokens`` document tokens: it makes 2^floor(log2(16 sqrt(n)))
    centroids from the tokens less a 5% held-out sample and needs at least one point per centroid."""
    if n_tokens < 1:
        return False, "the corpus has no document tokens"
    partitions = int(2 ** np.floor(np.log2(16 * np.sqrt(n_tokens))))
    points = n_tokens - int(min(0.05 * n_tokens, 50_000))
    if points >= partitions:
        return True, ""
    return False, (f"corpus too small for PLAID's k-means ({points} training token embeddings < {partitions} "
                   "centroids); evaluated with exact MaxSim instead")


def prepare_stanford_extensions() -> None:
    """The Stanford backend compiles 4 C++ extensions on first use (~100 s; cached in TORCH_EXTENSIONS_DIR).
    Make that work on a clean machine or fail at once with the fix: ninja from this environment on PATH, a
    C++ compiler, and no lock left behind by a killed earlier build (torch would wait on it forever)."""
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


def build_plaid(store: TokenStore, settings: PlaidSettings, backend: str, folder: Path, device: str,
                show_progress: bool = True):
    """A seeded PyLate PLAID index over the store's documents (ids = corpus positions as strings)."""
    from pylate import indexes

    first_use = ""
    if backend == "stanford":
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
    else:
        kwargs["embedding_size"] = store.dim
    docs = [np.asarray(store.doc(i), dtype=np.float32) for i in range(len(store))]
    with step(f"PLAID index ({backend}) over {len(store):,} documents, {store.n_tokens:,} tokens",
              show=show_progress, starting=first_use), contextlib.redirect_stdout(_LogWriter()):
        index = indexes.PLAID(**kwargs)
        index.add_documents(documents_ids=[str(i) for i in range(len(store))], documents_embeddings=docs)
    return index


def rerank_exact(queries: list[np.ndarray], store: TokenStore, idx: np.ndarray, *, chunk_tokens: int = 1 << 18,
                 device: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """Exact MaxSim scores of each query's candidates (``idx``, -1 = none), re-sorted best first."""
    from pylate.scores import colbert_scores

    scores = np.full(idx.shape, -np.inf, dtype=np.float32)
    for row, q in enumerate(queries):
        cands = idx[row][idx[row] >= 0]
        cands = cands[np.argsort(-store.lengths[cands], kind="stable")]   # longest first: little padding
        qt = torch.from_numpy(np.ascontiguousarray(q, dtype=np.float32))[None].to(device)
        out, start = [], 0
        while start < len(cands):
            n = max(1, chunk_tokens // max(int(store.lengths[cands[start]]), 1))
            part = cands[start : start + n]
            with torch.inference_mode():
                out.append(colbert_scores(qt, _padded_docs(store, part, device), backend="torch")[0].cpu().numpy())
            start += n
        s = np.concatenate(out) if out else np.zeros(0, dtype=np.float32)
        order = np.argsort(-s, kind="stable")
        scores[row, : len(cands)], idx[row, : len(cands)] = s[order], cands[order]
        idx[row, len(cands) :] = -1
    return scores, idx


def _padded_docs(store: TokenStore, docs: np.ndarray, device: str) -> torch.Tensor:
    """Like :func:`_padded` for documents anywhere in the store (each padded with its own first token)."""
    longest = int(store.lengths[docs].max())
    out = np.empty((len(docs), longest, store.dim), dtype=np.float32)
    for j, i in enumerate(docs):
        e = store.doc(int(i))
        out[j, : len(e)] = e
        out[j, len(e) :] = e[0]
    return torch.from_numpy(out).to(device)


def plaid_search(index: Any, queries: list[np.ndarray], top_k: int) -> tuple[np.ndarray, np.ndarray]:
    same = len({q.shape for q in queries}) == 1
    with contextlib.redirect_stdout(_LogWriter()):
        hits = index(np.stack(queries) if same else queries, k=top_k)
    width = max((len(h) for h in hits), default=0)
    scores = np.full((len(hits), width), -np.inf, dtype=np.float32)
    idx = np.full((len(hits), width), -1, dtype=np.int64)
    for row, h in enumerate(hits):
        for j, r in enumerate(h):
            scores[row, j], idx[row, j] = r["score"], int(r["id"])
    return scores, idx


# ------------------------------------------------------------------------------------------------ the retriever
class MultiVectorRetriever:
    """:class:`~harness.evaluation.retriever.Retriever` over a PyLate ColBERT model.

    ``cache_identity`` is what the corpus token embeddings depend on (a run identity minus index and search
    keys, plus the weights used); with the capped document length and the corpus content it keys the on-disk
    store, so evaluating again with another index (or top-k, or query length) does not re-encode.
    ``query_length`` may be changed between datasets (PyLate's BEIR recipe uses 48 or 64 on some sets).
    """

    kind = "multi_vector"

    def __init__(self, model: ColBERT, settings: MultiVectorSettings, cache_identity: Mapping[str, Any]):
        self.model = model
        self.settings = settings
        self.cache_identity = dict(cache_identity)
        self.limit = usable_positions(model)
        self.document_length = capped_length(settings.document_length, self.limit)
        if self.document_length < settings.document_length:
            log.warning("document_length %d exceeds the model's %d positions: capped to %d (recorded)",
                        settings.document_length, self.limit, self.document_length)
        self.query_length = settings.query_length
        if settings.index == "plaid" and settings.plaid is None:
            raise HarnessError("index=plaid needs its PLAID parameters (MultiVectorSettings.plaid; the task's come from "
                               "conf/plaid/default.yaml): pass them, or use index=exact")
        self.backend = plaid_backend(settings.plaid.backend) if settings.plaid and settings.index == "plaid" else None
        if settings.index == "voyager":
            from harness.evaluation.voyager_index import check_voyager

            check_voyager()                      # before any encoding
            from harness.evaluation.voyager_index import VoyagerSettings

            self.max_depth: int | None = VoyagerSettings().ef_search   # documents a search returns at most
        else:
            self.max_depth = None
        self.store: TokenStore | None = None
        self.rank: np.ndarray | None = None
        self._plaid: Any = None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._tmp_store: tempfile.TemporaryDirectory | None = None
        self._mode = settings.index

    # -------------------------------------------------------------------- Retriever protocol
    def index(self, ds: RetrievalDataset) -> tuple[dict[str, Any], dict[str, float]]:
        s = self.settings
        self.close()
        t0 = time.perf_counter()
        memory = self.plaid_memory(ds) if s.index == "plaid" else {}
        self.store, hit = self._corpus_tokens(ds)
        timings = {"encode_corpus_s": time.perf_counter() - t0}
        details: dict[str, Any] = {"embedding_cache_hit": hit, "n_doc_tokens": self.store.n_tokens, **memory}
        self.rank = id_rank(ds.corpus_ids)
        self._mode = s.index
        if s.index == "plaid":
            ok, why = plaid_fits(self.store.n_tokens)
            if not ok:
                log.warning("%s: %s", ds.name, why)
                self._mode = "exact"
                details |= {"index": "exact", "index_requested": "plaid", "index_fallback": why}
            else:
                t1 = time.perf_counter()
                self._tmp = tempfile.TemporaryDirectory(prefix="harness-plaid-")
                try:
                    self._plaid = build_plaid(self.store, s.plaid, str(self.backend), Path(self._tmp.name), s.device,
                                              s.show_progress)
                except (RuntimeError, OSError, ImportError) as exc:   # e.g. a C++ extension that does not build
                    raise HarnessError(f"{ds.name}: building the PLAID index ({self.backend}) failed: {exc}. "
                                       "Use task.index=exact, or fix the backend (README: Multi-vector retrieval).") \
                        from exc
                timings["index_s"] = time.perf_counter() - t1
        elif s.index == "voyager":
            from harness.evaluation.voyager_index import VoyagerSettings, build_voyager

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
            from harness.evaluation.voyager_index import voyager_search

            with step(f"Voyager search, {len(q):,} queries, exact MaxSim rerank", show=s.show_progress):
                scores, idx = voyager_search(self._plaid, q, top_k)
        elif self._mode == "plaid":
            rerank = ", exact MaxSim rerank" if s.plaid.rerank else ""
            with step(f"PLAID search, {len(q):,} queries{rerank}", show=s.show_progress):
                scores, idx = plaid_search(self._plaid, q, top_k)
                if s.plaid.rerank:
                    scores, idx = rerank_exact(q, self.store, idx, chunk_tokens=s.maxsim_chunk_tokens,
                                               device=s.device)
        else:
            scores, idx = self._maxsim(pad_queries(q, self.store.dim), self.store, top_k, self.rank)
        return scores, idx, {"encode_queries_s": t1 - t0, "search_s": time.perf_counter() - t1}

    def describe(self) -> dict[str, Any]:
        s = self.settings
        out: dict[str, Any] = {
            "similarity": "MaxSim", "document_text": "title + ' ' + text", "query_length": self.query_length,
            "document_length": self.document_length, "document_length_requested": s.document_length,
            "position_limit": self.limit, "index": s.index, "token_embeddings": "float16 on disk, L2-normalised",
        }
        if s.index == "plaid":
            out["index_params"] = {**asdict(s.plaid), "backend": self.backend}
        elif s.index == "voyager":
            from harness.evaluation.voyager_index import VoyagerSettings

            out["index_params"] = {**asdict(VoyagerSettings()), "rerank": "exact MaxSim (pylate retrieve.ColBERT)"}
        else:
            out["index_params"] = {"exact": "pylate.scores.colbert_scores over every document"}
        return out

    def plaid_memory(self, ds: RetrievalDataset) -> dict[str, Any]:
        """The PLAID build's memory estimate (document tokens x dim x 4 bytes x 2: the float32 embeddings handed to
        PyLate and the backend's working copy) and its backend; a one-line refusal, before any encoding, when it
        exceeds ``plaid_max_memory_gb``."""
        self.model.document_length = self.document_length
        n_tokens = int(_token_lengths(self.model, ds.documents(), self.document_length).sum())
        gb = n_tokens * int(self.model[-1].out_features) * 4 * 2 / 2**30
        limit = self.settings.plaid_max_memory_gb
        if limit is not None and gb > limit:
            raise HarnessError(f"{ds.name}: a PLAID index ({self.backend} backend) over {n_tokens:,} document tokens "
                               f"needs about {gb:.1f} GB, over task.plaid_max_memory_gb={limit:g}: raise the limit on "
                               "a larger machine, or use task.index=exact (task.shards splits it across GPUs)")
        return {"index_backend": self.backend, "index_memory_gb_estimate": round(gb, 3)}

    # -------------------------------------------------------------------- ShardEngine (harness.evaluation.shards)
    @property
    def cache_dir(self) -> str | None:
        return self.settings.cache_dir

    def token_lengths(self, texts: list[str]) -> np.ndarray:
        """Document tokens per text (prefix included), as :func:`encode_tokens` batches them."""
        if self.settings.index != "exact":
            raise HarnessError("task.shards with ColBERT needs task.index=exact (exact MaxSim merges per-shard top-k "
                               "lists); PLAID builds one index over the whole corpus")
        self.model.document_length = self.document_length
        return _token_lengths(self.model, texts, self.document_length)

    def batches(self, lengths: np.ndarray) -> list[np.ndarray]:
        return token_budget_batches(lengths, self.settings.batch_tokens, self.settings.max_batch_size)

    def query_embeddings(self, queries: list[str]) -> np.ndarray:
        """Queries' token embeddings, zero-padded to one length [n, tokens, dim]; cached by text and query length."""
        from harness.evaluation.embedding_cache import cached_embeddings
        from harness.evaluation.shards import texts_key

        length = capped_length(self.query_length, self.limit)
        key = cache_key({"identity": self.cache_identity, "query_length": length}, texts_key(queries), side="queries")
        dim = int(self.model[-1].out_features)
        return cached_embeddings(self.settings.cache_dir, key,
                                 lambda: pad_queries(self.encode_queries(queries), dim).numpy())[0]

    def search_shard(self, texts: list[str], key: str, queries: np.ndarray, top_k: int,
                     rank: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        s = self.settings
        root = Path(str(s.cache_dir)) / key
        store = TokenStore.read(root)
        hit = store is not None and len(store) == len(texts)
        if not hit:
            self.model.document_length = self.document_length
            batches = encode_tokens(self.model, texts, is_query=False, device=s.device, precision=s.precision,
                                    batch_tokens=s.batch_tokens, max_batch_size=s.max_batch_size,
                                    desc="corpus shard", show_progress=s.show_progress)
            store = TokenStore.write(root, batches, len(texts), {"identity": self.cache_identity,
                                                                 "document_length": self.document_length})
        assert store is not None
        # a copy: the cached query array is read-only, which torch.from_numpy does not support
        return *self._maxsim(torch.from_numpy(np.array(queries)), store, top_k, rank), hit

    def search_settings(self) -> dict[str, Any]:
        return {"query_length": capped_length(self.query_length, self.limit), "index": "exact"}

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
                                       batch_tokens=s.batch_tokens, max_batch_size=s.max_batch_size, desc="queries",
                                       show_progress=s.show_progress):
            for i, e in zip(idx, embs, strict=True):
                out[i] = e
        return out

    def _corpus_tokens(self, ds: RetrievalDataset) -> tuple[TokenStore, bool]:
        s = self.settings
        key = cache_key({"identity": self.cache_identity, "document_length": self.document_length},
                        ds.fingerprint, side="colbert-tokens")
        if s.cache_dir is not None:
            root = Path(s.cache_dir) / key
            store = TokenStore.read(root)
            if store is not None and len(store) == len(ds):
                return store, True
        else:
            self._tmp_store = tempfile.TemporaryDirectory(prefix="harness-tokens-")
            root = Path(self._tmp_store.name) / key
        self.model.document_length = self.document_length
        batches = encode_tokens(self.model, ds.documents(), is_query=False, device=s.device, precision=s.precision,
                                batch_tokens=s.batch_tokens, max_batch_size=s.max_batch_size,
                                desc=f"{ds.name}: corpus", show_progress=s.show_progress)
        meta = {"identity": self.cache_identity, "data": ds.fingerprint, "dataset": ds.name,
                "document_length": self.document_length}
        return TokenStore.write(root, batches, len(ds), meta), False

    def close(self) -> None:
        """Drop the last dataset's index and temporary files (the cache stays)."""
        self._plaid = None
        for attr in ("_tmp", "_tmp_store"):
            tmp = getattr(self, attr, None)
            if tmp is not None:
                tmp.cleanup()
                setattr(self, attr, None)
