"""What each GLUE metric kind scores, by name only (the record's main score key, what the authors' early stopping
watches, the kind kept predictions are re-scored with), so readers need not import :mod:`harness.tasks.glue.metrics`."""

from __future__ import annotations

from harness.core.errors import HarnessError

#: metric kind -> key of the task score among the metrics it records
SCORE_KEYS: dict[str, str] = {
    "accuracy": "accuracy",                 # SST-2, QNLI, RTE, WNLI; MNLI per dev set
    "matthews": "matthews",                 # CoLA
    "accuracy_f1": "accuracy",              # MRPC, QQP: Table 5's accuracy, F1 and their mean recorded beside
    "f1": "f1",                             # the same values, F1 the score (what the authors' eval.py printed)
    "f1_accuracy": "f1_accuracy_mean",      # the same values, their mean the score
    "spearman_pearson": "spearman",         # STS-B
}

#: the one dev metric the authors' early stopping watches, per metric kind (MNLI: its first dev set's): never the
#: task score where that is a composite (MB@2fed0f2:eval.py:112-119, ``metric_to_monitor``)
MONITOR: dict[str, str] = {"accuracy": "accuracy", "accuracy_f1": "accuracy", "f1": "accuracy",
                           "f1_accuracy": "accuracy", "matthews": "matthews", "spearman_pearson": "spearman"}


def known(metric: str) -> str:
    """``metric`` if it is a metric kind, else one line naming the kinds."""
    if metric not in SCORE_KEYS:
        raise HarnessError(f"unknown GLUE metric {metric!r}: use one of {', '.join(SCORE_KEYS)} in the task definition")
    return metric


def score_key(metric: str, grouped: bool) -> str:
    """Name of the record's main score for a task (``grouped``: several dev sets, MNLI: the mean of theirs)."""
    key = SCORE_KEYS[known(metric)]
    return f"{key}_mean" if grouped else key


def rescoring_kind(metric: str) -> str:
    """The metric kind a record's kept predictions are re-scored with (``accuracy_f1``: ``accuracy``)."""
    return "accuracy" if score_key(metric, False) == "accuracy" else metric
