"""Paired significance between the leaderboard's run rows, per cell and per table average: baseline marks, tie groups
and rank intervals, for cells whose records keep per-query scores (as ``harness.compare`` tests them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.compare import many
from harness.compare.outcomes import claim_of, outcomes
from harness.core import per_query
from harness.core.errors import HarnessError
from harness.leaderboard.cells import PUBLISHED, Cell
from harness.leaderboard.layout import AVG, higher_is_better
from harness.selection.rules import group_by


def check_baseline(lb: Any, name: str | None) -> None:
    """``--baseline NAME`` must name a run row (published rows keep no per-query scores to test against)."""
    if not name:
        return
    runs = sorted({r.name for r in lb.rows if r.origin != PUBLISHED})
    if name not in runs:
        published = any(r.name == name for r in lb.rows)
        why = "it is a published row, which has no per-query scores" if published else "no such row"
        raise HarnessError(f"--baseline {name}: {why}; run rows: {', '.join(runs) or 'none'}")


def _kept(cell: Cell, link_root: Path | None, cache: dict[Path, Any]) -> tuple[list[per_query.PerQuery], str] | None:
    """The kept scores of every record behind ``cell`` and their metric, or None (none kept, missing or mismatched)."""
    used = [s for s in cell.sources if s.get("used") and s.get("status") == "ok" and s.get("path")]
    if cell.value is None or not used:
        return None
    runs = []
    for src in used:
        path = Path(src["path"])
        path = (link_root / path).resolve() if link_root and not path.is_absolute() else path
        if path not in cache:
            try:
                cache[path] = per_query.read(path, claim_of(path))
            except (OSError, ValueError):
                cache[path] = None
        if cache[path] is None:
            return None
        runs.append(cache[path])
    return runs, str(used[0].get("metric"))


def tests(tables: list[Any], link_root: Path | None, settings: dict[str, Any]) -> dict[str, Any]:
    """The page's ``sig``: ``pairs``, ``groups`` (compact letters), ``ranks`` and ``family``, per table and column."""
    s = many.Settings(int(settings["permutations"]), int(settings["seed"]), float(settings["level"]),
                      float(settings["alpha"]), str(settings.get("correction", "holm")))
    out: dict[str, Any] = {"settings": {**settings, "correction": s.correction}, "pairs": {}, "groups": {},
                           "ranks": {}, "family": {}}
    cache: dict[Path, Any] = {}
    for table in tables:
        rows = _table_rows(table, link_root, cache, s)
        if not rows:
            continue
        out["family"][table.id] = many.correct([r for r, _ in rows], s.correction)
        for row, scale in rows:
            many.group(row, s.alpha, higher_is_better(table.family))
            col = AVG if row.over else row.name
            out["pairs"].setdefault(table.id, {})[col] = dict(_pair(p, scale) for p in row.pairs)
            out["groups"].setdefault(table.id, {})[col] = row.groups
            out["ranks"].setdefault(table.id, {})[col] = {x: list(r) for x, r in row.ranks.items()}
    return out


def _pair(p: many.Pair, scale: float) -> tuple[str, dict[str, float]]:
    """The page's record of one pair, a before b in row id order (B - A)."""
    sign, a, b = (1, p.a, p.b) if p.a < p.b else (-1, p.b, p.a)
    lo, hi = sorted((sign * p.low * scale, sign * p.high * scale))
    return f"{a}\t{b}", {"d": round(sign * p.diff * scale, 4), "lo": round(lo, 4), "hi": round(hi, 4),
                         "p": round(p.p, 6), "q": round(p.p_adjusted, 6)}


def _table_rows(table: Any, link_root: Path | None, cache: dict[Path, Any], s: many.Settings
                ) -> list[tuple[many.Row, float]]:
    """Every tested column of one table, then its average over the columns every complete row has."""
    hib = higher_is_better(table.family)
    rows_ids = sorted(r for r in table.cells if r.startswith("run:"))
    tested: list[tuple[many.Row, float]] = []
    kept_by_col: dict[str, dict[str, many.Outcomes]] = {}
    reps_by_col: dict[str, dict[str, Any]] = {}
    columns = sorted({c for r in rows_ids for c in table.cells[r]} - {AVG})
    for i, col in enumerate(columns):
        runs = {r: k for r in rows_ids if col in table.cells[r] and (k := _kept(table.cells[r][col], link_root, cache))}
        kept = _outcomes(runs)
        if len(kept) < 2:
            continue
        scale = 100.0 if next(iter(kept.values())).runs[0].unit == "query" else 1.0
        row, reps_by_col[col] = many.cell_row(table.id, col, kept, s, hib, i)
        kept_by_col[col] = kept
        tested.append((row, scale))
    return tested + _average(table, rows_ids, kept_by_col, reps_by_col, s, hib)


def _outcomes(runs: dict[str, tuple[list[per_query.PerQuery], str]]) -> dict[str, many.Outcomes]:
    """The rows' outcomes on one column, among rows scored on the same items as each other (the largest such set)."""
    out: dict[str, many.Outcomes] = {}
    for r, (pqs, metric) in runs.items():
        try:
            out[r] = outcomes(pqs, metric)
        except (ValueError, HarnessError):
            continue   # runs of one cell scored on different items: not testable
    groups = group_by(out, lambda r: (frozenset(out[r].ids), tuple(sorted(out[r].runs[0].data.items()))))
    best = max(groups.values(), key=len, default=[])
    return {r: out[r] for r in best}


def _average(table: Any, rows_ids: list[str], kept: dict[str, dict[str, many.Outcomes]], reps: dict[str, Any],
             s: many.Settings, hib: bool) -> list[tuple[many.Row, float]]:
    """The table's Avg column tested over its components, among rows complete and tested in every component."""
    complete = {}
    for r in rows_ids:
        cell = table.cells[r].get(AVG)
        if cell is not None and cell.value is not None and not cell.partial and cell.sources:
            complete[r] = tuple(src.get("component") for src in cell.sources)
    parts = set(complete.values())
    if len(parts) != 1:
        return []
    names = list(next(iter(parts)))
    ready = [r for r in complete if all(c in kept and r in kept[c] for c in names)]
    if len(ready) < 2 or len(names) < 2:
        return []
    scale = 100.0 if kept[names[0]][ready[0]].runs[0].unit == "query" else 1.0
    return [(many.average_row(table.id, names, ready, kept, reps, s, hib), scale)]
