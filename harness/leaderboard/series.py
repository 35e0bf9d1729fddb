"""The leaderboard's series view: ``python -m harness.series`` records as the metric against the training step, each
step's newest weights' records, seeds averaged, with a band and the column's published numbers as reference lines."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.core.data_origin import LOCAL_MARK, local_data
from harness.core.results import SUBSET_MARK, evaluated_subset
from harness.leaderboard.layout import auto_scale, column_of, higher_is_better, table_spec
from harness.leaderboard.records import Loaded
from harness.selection.rules import group_by
from harness.selection.series import current, series_of

MAX_REFS = 6
BOOTSTRAP = 1000


@dataclass
class Point:
    step: int
    value: float                      # mean over the step's records, display scale
    lo: float | None = None           # band (seed spread or bootstrap interval), display scale
    hi: float | None = None
    band: str = ""                    # "seeds" | "bootstrap" | ""
    n: int = 1                        # records behind the value
    tokens_seen: int | None = None


@dataclass
class Plot:
    """One series on one task and dataset (a leaderboard column)."""

    series: str
    task: str
    table: str
    column: str
    label: str                        # the column's label ("SciFact")
    metric: str
    scale: float
    higher_is_better: bool
    points: list[Point]
    refs: list[tuple[str, float, str]] = field(default_factory=list)   # (published row, value, printed text)
    marks: str = ""                   # § / ‡ where the records say so

    @property
    def best(self) -> Point | None:
        if not self.points:
            return None
        pick = max if self.higher_is_better else min
        return pick(self.points, key=lambda p: (p.value, -p.step if self.higher_is_better else p.step))


def latest_only(loaded: Sequence[Loaded]) -> list[Loaded]:
    """The records the main tables show: every record outside a series, and of each series its latest step."""
    last: dict[tuple[str, str], int] = {}
    for item in loaded:
        s = series_of(item.record)
        if s is not None:
            key = (s["name"], item.record.task)
            last[key] = max(last.get(key, s["step"]), s["step"])
    return [item for item in loaded
            if (s := series_of(item.record)) is None or s["step"] == last[(s["name"], item.record.task)]]


def bootstrap(item: Loaded) -> tuple[float, float] | None:
    """A 95% bootstrap interval of the score over its queries where kept per-query scores mean it; else None."""
    import numpy as np

    from harness.core import per_query
    rec = item.record
    try:
        pq = per_query.read(item.path, (rec.details or {}).get("per_query"))
    except (per_query.PerQueryError, OSError, ValueError, KeyError):
        return None
    values = pq.scores.get(rec.main_score)
    if values is None or len(values) < 2 or not math.isclose(float(values.mean()), float(rec.score or 0), abs_tol=1e-6):
        return None
    rng = np.random.default_rng(0)
    means = values[rng.integers(0, len(values), size=(BOOTSTRAP, len(values)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _point(step: int, items: list[Loaded], scale: float) -> Point:
    scores = [float(i.record.score) * scale for i in items]   # type: ignore[arg-type]
    p = Point(step, statistics.fmean(scores), n=len(items),
              tokens_seen=(series_of(items[0].record) or {}).get("tokens_seen"))
    if len(items) >= 2:
        sd = statistics.stdev(scores)
        p.lo, p.hi, p.band = p.value - sd, p.value + sd, "seeds"
    elif (ci := bootstrap(items[0])) is not None:
        p.lo, p.hi, p.band = ci[0] * scale, ci[1] * scale, "bootstrap"
    return p


def _refs(published: Sequence[Any], table: str, column: str, model: dict[str, Any]) -> list[tuple[str, float, str]]:
    cells = [(row.key, row.cells[(table, column)]) for row in published
             if (table, column) in row.cells and row.cells[(table, column)].value is not None]
    for wanted in (lambda k: k.family == model.get("family"), lambda k: k.size == model.get("size"), lambda k: True):
        chosen = sorted(((k, c) for k, c in cells if wanted(k)), key=lambda kc: -kc[1].value)
        if chosen:
            return [(k.name, float(c.value), c.text) for k, c in chosen[:MAX_REFS]]
    return []


def collect(loaded: Sequence[Loaded], published: Sequence[Any] = ()) -> list[Plot]:
    """Every (series, task, column) among ``loaded`` as a plot, with its published reference lines."""
    mine = [i for i in loaded if series_of(i.record) is not None]
    groups = group_by(mine, lambda i: (series_of(i.record)["name"],   # type: ignore[index]
                                       i.record.task, *column_of(i.record)))
    plots = []
    for (name, task, table, column), items in sorted(groups.items()):
        by_id = {id(i.record): i for i in items}
        steps = current(i.record for i in items)
        if not steps:
            continue
        recs = [r for rs in steps.values() for r in rs]
        spec = table_spec(table)
        auto = auto_scale([float(r.score) for r in recs])   # type: ignore[arg-type]
        scale = spec.column_scale.get(column, spec.scale or auto)
        points = [_point(step, [by_id[id(r)] for r in rs], scale) for step, rs in steps.items()]
        plots.append(Plot(name, task, table, column, spec.labels.get(column, column), recs[0].main_score, scale,
                          higher_is_better(table), points, _refs(published, table, column, recs[0].model or {}),
                          _marks(recs)))
    return plots


def _marks(records: Sequence[Any]) -> str:
    return ((SUBSET_MARK if any(evaluated_subset(r) for r in records) else "")
            + (LOCAL_MARK if any(local_data(r) for r in records) else ""))
