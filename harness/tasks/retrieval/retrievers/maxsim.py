"""Exact MaxSim (the parity reference), chunked to a memory budget; and the exact rerank of an index's candidates."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import torch

from harness.core.console import Progress
from harness.encoding.packing import token_budget_batches
from harness.tasks.retrieval.retrievers.token_store import TokenStore


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
    """[docs, longest, dim] float32 of documents anywhere in the store; a shorter document is padded with copies of
    its own first token, so its max over tokens, hence its MaxSim score, is exactly the unpadded one (no mask)."""
    lens = store.lengths[docs]
    steps = np.arange(int(lens.max()))
    rows = store.starts[docs][:, None] + np.where(steps[None, :] < lens[:, None], steps[None, :], 0)
    s0, end = int(rows.min()), int(rows.max()) + 1
    if end - s0 <= rows.size:   # a storage-order chunk: its unpadded tokens cross to the device once, padded there
        flat = torch.from_numpy(np.asarray(store.emb[s0:end], dtype=np.float32)).to(device)
        return flat[torch.from_numpy(rows - s0).to(device)]
    return torch.from_numpy(np.asarray(store.emb[rows], dtype=np.float32)).to(device)


def maxsim_search(queries: torch.Tensor, store: TokenStore, top_k: int, *, chunk_tokens: int = 1 << 18,
                  score_budget: int = 1 << 26, device: str = "cpu", show_progress: bool = True,
                  rank: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact ColBERT scores and the running top-k, as :func:`~harness.tasks.retrieval.retrievers.search.ranked_topk`:
    PyLate's ``colbert_scores``, not ``rank.rerank``, which pads documents again for every query."""
    from pylate.scores import colbert_scores

    from harness.tasks.retrieval.retrievers.search import running_topk
    n_q, q_len = queries.shape[0], queries.shape[1]
    q = queries.to(device)

    def chunks() -> Iterator[tuple[torch.Tensor, int, Callable[[int, int], torch.Tensor]]]:
        bar = Progress(len(store), f"MaxSim search, {n_q} queries", "documents", show=show_progress)
        for docs in _chunks(store, chunk_tokens):
            d = _padded(store, docs, device)
            step = max(1, score_budget // (q_len * d.shape[0] * d.shape[1]))
            yield torch.from_numpy(docs).to(device), step, lambda a, b, d=d: colbert_scores(q[a:b], d, backend="torch")
            bar.update(len(docs))
        bar.close()

    with torch.inference_mode():
        return running_topk(chunks(), n_q, min(top_k, len(store)), rank, device)


def pad_queries(queries: list[np.ndarray], dim: int) -> torch.Tensor:
    """[n, longest, dim] float32; zero query vectors add 0 to a MaxSim sum, so the padding is exact."""
    width = max((len(x) for x in queries), default=0)
    padded = torch.zeros((len(queries), width, dim))
    for i, x in enumerate(queries):
        padded[i, : len(x)] = torch.from_numpy(x)
    return padded


def rerank_exact(queries: list[np.ndarray], store: TokenStore, idx: np.ndarray, *, chunk_tokens: int = 1 << 18,
                 device: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """Exact MaxSim scores of each query's candidates (``idx``, -1 = none), re-sorted best first."""
    from pylate.scores import colbert_scores
    scores = np.full(idx.shape, -np.inf, dtype=np.float32)
    for row, q in enumerate(queries):
        cands = idx[row][idx[row] >= 0]
        # longest first, at most chunk_tokens padded tokens per part: little padding
        parts = [cands[b] for b in token_budget_batches(store.lengths[cands], chunk_tokens, len(cands))]
        qt = torch.from_numpy(np.ascontiguousarray(q, dtype=np.float32))[None].to(device)
        with torch.inference_mode():
            out = [colbert_scores(qt, _padded(store, part, device), backend="torch")[0].cpu().numpy() for part in parts]
        cands = np.concatenate(parts) if parts else cands
        s = np.concatenate(out) if out else np.zeros(0, dtype=np.float32)
        order = np.argsort(-s, kind="stable")
        scores[row, : len(cands)], idx[row, : len(cands)] = s[order], cands[order]
        idx[row, len(cands) :] = -1
    return scores, idx

