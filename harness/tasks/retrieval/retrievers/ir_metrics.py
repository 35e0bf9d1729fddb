"""IR metrics with trec_eval conventions (pytrec_eval), averaged over the judged queries."""

from __future__ import annotations

import math

#: metric name in records -> pytrec_eval measure
_MEASURES = {"ndcg_at_10": "ndcg_cut_10", "ndcg_at_100": "ndcg_cut_100", "map_at_10": "map_cut_10",
             "recall_at_10": "recall_10", "recall_at_100": "recall_100", "recall_at_1000": "recall_1000"}
#: every metric a retrieval record reports (nDCG@10 is the main one)
METRICS = (*_MEASURES, "mrr_at_10")


def reciprocal_ranks(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], k: int) -> dict[str, float]:
    """Per query: 1 / rank of the first relevant (grade > 0) doc in the top k (else 0), ties by doc id as trec_eval."""
    out = {}
    for qid, judged in qrels.items():
        ranked = sorted(run.get(qid, {}).items(), key=lambda x: (-x[1], x[0]))[:k]
        out[qid] = next((1.0 / rank for rank, (did, _) in enumerate(ranked, start=1) if judged.get(did, 0) > 0), 0.0)
    return out


def per_query_scores(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Each metric per judged query (metric -> query id -> value); an empty run counts zero (``trec_eval -c``)."""
    import pytrec_eval  # here: planning a run reads METRICS without loading the scorer
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10,100", "map_cut.10", "recall.10,100,1000"})
    per_query = evaluator.evaluate({q: run.get(q) or {"__none__": 0.0} for q in qrels})
    out = {name: {q: float(per_query[q][measure]) for q in qrels} for name, measure in _MEASURES.items()}
    out["mrr_at_10"] = reciprocal_ranks(qrels, run, 10)
    return out


def means(per_query: dict[str, dict[str, float]]) -> dict[str, float]:
    """The record's metrics: each per-query metric's mean over the judged queries; a NaN is an error."""
    metrics = {name: float(sum(v.values()) / len(v)) if v else 0.0 for name, v in per_query.items()}
    for name, value in metrics.items():
        if math.isnan(value):
            raise ValueError(f"metric {name} is NaN")
    return metrics


def evaluate_run(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict[str, float]:
    """ndcg@10 (main), ndcg@100, map@10, recall@10/100/1000, mrr@10; mean over queries with judgements."""
    return means(per_query_scores(qrels, run))
