"""The comparison table: per dataset, the macro average, and the test over per-dataset scores."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness import per_query
from harness.compare import stats
from harness.compare.outcomes import read_runs
from harness.compare.pairs import pair_test
from harness.compare.records import Side, resolve
from harness.errors import HarnessError
from harness.results import ResultRecord


def compare_lines(a: str, b: str, *, task: str | None, results: Path, metric: str | None, permutations: int,
                  seed: int, level: float, alpha: float, correction: str) -> list[str]:
    """Everything ``python -m harness.compare`` prints."""
    left, right = resolve(a, results, task), resolve(b, results, task)
    check_comparable(left, right)
    shared = [d for d in left.records if d in right.records]
    if not shared:
        raise HarnessError(f"{left.label} and {right.label} share no dataset "
                           f"({', '.join(left.records)} vs {', '.join(right.records)})")
    metric = metric or left.records[shared[0]][1].main_score
    tests = {d: dataset_test(left, right, d, metric, permutations, seed, level) for d in shared}
    results_ = {d: t[0] for d, t in tests.items()}
    adjusted = dict(zip(shared, stats.CORRECTIONS[correction]([r.p_randomization for r in results_.values()]),
                        strict=True))
    pct = f"{level:.0%}"
    lines = [f"A = {left.label}", f"B = {right.label}",
             f"metric {metric}; B - A; paired randomization test (two-sided, {permutations} permutations, seed {seed});"
             f" paired bootstrap {pct} interval ({permutations} resamples); p corrected across {len(shared)} "
             f"dataset(s): {correction}; * where the corrected p < {alpha:g}",
             f"{'dataset':24s} {'n':>6s} {'A':>8s} {'B':>8s} {'B-A':>8s} {pct + ' interval':>20s} {'p':>8s} "
             f"{'p ' + correction:>10s}"]
    for d, r in results_.items():
        lines.append(row(d, r, adjusted[d], alpha))
    if len(shared) > 1:
        pairs = {d: t[1] for d, t in tests.items() if t[1] is not None}
        lines += average_lines(pairs if len(pairs) == len(shared) else {}, results_, permutations, seed, level, alpha)
    return lines


def check_comparable(left: Side, right: Side) -> None:
    """Two runs of one task: records of different tasks, or the same records on both sides, are refused."""
    if left.task != right.task:
        raise HarnessError(f"A ({left.label}) holds {left.task} records and B ({right.label}) {right.task} ones: "
                           "different tasks, nothing to compare; pass two runs of the same task")
    shared = [d for d in left.records if d in right.records]
    if shared and all(same_record(left.records[d], right.records[d]) for d in shared):
        run = left.records[shared[0]][1].run_id
        raise HarnessError(f"A ({left.label}) and B ({right.label}) are the same run ({run}): its records compared "
                           "with themselves; pass two different runs")


def same_record(a: tuple[Path, ResultRecord], b: tuple[Path, ResultRecord]) -> bool:
    """One record (or a copy of it): the same file, or the same cell of the same run written at the same time."""
    (pa, ra), (pb, rb) = a, b
    if pa.resolve() == pb.resolve():
        return True
    keys = ("task", "dataset", "split", "run_id", "created_at")
    return all(getattr(ra, k) == getattr(rb, k) for k in keys) and ra.model.get("name") == rb.model.get("name")


def dataset_test(left: Side, right: Side, dataset: str, metric: str, permutations: int, seed: int, level: float
                 ) -> tuple[stats.Paired, tuple[np.ndarray, np.ndarray] | None]:
    """One dataset's paired tests, and (per-query metrics) the two aligned score vectors."""
    a, b = read_runs([left.records[dataset], right.records[dataset]], dataset)
    try:
        return pair_test(a, b, metric, permutations, seed, level)
    except per_query.PerQueryError as exc:
        raise HarnessError(f"{dataset}: {exc}") from None


def row(name: str, r: stats.Paired, p_adj: float | None, alpha: float) -> str:
    interval = f"[{r.ci_low:+.4f}, {r.ci_high:+.4f}]"
    adj = f"{p_adj:10.4f}" if p_adj is not None else f"{'':10s}"
    mark = " *" if (p_adj if p_adj is not None else r.p_randomization) < alpha else ""
    return (f"{name:24s} {r.n:6d} {r.mean_a:8.4f} {r.mean_b:8.4f} {r.diff:+8.4f} {interval:>20s} "
            f"{r.p_randomization:8.4f} {adj}{mark}")


def average_lines(pairs: dict[str, tuple[np.ndarray, np.ndarray]], each: dict[str, stats.Paired], permutations: int,
                  seed: int, level: float, alpha: float) -> list[str]:
    """The macro average over datasets: per query, stratified by dataset (where every dataset keeps per-query
    scores); then a test over the per-dataset scores, with its caveat."""
    lines = []
    k = len(each)
    if pairs:
        x = np.concatenate([p[0] for p in pairs.values()])
        y = np.concatenate([p[1] for p in pairs.values()])
        strata = np.concatenate([np.full(len(p[0]), i) for i, p in enumerate(pairs.values())])
        lines += [row(f"average ({k} sets)", stats.paired(x, y, permutations, seed, level, strata=strata), None, alpha),
                  "  (macro average of the datasets' means; queries permuted and resampled within their dataset)"]
    per_set = stats.paired([r.mean_a for r in each.values()], [r.mean_b for r in each.values()], permutations, seed,
                           level)
    how = f"exact over all 2^{k} sign flips" if k <= 16 else f"{permutations} permutations"
    return [*lines,
            f"over the {k} per-dataset scores: B-A {per_set.diff:+.4f}, randomization p {per_set.p_randomization:.4f} "
            f"({how}), t-test p {per_set.p_t:.4f}, {level:.0%} interval [{per_set.ci_low:+.4f}, "
            f"{per_set.ci_high:+.4f}]",
            f"  caveat: {k} datasets are few; this asks whether B is better on datasets like these, and has little "
            "power (with 5 or fewer sets no p can fall below 0.06)"]
