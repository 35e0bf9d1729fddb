"""One model's kept scores on one cell: every run (seed) over the same items, and the cell's score of a resample."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.core import per_query
from harness.core.errors import HarnessError
from harness.core.results import ResultRecord
from harness.selection.comparable import read_comparable

#: ``stat(idx, preds)``: a score that is not a mean over items (Matthews, F1, Spearman), on the items ``idx``
Statistic = Callable[[np.ndarray, np.ndarray], float]


@dataclass(frozen=True)
class Outcomes:
    """``values[run, item]``: per-query values (``weights``: the cell's score as a weighted mean) or GLUE
    predictions (``statistic`` re-scores them); items resampled within ``strata``; ``runs``: the kept scores."""

    ids: tuple[str, ...]
    values: np.ndarray
    strata: np.ndarray
    weights: np.ndarray | None
    statistic: Statistic | None
    runs: tuple[per_query.PerQuery, ...]
    metric: str

    @property
    def k(self) -> int:
        return int(self.values.shape[0])

    @property
    def n(self) -> int:
        return len(self.ids)

    def run_scores(self, idx: np.ndarray) -> np.ndarray:
        """Each run's score on each resample: ``idx`` (resamples x items) -> (resamples x runs)."""
        if self.weights is not None:
            return np.einsum("kbn,bn->bk", self.values[:, idx], self.weights[idx])
        return np.array([[self.statistic(row, v[row]) for v in self.values] for row in idx])

    def scores(self) -> np.ndarray:
        """Each run's score on every item (the record's own score)."""
        return self.run_scores(np.arange(self.n)[None, :])[0]

    def score(self) -> float:
        """The cell's score: the mean over its runs."""
        return float(self.scores().mean())

    def reorder(self, ids: Sequence[str]) -> Outcomes:
        """The same outcomes in the order of ``ids`` (the same set of items)."""
        where = {q: i for i, q in enumerate(self.ids)}
        order = np.array([where[q] for q in ids])
        stat = self.statistic
        rescore = None if stat is None else (lambda idx, preds: stat(order[idx], preds))
        return Outcomes(tuple(ids), self.values[:, order], self.strata[order],
                        None if self.weights is None else self.weights[order], rescore, self.runs, self.metric)


def read_runs(records: Sequence[tuple[Path, ResultRecord]], where: str) -> list[per_query.PerQuery]:
    """The kept scores of each record behind a cell (checked against each record's claim)."""
    out = []
    for path, rec in records:
        try:
            out.append(per_query.read(path, (rec.details or {}).get("per_query")))
        except per_query.PerQueryError as exc:
            raise HarnessError(f"{where}: {exc}") from None
    return out


def aligned_on(pq: per_query.PerQuery, metric: str) -> str:
    """The kept score two runs are aligned on: each example's prediction (GLUE), else ``metric``."""
    return "prediction" if pq.unit == "example" else metric


def outcomes(runs: Sequence[per_query.PerQuery], metric: str) -> Outcomes:
    """The runs of one cell as :class:`Outcomes`; a PerQueryError where they scored different items."""
    first = runs[0]
    for other in runs[1:]:
        per_query.aligned(first, other, aligned_on(first, metric))
    if first.unit == "example":
        return _examples(runs)
    vals = np.stack([per_query.aligned(first, r, metric)[1] for r in runs])
    n = len(first.ids)
    return Outcomes(tuple(first.ids), vals, np.zeros(n, dtype=int), np.full(n, 1.0 / n), None, tuple(runs), metric)


def _examples(runs: Sequence[per_query.PerQuery]) -> Outcomes:
    """GLUE: accuracy as a weighted mean of 0/100 outcomes; Matthews, F1, Spearman re-scored on every resample."""
    from harness.compare.stats import weights
    from harness.tasks.glue.metrics import compute
    first = runs[0]
    preds = np.stack([per_query.aligned(first, r, "prediction")[1] for r in runs])
    labels = first.scores["label"]
    dev = [i.rsplit(":", 1)[0] for i in first.ids]
    strata = np.unique(dev, return_inverse=True)[1]
    kind = first.data.get("glue_metric", "accuracy")
    if kind == "accuracy":
        return Outcomes(tuple(first.ids), 100.0 * (preds == labels), strata, weights(strata, len(strata)), None,
                        tuple(runs), kind)
    if len(set(dev)) > 1:
        raise HarnessError(f"a {kind} score over several dev sets cannot be re-scored per example here")
    return Outcomes(tuple(first.ids), preds, strata, None,
                    lambda idx, p: compute(kind, p, labels[idx])["score"], tuple(runs), kind)


def claim_of(path: Path) -> dict | None:
    """A record file's ``details.per_query`` as its column reads it (rescored if need be), else None."""
    try:
        return (read_comparable(path).details or {}).get("per_query")
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
