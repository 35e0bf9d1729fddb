"""IR metrics with trec_eval conventions (pytrec_eval), averaged over the judged queries."""

from __future__ import annotations

import math

import pytrec_eval

#: metric name in records -> pytrec_eval measure
_MEASURES = {
    "ndcg_at_10": "ndcg_cut_10",
    "ndcg_at_100": "ndcg_cut_100",
    "map_at_10": "map_cut_10",
    "recall_at_10": "recall_10",
    "recall_at_100": "recall_100",
    "recall_at_1000": "recall_1000",
}


def mrr_at_k(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], k: int) -> float:
    """Mean reciprocal rank of the first relevant (grade > 0) doc in the top k, ties by doc id as trec_eval."""
    total = 0.0
    for qid, judged in qrels.items():
        ranked = sorted(run.get(qid, {}).items(), key=lambda x: (-x[1], x[0]))[:k]
        for rank, (did, _) in enumerate(ranked, start=1):
            if judged.get(did, 0) > 0:
                total += 1.0 / rank
                break
    return total / len(qrels) if qrels else 0.0


def evaluate_run(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict[str, float]:
    """ndcg@10 (main), ndcg@100, map@10, recall@10/100/1000, mrr@10; mean over queries with judgements."""
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, {"ndcg_cut.10,100", "map_cut.10", "recall.10,100,1000"}
    )
    # a judged query with an empty run still counts (as zero), as in trec_eval -c
    per_query = evaluator.evaluate({q: run.get(q) or {"__none__": 0.0} for q in qrels})
    metrics: dict[str, float] = {}
    for name, measure in _MEASURES.items():
        values = [per_query[q][measure] for q in qrels]
        metrics[name] = float(sum(values) / len(values))
    metrics["mrr_at_10"] = mrr_at_k(qrels, run, 10)
    for name, value in metrics.items():
        if math.isnan(value):
            raise ValueError(f"metric {name} is NaN")
    return metrics
