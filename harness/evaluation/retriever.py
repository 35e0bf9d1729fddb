"""The retriever protocol and the one retrieval evaluation every retrieval family shares.

As mteb separates its encoder and search protocols, a retriever here is anything that can index a corpus and
search it: single-vector (:mod:`harness.evaluation.dense`: encode + exact search) or multi-vector (PyLate
token embeddings + an index or exact MaxSim). :func:`evaluate` turns a retriever and a dataset into metrics
with the same conventions for all of them (top-k, self-match removal, trec_eval metrics).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from harness.evaluation.ir_metrics import evaluate_run, means, per_query_scores
from harness.per_query import PerQuery, fingerprint, from_metrics

if TYPE_CHECKING:
    from collections.abc import Sequence

    from harness.data.retrieval import RetrievalDataset
    from harness.evaluation.subgroups import QueryGroups

Details = dict[str, Any]
Timings = dict[str, float]


@runtime_checkable
class Retriever(Protocol):
    """Index a corpus, then search it. ``kind`` names the retriever in records (``single_vector`` | ...)."""

    kind: str

    def index(self, ds: RetrievalDataset) -> tuple[Details, Timings]:
        """Encode or index ``ds``'s corpus (documents are ``ds.documents()``); details: cache hit, index type."""
        ...

    def search(self, queries: list[str], top_k: int) -> tuple[np.ndarray, np.ndarray, Timings]:
        """(scores, corpus positions, timings) over the last indexed corpus, [n_queries, <= top_k] each,
        best first; a position of -1 marks no hit."""
        ...

    def describe(self) -> Details:
        """The settings that produced the numbers (similarity, lengths, index parameters), for the record."""
        ...


def cutoff(metric: str) -> int:
    """The rank cutoff of a metric named ``<name>_at_<k>`` (0 for none)."""
    head, _, k = metric.rpartition("_at_")
    return int(k) if head and k.isdigit() else 0


def search_width(top_k: int, ignore_identical_ids: bool) -> int:
    """How many hits a search keeps: ``top_k``, plus room for the self-match that is dropped."""
    return top_k + (1 if ignore_identical_ids else 0)


def evaluate(
    retriever: Retriever, ds: RetrievalDataset, *, top_k: int, ignore_identical_ids: bool = False,
    subgroups: Sequence[QueryGroups] = (),
) -> tuple[dict[str, float], Details, Timings]:
    """(metrics, details, timings) of ``retriever`` on ``ds``: nDCG@10 (main), MAP, recall, MRR; ``subgroups``
    score the same run on groups of the queries too (``ndcg_at_10_<group>_<name>``, details under ``<name>``)."""
    metrics, details, timings, _ = evaluate_per_query(retriever, ds, top_k=top_k,
                                                      ignore_identical_ids=ignore_identical_ids, subgroups=subgroups)
    return metrics, details, timings


def evaluate_per_query(
    retriever: Retriever, ds: RetrievalDataset, *, top_k: int, ignore_identical_ids: bool = False,
    subgroups: Sequence[QueryGroups] = (),
) -> tuple[dict[str, float], Details, Timings, PerQuery]:
    """:func:`evaluate`, plus each metric per judged query (what the record's metrics are the means of), with
    fingerprints of the query texts and qrels it was scored on."""
    details, timings = retriever.index(ds)
    queries = ds.evaluated_queries()
    qids = list(queries)
    scores, idx, search_timings = retriever.search(list(queries.values()), search_width(top_k, ignore_identical_ids))
    timings |= search_timings
    from harness.evaluation.search import to_run  # torch: planning a retrieval run imports none

    t0 = time.perf_counter()
    run = to_run(qids, ds.corpus_ids, scores, idx, top_k=top_k, ignore_identical_ids=ignore_identical_ids)
    qrels = {q: ds.qrels[q] for q in qids}
    per_query = per_query_scores(qrels, run)
    depth = min(top_k, getattr(retriever, "max_depth", None) or top_k)   # hits a query can have
    beyond = sorted(m for m in per_query if min(cutoff(m), len(ds)) > depth)   # would count too few hits
    per_query = {m: v for m, v in per_query.items() if m not in beyond}
    metrics = means(per_query)
    details = {
        "retriever": retriever.kind, "n_docs": len(ds), "n_queries": len(qids), "top_k": top_k,
        "ignore_identical_ids": ignore_identical_ids, "source": ds.source, **retriever.describe(), **details,
    }
    if beyond:
        why = f"their cutoff exceeds top_k={top_k}" if depth == top_k else \
            f"their cutoff exceeds the {depth} documents the index returns per query"
        details["metrics_left_out"] = {"metrics": beyond, "why": why}
    for scorer in (s for s in subgroups if s.applies(ds)):
        groups, facts = scorer.split(ds)
        for name, group in groups.items():
            score = evaluate_run({q: ds.qrels[q] for q in group}, run)["ndcg_at_10"] if group else None
            facts |= {f"n_{name}": len(group), f"ndcg_at_10_{name}": score}
            if score is not None:
                metrics[f"ndcg_at_10_{name}_{scorer.name}"] = score
        details[scorer.name] = facts
    timings["metrics_s"] = time.perf_counter() - t0
    data = {"queries": fingerprint(queries), "qrels": fingerprint(qrels), "corpus": str(ds.fingerprint),
            "top_k": str(top_k), "ignore_identical_ids": str(ignore_identical_ids)}
    out = from_metrics(per_query, data)
    out.run = run
    return metrics, details, timings, out
