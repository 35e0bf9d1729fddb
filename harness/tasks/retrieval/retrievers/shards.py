"""Sharded corpus evaluation: K shards each encode a slice of the corpus into the embedding cache and search it,
keeping the top-k per query; cut in the encoder's order at batch boundaries (a shard's embeddings are the unsharded
run's bit for bit), merged by score then document id, so the result is the unsharded one for any K."""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from harness.core.cache_entry import Unusable, get_or_build
from harness.core.errors import HarnessError
from harness.core.results import stable_hash
from harness.tasks.retrieval.retrievers.embedding_cache import (
    cache_key,
    cached_rows,
    texts_key,
    written_aside,
)
from harness.tasks.retrieval.settings import ShardSettings

log = logging.getLogger(__name__)

class ShardMissing(HarnessError):
    """A shard's top-k list is missing or unreadable: nothing is scored (the message is one line)."""


# ------------------------------------------------------------------------------------------------ the plan
@dataclass(frozen=True)
class ShardPlan:
    """``order``: corpus positions in encoding order; shard i is ``order[bounds[i]:bounds[i + 1]]``."""

    order: np.ndarray
    bounds: np.ndarray
    tokens: np.ndarray

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def positions(self, i: int) -> np.ndarray:
        return self.order[self.bounds[i] : self.bounds[i + 1]]


def plan_shards(lengths: np.ndarray, batches: Sequence[np.ndarray], shards: int | str, shard_tokens: int) -> ShardPlan:
    """The encoder's batches cut into ``shards`` runs of about equal tokens, at least one batch each."""
    sizes = np.array([int(lengths[b].sum()) for b in batches], dtype=np.int64)
    total = int(sizes.sum())
    if shards == "auto":
        k = max(1, math.ceil(total / max(1, shard_tokens)))
    elif isinstance(shards, int) and shards >= 1:
        k = shards
    else:
        raise HarnessError(f"task.shards={shards!r}: use a positive number of shards or auto")
    k = max(1, min(k, len(batches)))
    cum = np.cumsum(sizes)
    cuts = [0]
    for j in range(1, k):
        at = int(np.searchsorted(cum, total * j / k)) + 1
        cuts.append(min(max(at, cuts[-1] + 1), len(batches) - (k - j)))
    cuts.append(len(batches))
    order = np.concatenate(list(batches)) if batches else np.zeros(0, dtype=np.int64)
    counts = np.array([0, *(len(b) for b in batches)]).cumsum()
    return ShardPlan(order, counts[cuts], np.array([int(sizes[a:b].sum()) for a, b in itertools.pairwise(cuts)]))


# ------------------------------------------------------------------------------------------------ shard results
def save_topk(path: Path, scores: np.ndarray, positions: np.ndarray, meta: dict[str, Any]) -> None:
    """One shard's top-k (scores, shard-local positions) and facts, written aside and renamed (an existing one kept)."""
    with written_aside(path, suffix=".npz.tmp") as tmp, open(tmp, "wb") as fh:
        np.savez(fh, scores=scores, positions=positions, meta=np.array(json.dumps(meta, default=str)))


def load_topk(path: Path, n_queries: int, n_docs: int, claim: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """A shard's top-k, checked against its claim and shapes; ValueError when unusable."""
    try:
        with np.load(path) as z:
            scores, positions, meta = z["scores"], z["positions"], json.loads(str(z["meta"]))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"unreadable ({type(exc).__name__}: {exc})") from None
    claim = json.loads(json.dumps(claim, default=str)) if claim is not None else None   # as written
    if claim is not None and meta.get("claim") != claim:
        said = meta.get("claim") or {}
        what = [k for k in claim if said.get(k) != claim[k]] or ["everything"]
        raise ValueError(f"not what it claims to be ({', '.join(what)} differ: another shard's, model's, corpus' or "
                         "query set's top-k, or a file written before claims were kept)")
    if scores.shape != positions.shape or scores.shape[0] != n_queries:
        raise ValueError(f"holds {scores.shape} hits, expected {n_queries} queries")
    if positions.size and (positions.min() < -1 or positions.max() >= n_docs):     # -1: no hit (PLAID)
        raise ValueError("positions out of range")
    return scores, positions, meta


# ------------------------------------------------------------------------------------------------ the engine
class ShardEngine(Protocol):
    """What a retriever supplies for sharding: its batch plan, cached query encodings, and one shard's search."""

    cache_dir: str | None
    cache_identity: dict[str, Any]

    def token_lengths(self, texts: list[str]) -> np.ndarray:
        """Tokens per text, as the encoder truncates them."""
        ...

    def batches(self, lengths: np.ndarray) -> list[np.ndarray]:
        """The batches the encoder forms over one chunk of texts of these lengths (positions, longest first)."""
        ...

    def query_embeddings(self, queries: list[str]) -> np.ndarray:
        """The queries' embeddings (cached: encoded once for every shard)."""
        ...

    def search_shard(self, segments: Sequence[Callable[[], list[str]]], n_docs: int, key: str, queries: Any,
                     top_k: int, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """(scores, local positions, cached) of one shard of ``n_docs`` documents read by ``segments``."""
        ...

    def search_settings(self) -> dict[str, Any]:
        """What the top-k lists depend on besides embeddings and queries (similarity, query length, ...)."""
        ...


def merge(parts: Sequence[tuple[np.ndarray, np.ndarray]], top_k: int, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The top-k over the shards' top-k lists (scores, global positions), exactly as one search over all of them."""
    import torch

    from harness.tasks.retrieval.retrievers.search import ranked_topk
    if not parts:
        return np.zeros((0, 0), dtype=np.float32), np.zeros((0, 0), dtype=np.int64)
    s = torch.from_numpy(np.concatenate([p[0] for p in parts], axis=1).astype(np.float32))
    i = torch.from_numpy(np.concatenate([p[1] for p in parts], axis=1).astype(np.int64))
    out_s, out_i = ranked_topk(s, i, top_k, torch.from_numpy(rank))
    return out_s.numpy(), out_i.numpy()


class ShardedRetriever:
    """:class:`~harness.tasks.retrieval.retrievers.retriever.Retriever` evaluating ``engine`` shard by shard."""

    def __init__(self, engine: Any, settings: ShardSettings, launch: Callable[[list[int]], None] | None = None) -> None:
        if engine.cache_dir is None:
            raise HarnessError("task.shards needs the embedding cache (task.embedding_cache=true): shards hand their "
                               "embeddings and top-k lists over through it")
        self.engine, self.settings, self.launch = engine, settings, launch
        self.kind = engine.kind
        self.facts: dict[str, Any] = {}

    # -------------------------------------------------------------------- Retriever protocol
    def index(self, ds: Any) -> tuple[dict[str, Any], dict[str, float]]:
        from harness.tasks.retrieval.retrievers.search import id_rank
        t0 = time.perf_counter()
        self.ds = ds
        # token lengths, cached by the corpus' content: every shard job plans from them, one tokenises
        key = cache_key(self.engine.cache_identity, ds.corpus.key, side=f"{self.kind}-lengths")
        lengths = np.asarray(cached_rows(self.engine.cache_dir, key, (
            (start, self.engine.token_lengths(texts).reshape(-1, 1)) for start, texts in ds.corpus.chunks()),
            len(ds))[0]).ravel()
        # the encoder's batches, chunk by chunk (as the whole corpus is encoded): a shard is a run of them
        self.chunks = ds.corpus.bounds()
        batches = [b + a for a, z in self.chunks for b in self.engine.batches(lengths[a:z])]
        self.plan = plan_shards(lengths, batches, self.settings.shards, self.settings.shard_tokens)
        self.rank = id_rank(ds.corpus_ids)
        self.facts = {"shards": len(self.plan), "shard_launcher": self.settings.shard_launcher,
                      "corpus_tokens": int(lengths.sum())}
        return {}, {"plan_s": time.perf_counter() - t0}

    def search(self, queries: list[str], top_k: int) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
        t0 = time.perf_counter()
        q = self.engine.query_embeddings(queries)
        encode_s = time.perf_counter() - t0
        qkey, every, launcher = texts_key(queries), range(len(self.plan)), self.settings.shard_launcher
        t0 = time.perf_counter()
        # the shards computed for this run: here, each one not there yet (its own locked read decides); externally,
        # all of them; by ``launch``, those with no top-k list yet
        if launcher == "sequential":
            fresh = {i for i in every if self._compute(i, lambda: q, qkey, top_k, len(queries))}
        elif launcher == "external":
            fresh = set(every)
        else:
            todo = [i for i in every if self._read(i, qkey, top_k, len(queries)) is None]
            if todo and self.launch is not None:
                self.launch(todo)
            fresh = set(todo)
        shards_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        parts, metas = [], []
        for i in range(len(self.plan)):
            scores, local, meta = self._require(i, qkey, top_k, len(queries))
            parts.append((scores, np.where(local >= 0, self.plan.positions(i)[np.maximum(local, 0)], -1)))
            metas.append(meta)
        scores, idx = merge(parts, top_k, self.rank)
        cached = [i not in fresh or bool(m.get("embeddings_from_cache")) for i, m in enumerate(metas)]
        self.facts |= {"embedding_cache_hit": all(cached), "shards_from_cache": sum(cached)}
        return scores, idx, {"encode_queries_s": encode_s, "shards_s": shards_s,
                             "encode_corpus_s": sum(float(metas[i].get("encode_s", 0.0)) for i in fresh),
                             "merge_s": time.perf_counter() - t1}

    def describe(self) -> dict[str, Any]:
        return {**self.engine.describe(), **self.facts}

    # -------------------------------------------------------------------- one shard
    def run_shard(self, i: int, queries: list[str], top_k: int) -> bool:
        """A shard job: compute shard ``i``'s top-k list unless it is there (True when computed)."""
        if i >= len(self.plan):
            log.info("%s: shard %d of %d: the plan has only %d shards, nothing to do", self.ds.name, i,
                     self.settings.shards, len(self.plan))
            return False
        qkey = texts_key(queries)
        if self._compute(i, lambda: self.engine.query_embeddings(queries), qkey, top_k, len(queries)):
            return True
        log.info("%s: shard %d of %d already done", self.ds.name, i, len(self.plan))
        return False

    def _claim(self, i: int, qkey: str, top_k: int) -> dict[str, Any]:
        """What shard ``i``'s top-k file is: written into it, checked before it is merged."""
        pos = self.plan.positions(i)
        return {"shard": i, "of": len(self.plan), "embeddings": self._embedding_key(i),
                "ids": texts_key([self.ds.corpus_ids[p] for p in pos.tolist()]), "queries": qkey, "top_k": top_k,
                "search": self.engine.search_settings()}

    def _path(self, i: int, qkey: str, top_k: int) -> Path:
        c = self._claim(i, qkey, top_k)
        key = stable_hash({k: c[k] for k in ("embeddings", "ids", "queries", "top_k", "search")}, length=24)
        return Path(str(self.engine.cache_dir)) / "shard-topk" / f"{key}.npz"

    def _embedding_key(self, i: int) -> str:
        """The shard's documents: the corpus' content and which of them (so sets sharing a corpus share it)."""
        which = hashlib.sha256(np.ascontiguousarray(self.plan.positions(i), dtype=np.int64).tobytes()).hexdigest()
        return cache_key(self.engine.cache_identity, f"{self.ds.corpus.key}/{which[:24]}", side=f"{self.kind}-shard")

    def _segments(self, i: int) -> list[Callable[[], list[str]]]:
        """Readers of shard ``i``'s texts, one per corpus chunk it covers (in encoding order)."""
        pos = self.plan.positions(i)
        starts = np.array([a for a, _ in self.chunks])
        which = np.searchsorted(starts, pos, side="right") - 1
        cuts = np.flatnonzero(np.diff(which)) + 1
        return [lambda part=part: self.ds.corpus.texts_at(part) for part in np.split(pos, cuts)]

    def _compute(self, i: int, q: Callable[[], Any], qkey: str, top_k: int, n_queries: int) -> bool:
        """Shard ``i``'s top-k list, unless there or finished meanwhile (one process computes it): True if here."""
        path = self._path(i, qkey, top_k)
        return get_or_build(lambda: self._load(i, qkey, top_k, n_queries), lambda: self._build(i, q(), qkey, top_k),
                            path, what=f"{self.ds.name}: shard {i} of {len(self.plan)}: {path}")[1]

    def _build(self, i: int, q: Any, qkey: str, top_k: int) -> bool:
        pos = self.plan.positions(i)
        t0 = time.perf_counter()
        scores, local, hit = self.engine.search_shard(self._segments(i), len(pos), self._embedding_key(i), q, top_k,
                                                      self.rank[pos])
        meta = {"shard": i, "of": len(self.plan), "n_docs": len(pos), "tokens": int(self.plan.tokens[i]),
                "embeddings_from_cache": hit, "encode_s": 0.0 if hit else time.perf_counter() - t0,
                "claim": self._claim(i, qkey, top_k)}
        save_topk(self._path(i, qkey, top_k), scores, local, meta)
        log.info("%s: shard %d of %d done (%d docs%s)", self.ds.name, i, len(self.plan), len(pos),
                 ", embeddings from the cache" if hit else "")
        return True

    def _load(self, i: int, qkey: str, top_k: int, n_queries: int) -> tuple | None:
        """Shard ``i``'s checked top-k, None when absent; :class:`Unusable` when it is not what it claims."""
        path = self._path(i, qkey, top_k)
        if not path.exists():
            return None
        try:
            return load_topk(path, n_queries, len(self.plan.positions(i)), self._claim(i, qkey, top_k))
        except ValueError as exc:
            raise Unusable(f"is {exc}") from None

    def _read(self, i: int, qkey: str, top_k: int, n_queries: int) -> tuple | None:
        """Shard ``i``'s top-k when it is there and what it claims, else None (the locked path decides)."""
        try:
            return self._load(i, qkey, top_k, n_queries)
        except (Unusable, OSError):
            return None

    def _require(self, i: int, qkey: str, top_k: int, n_queries: int) -> tuple[np.ndarray, np.ndarray, dict]:
        """Shard ``i``'s checked top-k, or :class:`ShardMissing` naming it and the command that redoes only it."""
        try:
            found, why = self._load(i, qkey, top_k, n_queries), "is missing"
        except Unusable as exc:
            found, why = None, str(exc)
        if found is None:
            raise ShardMissing(f"{self.ds.name}: shard {i} of {len(self.plan)} {why} ({self._path(i, qkey, top_k)}); "
                               f"nothing was scored; redo only it: {redo_command(i)}")
        return found


def redo_command(shard: int) -> str:
    """The command that computes only ``shard`` of this run (the run's own overrides plus ``task.shard``)."""
    from hydra.core.hydra_config import HydraConfig
    try:
        overrides = [o for o in HydraConfig.get().overrides.task if not o.startswith("task.shard")]
    except (ValueError, AttributeError):
        overrides = ["<this run's overrides>"]
    return " ".join(["python -m harness", *overrides, f"task.shard={shard}"])

