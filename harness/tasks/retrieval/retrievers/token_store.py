"""Corpus token embeddings on disk: fp16, memory-mapped, written atomically with the claim checked before use."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.cache_entry import Unusable, get_or_build
from harness.core.errors import HarnessError
from harness.tasks.retrieval.retrievers.embedding_cache import content_hash, written_aside


class TokenStore:
    """Every document's fp16 token embeddings in one memory-mapped file with ``starts`` and ``lengths``, atomic."""

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
        # a store already there (another process finished it first) is kept
        with written_aside(root, folder=True, prefix=f".{root.name}.tmp") as tmp:
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
        return TokenStore(root)

    @staticmethod
    def cached(root: Path, n_docs: int, batches: Callable[[], Iterator[tuple[np.ndarray, list[np.ndarray]]]],
               meta: Mapping[str, Any]) -> tuple[TokenStore, bool]:
        """(the store at ``root``, hit): a bad one set aside and written again, once, under its lock."""

        def read() -> TokenStore | None:
            if not root.exists():
                return None
            try:
                store = TokenStore(root)
            except (ValueError, KeyError) as exc:
                raise Unusable(f"is not usable ({exc})") from None
            if len(store) != n_docs:
                raise Unusable(f"holds {len(store)} documents, not {n_docs}")
            return store

        store, built = get_or_build(read, lambda: TokenStore.write(root, batches(), n_docs, meta), root,
                                    what=f"token-embedding cache {root}")
        return store, not built
