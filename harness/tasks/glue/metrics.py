"""GLUE dev-set metrics computed locally with sklearn/scipy (``evaluate.load`` needs the hub), x100 as the paper,
importing no compute code; which key is the task score is :mod:`harness.tasks.glue.scores`'."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from harness.tasks.glue.scores import MONITOR, SCORE_KEYS, known, rescoring_kind, score_key  # noqa: F401

Metrics = dict[str, float]


def _x100(values: Metrics) -> Metrics:
    return {k: float(v) * 100.0 for k, v in values.items()}


# scipy and sklearn are imported where a metric is computed: planning a GLUE grid (names only) stays light.
def accuracy(preds: Sequence[int], labels: Sequence[int]) -> Metrics:
    from sklearn.metrics import accuracy_score
    return _x100({"accuracy": accuracy_score(labels, preds)})


def matthews(preds: Sequence[int], labels: Sequence[int]) -> Metrics:
    from sklearn.metrics import matthews_corrcoef
    return _x100({"matthews": matthews_corrcoef(labels, preds)})


def f1_accuracy(preds: Sequence[int], labels: Sequence[int]) -> Metrics:
    from sklearn.metrics import accuracy_score, f1_score
    out = _x100({"f1": f1_score(labels, preds, zero_division=0), "accuracy": accuracy_score(labels, preds)})
    out["f1_accuracy_mean"] = (out["f1"] + out["accuracy"]) / 2
    return out


def spearman_pearson(preds: Sequence[float], labels: Sequence[float]) -> Metrics:
    from scipy.stats import pearsonr, spearmanr
    preds, labels = np.asarray(preds, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    if not np.isfinite(preds).all():
        return {"spearman": float("nan"), "pearson": float("nan")}
    if np.ptp(preds) == 0:  # constant predictions: correlation undefined; score it as no correlation
        return {"spearman": 0.0, "pearson": 0.0}
    return _x100({"spearman": spearmanr(preds, labels).statistic, "pearson": pearsonr(preds, labels).statistic})


#: metric kind in a task definition -> its function (the key of the task score: :data:`harness.tasks.glue.scores.SCORE_KEYS`)
METRICS: dict[str, Callable[..., Metrics]] = {"accuracy": accuracy, "matthews": matthews, "accuracy_f1": f1_accuracy,
                                              "f1": f1_accuracy, "f1_accuracy": f1_accuracy,
                                              "spearman_pearson": spearman_pearson}


def compute(metric: str, preds: Sequence, labels: Sequence, groups: Sequence[tuple[str, int]] | None = None) -> Metrics:
    """Metrics for one task and its ``score``; ``groups``: consecutive dev sets (MNLI), the score their mean."""
    fn, key = METRICS[known(metric)], SCORE_KEYS[metric]
    if not groups:
        out = fn(preds, labels)
        out["score"] = out[key]
        return out
    if sum(n for _, n in groups) != len(labels):
        raise ValueError(f"groups cover {sum(n for _, n in groups)} rows, but there are {len(labels)}")
    out: Metrics = {}
    start = 0
    for name, n in groups:
        for k, v in fn(preds[start : start + n], labels[start : start + n]).items():
            out[f"{k}_{name}"] = v
        start += n
    out[f"{key}_mean"] = float(np.mean([out[f"{key}_{name}"] for name, _ in groups]))
    out["score"] = out[f"{key}_mean"]
    return out
