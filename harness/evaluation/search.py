"""Exact top-k dense search on the configured device, streaming the corpus one chunk at a time.

Why not ``sentence_transformers.util.semantic_search``: it needs the whole corpus as one tensor on the device
and returns a Python dict per hit; ours streams a memory-mapped corpus chunk by chunk to the device and keeps
the running top-k as two arrays.
"""

from __future__ import annotations

import numpy as np
import torch


def exact_search(
    query_emb: np.ndarray,
    doc_emb: np.ndarray,
    top_k: int,
    *,
    similarity: str = "cosine",
    corpus_chunk_size: int = 50_000,
    query_chunk_size: int = 1024,
    device: str = "cpu",
) -> tuple[np.ndarray, np.ndarray]:
    """(scores, doc indices), each [n_queries, min(top_k, n_docs)], best first.

    ``doc_emb`` may be a memory-mapped array: only one chunk of ``corpus_chunk_size`` rows is copied (as float32)
    and moved to ``device`` at a time. Scores in memory are bounded by query_chunk_size x corpus_chunk_size.
    """
    if similarity not in ("cosine", "dot"):
        raise ValueError(f"unknown similarity {similarity!r}: use cosine or dot")
    n_docs, n_queries = doc_emb.shape[0], query_emb.shape[0]
    k = min(top_k, n_docs)
    if n_queries == 0 or k == 0:
        return np.zeros((n_queries, 0), dtype=np.float32), np.zeros((n_queries, 0), dtype=np.int64)
    q = torch.from_numpy(np.ascontiguousarray(query_emb, dtype=np.float32)).to(device)
    if similarity == "cosine":
        q = torch.nn.functional.normalize(q, dim=-1)
    best_s = torch.full((n_queries, 0), float("-inf"), device=device)
    best_i = torch.zeros((n_queries, 0), dtype=torch.long, device=device)
    for start in range(0, n_docs, corpus_chunk_size):
        chunk = np.array(doc_emb[start : start + corpus_chunk_size], dtype=np.float32)   # one chunk read from disk
        d = torch.from_numpy(chunk).to(device)
        if similarity == "cosine":
            d = torch.nn.functional.normalize(d, dim=-1)
        parts_s, parts_i = [], []
        for qs in range(0, n_queries, query_chunk_size):
            s = q[qs : qs + query_chunk_size] @ d.T
            cs, ci = torch.topk(s, min(k, s.shape[1]), dim=1)
            merged_s = torch.cat([best_s[qs : qs + query_chunk_size], cs], dim=1)
            merged_i = torch.cat([best_i[qs : qs + query_chunk_size], ci + start], dim=1)
            top_s, pos = torch.topk(merged_s, min(k, merged_s.shape[1]), dim=1)
            parts_s.append(top_s)
            parts_i.append(torch.gather(merged_i, 1, pos))
        best_s, best_i = torch.cat(parts_s), torch.cat(parts_i)
        del chunk, d
    return best_s.cpu().numpy(), best_i.cpu().numpy()


def to_run(
    query_ids: list[str],
    doc_ids: list[str],
    scores: np.ndarray,
    indices: np.ndarray,
    *,
    top_k: int,
    ignore_identical_ids: bool = False,
) -> dict[str, dict[str, float]]:
    """TREC-style run {qid: {doc id: score}}; with ``ignore_identical_ids`` a doc whose id equals the query
    id is dropped (BEIR/mteb convention for ArguAna, Quora, ...), then the list is cut to ``top_k``.
    Negative indices (a retriever that found fewer than k hits) are skipped."""
    run: dict[str, dict[str, float]] = {}
    for row, qid in enumerate(query_ids):
        hits: dict[str, float] = {}
        for s, i in zip(scores[row], indices[row], strict=True):
            if i < 0:
                continue
            did = doc_ids[i]
            if ignore_identical_ids and did == qid:
                continue
            hits[did] = float(s)
            if len(hits) == top_k:
                break
        run[qid] = hits
    return run
