"""Paired significance between the leaderboard's run rows, per cell, for the page's baseline marks.

A cell is testable when one ok record stands behind it and that record keeps its per-query (or per-example)
scores (``harness.per_query``). Published rows have no per-query data and are never marked.
"""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path
from typing import Any

from harness import per_query
from harness.compare.pairs import pair_test
from harness.errors import HarnessError
from harness.leaderboard.cells import PUBLISHED, Cell


def check_baseline(lb: Any, name: str | None) -> None:
    """``--baseline NAME`` must name a run row (published rows keep no per-query scores to test against)."""
    if not name:
        return
    runs = sorted({r.name for r in lb.rows if r.origin != PUBLISHED})
    if name not in runs:
        published = any(r.name == name for r in lb.rows)
        why = "it is a published row, which has no per-query scores" if published else "no such row"
        raise HarnessError(f"--baseline {name}: {why}; run rows: {', '.join(runs) or 'none'}")


def _kept(cell: Cell, link_root: Path | None, cache: dict[Path, Any]) -> tuple[per_query.PerQuery, str] | None:
    """The kept scores behind ``cell`` and its metric, or None (several records, none kept, a file missing)."""
    used = [s for s in cell.sources if s.get("used") and s.get("status") == "ok"]
    if cell.value is None or len(used) != 1:
        return None
    path = Path(used[0]["path"])
    path = (link_root / path).resolve() if link_root and not path.is_absolute() else path
    if path not in cache:
        try:
            claim = json.loads(path.read_text()).get("details", {}).get("per_query")
            cache[path] = per_query.read(path, claim)
        except (OSError, ValueError):
            cache[path] = None
    return (cache[path], str(used[0].get("metric"))) if cache[path] is not None else None


def pairwise(tables: list[Any], link_root: Path | None, *, permutations: int = 2000, seed: int = 0,
             level: float = 0.95) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    """table -> column -> ``<row a><TAB><row b>`` -> {d: B - A (display scale), lo, hi, p} for every pair of run rows
    whose cells are both testable on the same items (a before b in row id order)."""
    cache: dict[Path, Any] = {}
    out: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for table in tables:
        rows = sorted(r for r in table.cells if r.startswith("run:"))
        for col in {c for r in rows for c in table.cells[r]}:
            kept = {r: _kept(table.cells[r][col], link_root, cache) for r in rows if col in table.cells[r]}
            for a, b in combinations([r for r in rows if kept.get(r)], 2):
                (pa, metric), (pb, _) = kept[a], kept[b]
                try:
                    r, _ = pair_test(pa, pb, metric, permutations, seed, level)
                except (ValueError, per_query.PerQueryError):
                    continue   # other queries or qrels: no test
                scale = 100.0 if pa.unit == "query" else 1.0     # IR shown x100; GLUE's scores are x100 already
                out.setdefault(table.id, {}).setdefault(col, {})[f"{a}\t{b}"] = {
                    "d": round(r.diff * scale, 4), "lo": round(r.ci_low * scale, 4),
                    "hi": round(r.ci_high * scale, 4), "p": round(r.p_randomization, 6)}
    return out
