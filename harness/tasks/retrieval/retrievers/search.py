"""Exact top-k dense search on the configured device, streaming a memory-mapped corpus chunk by chunk (unlike
``sentence_transformers.util.semantic_search``: the whole corpus on the device, a dict per hit)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import torch


def ranked_topk(scores: torch.Tensor, ids: torch.Tensor, k: int,
                rank: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` best of each row of ``scores`` by (score descending, ``rank[id]``), best first, and their ids: a total
    order, so chunks, shards and the whole corpus give the same lists (``torch.topk``'s ties resolved)."""
    rows, n = scores.shape
    k = min(k, n)
    ids = ids.expand(rows, -1) if ids.dim() == 1 else ids
    top_s, pos = torch.topk(scores, k, dim=1)
    top_i = torch.gather(ids, 1, pos)
    if 0 < k < n:
        over = ((scores >= top_s[:, -1:]).sum(dim=1) > k).nonzero().flatten().tolist()
        for r in over:
            top_s[r], top_i[r] = _boundary_ties(scores[r], ids[r], k, rank)
    tie = top_i if rank is None else rank[top_i]
    by_tie = torch.argsort(tie, dim=1, stable=True)
    top_s, top_i = torch.gather(top_s, 1, by_tie), torch.gather(top_i, 1, by_tie)
    by_score = torch.argsort(-top_s, dim=1, stable=True)
    return torch.gather(top_s, 1, by_score), torch.gather(top_i, 1, by_score)


def _boundary_ties(scores: torch.Tensor, ids: torch.Tensor, k: int,
                   rank: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """One row's top-k when several entries equal the k-th score: the tied ones with the lowest tie key win."""
    kth = torch.topk(scores, k).values[-1]
    sure = (scores > kth).nonzero().flatten()
    tied = (scores == kth).nonzero().flatten()
    key = ids[tied] if rank is None else rank[ids[tied]]
    tied = tied[torch.argsort(key, stable=True)[: k - len(sure)]]
    keep = torch.cat([sure, tied])
    return scores[keep], ids[keep]


def running_topk(chunks: Iterable[tuple[torch.Tensor, int, Callable[[int, int], torch.Tensor]]], n_queries: int,
                 k: int, rank: np.ndarray | None, device: str) -> tuple[np.ndarray, np.ndarray]:
    """The top-k (scores, ids) of ``n_queries`` queries over chunks of documents, merged by :func:`ranked_topk`."""
    best_s = torch.full((n_queries, 0), float("-inf"), device=device)
    best_i = torch.zeros((n_queries, 0), dtype=torch.long, device=device)
    tie = None if rank is None else torch.from_numpy(np.asarray(rank, dtype=np.int64)).to(device)
    for ids, step, scores in chunks if n_queries and k else ():
        parts_s, parts_i = [], []
        for qs in range(0, n_queries, step):
            cs, ci = ranked_topk(scores(qs, qs + step), ids, k, tie)
            top_s, top_i = ranked_topk(torch.cat([best_s[qs : qs + step], cs], dim=1),
                                       torch.cat([best_i[qs : qs + step], ci], dim=1), k, tie)
            parts_s.append(top_s)
            parts_i.append(top_i)
        best_s, best_i = torch.cat(parts_s), torch.cat(parts_i)
        del ids, scores            # the chunk is freed before the next one is read
    return best_s.cpu().numpy(), best_i.cpu().numpy()


def as_float32(rows: np.ndarray) -> np.ndarray:
    """Stored embeddings as float32: uint16 rows are bf16 bits, widened exactly."""
    if rows.dtype == np.uint16:
        return torch.from_numpy(np.array(rows).view(np.int16)).view(torch.bfloat16).float().numpy()
    return np.asarray(rows, dtype=np.float32)


#: documents per matrix product of the search: every product has this shape (the last block zero-padded)
SCORE_BLOCK = 1024


def block_scores(q: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """``q @ d.T`` as products of one fixed shape, so a score does not depend on where its document sits (corpus,
    chunk, shard): BLAS picks kernels by shape, and another width can round differently in the last bit."""
    n = d.shape[0]
    if n % SCORE_BLOCK:
        d = torch.cat([d, d.new_zeros(SCORE_BLOCK - n % SCORE_BLOCK, d.shape[1])])
    return torch.cat([q @ d[i : i + SCORE_BLOCK].T for i in range(0, len(d), SCORE_BLOCK)], dim=1)[:, :n]


def exact_search(
    query_emb: np.ndarray,
    doc_emb: np.ndarray,
    top_k: int,
    *,
    similarity: str,
    corpus_chunk_size: int,
    query_chunk_size: int = 1024,
    device: str = "cpu",
    rank: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(scores, doc indices) of the top ``top_k``, ties in ``rank`` order, one corpus chunk at a time on ``device``."""
    if similarity not in ("cosine", "dot"):
        raise ValueError(f"unknown similarity {similarity!r}: use cosine or dot")
    n_docs, n_queries = doc_emb.shape[0], query_emb.shape[0]
    q = torch.from_numpy(np.array(query_emb, dtype=np.float32)).to(device)   # a copy: the cache's arrays are read-only
    if similarity == "cosine":
        q = torch.nn.functional.normalize(q, dim=-1)

    def chunks() -> Iterator[tuple[torch.Tensor, int, Callable[[int, int], torch.Tensor]]]:
        for start in range(0, n_docs, corpus_chunk_size):
            chunk = np.array(as_float32(doc_emb[start : start + corpus_chunk_size]))   # one chunk read from disk
            d = torch.from_numpy(chunk).to(device)
            if similarity == "cosine":
                d = torch.nn.functional.normalize(d, dim=-1)
            yield torch.arange(start, start + len(chunk), device=device), query_chunk_size, \
                lambda a, b, d=d: block_scores(q[a:b], d)
            del chunk, d

    return running_topk(chunks(), n_queries, min(top_k, n_docs), rank, device)


def id_rank(doc_ids: list[str]) -> np.ndarray:
    """Each corpus position's place in document-id order: the tie key that breaks equal scores by document id."""
    order = np.argsort(np.asarray(doc_ids, dtype=str), kind="stable")
    rank = np.empty(len(doc_ids), dtype=np.int64)
    rank[order] = np.arange(len(doc_ids))
    return rank


def to_run(query_ids: list[str], doc_ids: list[str], scores: np.ndarray, indices: np.ndarray, *, top_k: int,
           ignore_identical_ids: bool = False) -> dict[str, dict[str, float]]:
    """TREC-style run {qid: {doc id: score}} cut to ``top_k``; ``ignore_identical_ids`` drops self-matches."""
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
