"""Every pair of several models, per cell and per table average, corrected across all the tests, with tie groups and
rank intervals: one run a side by paired randomization, seeds by the two-level bootstrap."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from harness.compare import stats, twolevel
from harness.compare.outcomes import Outcomes, aligned_on, outcomes
from harness.core import per_query
from harness.core.errors import HarnessError


@dataclass(frozen=True)
class Settings:
    permutations: int = 10_000
    seed: int = 0
    level: float = 0.95
    alpha: float = 0.05
    correction: str = "holm"

    def check(self) -> None:
        """Each flag checked (harness.compare, leaderboard --significance): a refusal names flag, value and range."""
        if self.permutations < 1:
            raise HarnessError(f"--permutations {self.permutations}: must be an integer >= 1 (the randomization "
                               "permutations and bootstrap resamples; e.g. --permutations 10000)")
        for flag, value, meaning in (("--level", self.level, "the intervals' confidence level; e.g. --level 0.95"),
                                     ("--alpha", self.alpha, "the significance level; e.g. --alpha 0.05")):
            if not (math.isfinite(value) and 0 < value < 1):
                raise HarnessError(f"{flag} {value:g}: must be between 0 and 1, both excluded ({meaning})")


def pair_test(a: Outcomes, b: Outcomes, s: Settings) -> stats.Paired:
    """B against A, one run each: paired randomization and bootstrap over the items (re-scoring a non-mean score)."""
    x, y = a.values[0], b.values[0]
    if a.statistic is not None:
        return stats.paired_statistic(x, y, a.statistic, s.permutations, s.seed, s.level)
    strata = a.strata if len(np.unique(a.strata)) > 1 else None
    return stats.paired(x, y, s.permutations, s.seed, s.level, strata)


@dataclass
class Pair:
    """B - A on one row: difference, interval, p before and after the correction, and how it was tested."""

    a: str
    b: str
    diff: float
    low: float
    high: float
    p: float
    method: str                  # randomization | two-level
    p_t: float = float("nan")    # the paired t-test's p (single runs on a per-query metric)
    df: float | None = None      # two-level: Welch-Satterthwaite degrees of freedom
    p_adjusted: float = float("nan")


@dataclass
class Row:
    """One tested row: a cell, or a table's average over ``over`` cells."""

    table: str
    name: str
    scores: dict[str, float]
    runs: dict[str, int]
    n: int
    pairs: list[Pair] = field(default_factory=list)
    ranks: dict[str, tuple[int, int, int]] = field(default_factory=dict)    # rank, interval low, high
    groups: dict[str, str] = field(default_factory=dict)
    over: tuple[str, ...] = ()
    metric: str = ""


def order(scores: dict[str, float], higher_is_better: bool) -> list[str]:
    """Names best first (ties by name)."""
    return sorted(scores, key=lambda x: ((-1 if higher_is_better else 1) * scores[x], x))


def cell_row(table: str, name: str, cells: dict[str, Outcomes], s: Settings, higher_is_better: bool,
             index: int) -> tuple[Row, dict[str, twolevel.Replicates]]:
    """One cell: every pair's test and each model's rank interval; the replicates (for table averages)."""
    labels = list(cells)
    ids = cells[labels[0]].ids
    outs = {x: cells[x].reorder(ids) for x in labels}
    reps = twolevel.replicates(outs, s.permutations, (s.seed, index))
    row = Row(table, name, {x: o.score() for x, o in outs.items()}, {x: o.k for x, o in outs.items()}, len(ids),
              metric=outs[labels[0]].metric)
    for a, b in combinations(order(row.scores, higher_is_better), 2):
        if outs[a].k == 1 and outs[b].k == 1:
            r = pair_test(outs[a], outs[b], s)
            row.pairs.append(Pair(a, b, r.diff, r.ci_low, r.ci_high, r.p_randomization, "randomization", r.p_t))
        else:
            t = twolevel.two_level([reps[a]], [reps[b]], len(ids), s.level)
            row.pairs.append(Pair(a, b, t.diff, t.low, t.high, t.p, "two-level", df=t.df))
    _ranks(row, {x: r.drawn for x, r in reps.items()}, higher_is_better, s.level)
    return row, reps


def average_row(table: str, names: Sequence[str], labels: Sequence[str], cells: dict[str, dict[str, Outcomes]],
                reps: dict[str, dict[str, twolevel.Replicates]], s: Settings, higher_is_better: bool) -> Row:
    """The table average of ``labels`` over the cells ``names``, cells weighted equally, tested as a cell is."""
    n = sum(len(cells[c][labels[0]].ids) for c in names)
    row = Row(table, "average", {x: float(np.mean([cells[c][x].score() for c in names])) for x in labels},
              {x: max(cells[c][x].k for c in names) for x in labels}, n, over=tuple(names))
    for a, b in combinations(order(row.scores, higher_is_better), 2):
        if all(cells[c][x].k == 1 and cells[c][x].weights is not None for c in names for x in (a, b)):
            x_, y_, strata = _stacked(cells, names, a, b)
            r = stats.paired(x_, y_, s.permutations, s.seed, s.level, strata=strata)
            row.pairs.append(Pair(a, b, r.diff, r.ci_low, r.ci_high, r.p_randomization, "randomization"))
        else:
            t = twolevel.two_level([reps[c][a] for c in names], [reps[c][b] for c in names], n, s.level)
            row.pairs.append(Pair(a, b, t.diff, t.low, t.high, t.p, "two-level", df=t.df))
    _ranks(row, {x: np.mean([reps[c][x].drawn for c in names], axis=0) for x in labels}, higher_is_better, s.level)
    return row


def _stacked(cells: dict[str, dict[str, Outcomes]], names: Sequence[str], a: str, b: str
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two single-run models' per-item values over the cells ``names``, aligned, with each item's cell."""
    xs, ys, strata = [], [], []
    for i, c in enumerate(names):
        oa, ob = cells[c][a], cells[c][b].reorder(cells[c][a].ids)
        xs.append(oa.values[0])
        ys.append(ob.values[0])
        strata.append(np.full(oa.n, i))
    return np.concatenate(xs), np.concatenate(ys), np.concatenate(strata)


def _ranks(row: Row, drawn: dict[str, np.ndarray], higher_is_better: bool, level: float) -> None:
    intervals = twolevel.rank_intervals(drawn, higher_is_better, level)
    for rank, x in enumerate(order(row.scores, higher_is_better), start=1):
        row.ranks[x] = (rank, *intervals[x])


def correct(rows: Sequence[Row], correction: str) -> int:
    """Every pair's p corrected across all pairs of all ``rows`` (the family); returns the family's size."""
    pairs = [p for r in rows for p in r.pairs]
    for p, q in zip(pairs, stats.CORRECTIONS[correction]([p.p for p in pairs]), strict=True):
        p.p_adjusted = q
    return len(pairs)


def letters(ranked: Sequence[str], different: set[frozenset[str]]) -> dict[str, str]:
    """Compact letter display by insert-absorb (Piepho 2004), letters from the best-ranked model (``ranked``)."""
    columns: list[frozenset[str]] = [frozenset(ranked)]
    pos = {x: i for i, x in enumerate(ranked)}
    for pair in sorted(different, key=lambda p: sorted(pos[x] for x in p)):
        i, j = sorted(pair, key=pos.__getitem__)
        split: list[frozenset[str]] = []
        for col in columns:
            split += [col - {i}, col - {j}] if i in col and j in col else [col]
        columns = [c for n, c in enumerate(split) if c and not any(c < d or (c == d and m < n)
                                                                   for m, d in enumerate(split))]
    columns.sort(key=lambda c: sorted(pos[x] for x in c))
    names = [chr(ord("a") + i) if i < 26 else f"z{i - 25}" for i in range(len(columns))]
    return {x: "".join(name for name, c in zip(names, columns, strict=True) if x in c) for x in ranked}


def group(row: Row, alpha: float, higher_is_better: bool) -> None:
    different = {frozenset((p.a, p.b)) for p in row.pairs if p.p_adjusted < alpha}
    row.groups = letters(order(row.scores, higher_is_better), different)


def cell_outcomes(runs: dict[str, list[per_query.PerQuery]], metric: str, where: str) -> dict[str, Outcomes]:
    """Each model's :class:`Outcomes` on one cell; refuses models scored on other items than the first."""
    out: dict[str, Outcomes] = {}
    first = next(iter(runs))
    for label, pqs in runs.items():
        try:
            out[label] = outcomes(pqs, metric)
            if label != first:
                per_query.aligned(runs[first][0], pqs[0], aligned_on(pqs[0], metric))
        except per_query.PerQueryError as exc:
            raise HarnessError(f"{where}: {label}: {exc}") from None
    return out
