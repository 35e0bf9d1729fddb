"""Exact top-k dense search, chunked over the corpus so the score matrix never has to fit in memory."""

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

    Memory is bounded by query_chunk_size x (corpus_chunk_size + top_k) scores at a time.
    """
    if similarity not in ("cosine", "dot"):
        raise ValueError(f"unknown similarity {similarity!r}: use cosine or dot")
    n_docs = doc_emb.shape[0]
    k = min(top_k, n_docs)
    q_all = torch.from_numpy(np.ascontiguousarray(query_emb, dtype=np.float32))
    if similarity == "cosine":
        q_all = torch.nn.functional.normalize(q_all, dim=-1)
    out_scores = np.empty((q_all.shape[0], k), dtype=np.float32)
    out_idx = np.empty((q_all.shape[0], k), dtype=np.int64)
    doc_chunks = []
    for start in range(0, n_docs, corpus_chunk_size):
        d = torch.from_numpy(np.array(doc_emb[start : start + corpus_chunk_size], dtype=np.float32))  # copy: may be a memmap
        if similarity == "cosine":
            d = torch.nn.functional.normalize(d, dim=-1)
        doc_chunks.append((start, d.to(device)))
    for qs in range(0, q_all.shape[0], query_chunk_size):
        q = q_all[qs : qs + query_chunk_size].to(device)
        best_s = torch.full((q.shape[0], 0), float("-inf"), device=device)
        best_i = torch.zeros((q.shape[0], 0), dtype=torch.long, device=device)
        for start, d in doc_chunks:
            s = q @ d.T
            kk = min(k, s.shape[1])
            cs, ci = torch.topk(s, kk, dim=1)
            merged_s = torch.cat([best_s, cs], dim=1)
            merged_i = torch.cat([best_i, ci + start], dim=1)
            keep = min(k, merged_s.shape[1])
            best_s, pos = torch.topk(merged_s, keep, dim=1)
            best_i = torch.gather(merged_i, 1, pos)
        out_scores[qs : qs + q.shape[0]] = best_s.cpu().numpy()
        out_idx[qs : qs + q.shape[0]] = best_i.cpu().numpy()
    return out_scores, out_idx


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
    id is dropped (BEIR/mteb convention for ArguAna, Quora, ...), then the list is cut to ``top_k``."""
    run: dict[str, dict[str, float]] = {}
    for row, qid in enumerate(query_ids):
        hits: dict[str, float] = {}
        for s, i in zip(scores[row], indices[row], strict=True):
            did = doc_ids[i]
            if ignore_identical_ids and did == qid:
                continue
            hits[did] = float(s)
            if len(hits) == top_k:
                break
        run[qid] = hits
    return run
