"""The paired test of two records' kept scores on one dataset (retrieval: per query; GLUE: per example)."""

from __future__ import annotations

import numpy as np

from harness import per_query
from harness.compare import stats
from harness.errors import HarnessError


def pair_test(a: per_query.PerQuery, b: per_query.PerQuery, metric: str, permutations: int, seed: int,
              level: float) -> tuple[stats.Paired, tuple[np.ndarray, np.ndarray] | None]:
    """B against A on what both scored, and (per-query metrics) the two aligned score vectors;
    :class:`per_query.PerQueryError` where they did not score the same items."""
    if a.unit == "example":
        return examples_test(a, b, permutations, seed, level), None
    x, y, _ = per_query.aligned(a, b, metric)
    return stats.paired(x, y, permutations, seed, level), (x, y)


def examples_test(a: per_query.PerQuery, b: per_query.PerQuery, permutations: int, seed: int, level: float
                  ) -> stats.Paired:
    """GLUE: the task score (x100) re-computed from each example's prediction. Accuracy (MNLI: the mean of the
    matched and mismatched accuracies) is a mean over examples, tested as per-query scores (stratified by dev set);
    Matthews, F1 and Spearman are re-scored for every permutation and resample."""
    from harness.glue_metrics import compute

    pa, pb, ids = per_query.aligned(a, b, "prediction")
    labels = a.scores["label"]
    dev = [i.rsplit(":", 1)[0] for i in ids]
    kind = a.data.get("glue_metric", "accuracy")
    if kind == "accuracy":
        strata = np.unique(dev, return_inverse=True)[1] if len(set(dev)) > 1 else None
        return stats.paired(100.0 * (pa == labels), 100.0 * (pb == labels), permutations, seed, level, strata)
    if len(set(dev)) > 1:
        raise HarnessError(f"a {kind} score over several dev sets cannot be re-scored per example here")
    return stats.paired_statistic(pa, pb, lambda idx, preds: compute(kind, preds, labels[idx])["score"],
                                  permutations, seed, level)
