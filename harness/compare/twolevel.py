"""The two-level bootstrap over items and seeds: each replicate resamples the items (the same for every model), then
draws k of a model's runs, widened by sqrt(k/(k-1)) so its variance is the runs' sample variance over k; slightly
wide (92% at a nominal 90% in tests/test_compare_many.py), but level-holding; p from Welch-Satterthwaite's t."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.compare.outcomes import Outcomes


def item_resamples(strata: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(resamples x items) indices: each stratum's items drawn with replacement within it, in place."""
    idx = np.empty((resamples, len(strata)), dtype=np.int64)
    for s in np.unique(strata):
        members = np.flatnonzero(strata == s)
        idx[:, members] = members[rng.integers(0, len(members), size=(resamples, len(members)))]
    return idx


@dataclass(frozen=True)
class Replicates:
    """One model on one cell: ``base[b]`` its runs' mean on item resample b, ``drawn[b]`` with the seed draw."""

    base: np.ndarray
    drawn: np.ndarray
    full: np.ndarray
    seed_var: float = 0.0

    @property
    def k(self) -> int:
        return len(self.full)

    def seed_variance(self) -> float:
        """The variance the seeds add to the cell's score (the mean of k runs); 0 for one run."""
        return self.seed_var / self.k if self.k > 1 else 0.0


def replicates(outs: dict[str, Outcomes], resamples: int, key: Sequence[int], chunk: int = 250
               ) -> dict[str, Replicates]:
    """Every model's replicates on one cell: the same item resamples for all (in chunks), then seeds drawn."""
    first = next(iter(outs.values()))
    per_run: dict[str, list[np.ndarray]] = {x: [] for x in outs}
    for j, start in enumerate(range(0, resamples, chunk)):
        idx = item_resamples(first.strata, min(chunk, resamples - start), np.random.default_rng([*key, 0, j]))
        for x, o in outs.items():
            per_run[x].append(o.run_scores(idx))
    rng = np.random.default_rng([*key, 1])
    return {x: _drawn(o, np.concatenate(per_run[x]), rng) for x, o in outs.items()}


def _drawn(o: Outcomes, per_run: np.ndarray, rng: np.random.Generator) -> Replicates:
    """One model's replicates from its runs' scores on each item resample (resamples x runs)."""
    base = per_run.mean(axis=1)
    full = o.scores()
    if o.k == 1:
        return Replicates(base, base, full)
    draws = rng.integers(0, o.k, size=per_run.shape)
    picked = np.take_along_axis(per_run, draws, axis=1).mean(axis=1)
    # resampling k runs gives (k-1)/k of their variance: widened by sqrt(k/(k-1))
    return Replicates(base, base + np.sqrt(o.k / (o.k - 1)) * (picked - base), full, float(np.var(full, ddof=1)))


@dataclass(frozen=True)
class TwoLevel:
    """B - A from the two-level bootstrap: the difference, its standard error, degrees of freedom, p, interval."""

    diff: float
    se: float
    df: float
    p: float
    low: float
    high: float


def two_level(a: Sequence[Replicates], b: Sequence[Replicates], n_items: int, level: float) -> TwoLevel:
    """B - A on the mean over cells: the difference, its standard error and Welch-Satterthwaite df."""
    from scipy import stats as sps
    c = len(a)
    diff = float(np.mean([rb.full.mean() - ra.full.mean() for ra, rb in zip(a, b, strict=True)]))
    drawn = np.mean([rb.drawn - ra.drawn for ra, rb in zip(a, b, strict=True)], axis=0)
    items = float(np.var(np.mean([rb.base - ra.base for ra, rb in zip(a, b, strict=True)], axis=0), ddof=1))
    seeds = [(r.seed_variance() / c ** 2, r.k - 1) for r in (*a, *b) if r.k > 1]
    se = float(np.std(drawn, ddof=1))
    total = items + sum(v for v, _ in seeds)
    denom = items ** 2 / max(n_items - 1, 1) + sum(v ** 2 / d for v, d in seeds)
    df = total ** 2 / denom if denom > 0 else float("inf")
    if se == 0:
        return TwoLevel(diff, 0.0, df, 1.0 if diff == 0 else 0.0, diff, diff)
    q = float(sps.t.ppf((1 + level) / 2, df))
    return TwoLevel(diff, se, df, float(2 * sps.t.sf(abs(diff) / se, df)), diff - q * se, diff + q * se)


def rank_intervals(drawn: dict[str, np.ndarray], higher_is_better: bool, level: float) -> dict[str, tuple[int, int]]:
    """Each model's rank (1 = best) on every replicate, and the central ``level`` interval of it."""
    names = list(drawn)
    m = np.stack([drawn[x] for x in names], axis=1) * (1 if higher_is_better else -1)
    ranks = 1 + (m[:, None, :] > m[:, :, None]).sum(axis=2)
    tail = (1 - level) / 2
    return {x: (int(np.quantile(ranks[:, i], tail, method="inverted_cdf")),
                int(np.quantile(ranks[:, i], 1 - tail, method="inverted_cdf"))) for i, x in enumerate(names)}
