"""The table printed at the end of a run."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from harness.results import STATUS_OK, STATUS_SKIPPED, SUBSET_MARK, ResultRecord, evaluated_subset


def format_summary(records: Sequence[ResultRecord]) -> str:
    """One row per record: task, dataset, model, main score (``§``: on part of the dataset, explained below the
    table), status, seconds."""
    rows = [("task", "dataset", "model", "run", "metric", "score", "status", "time (s)")]
    cut: dict[str, str] = {}
    for r in records:
        score = r.score
        subset = evaluated_subset(r)
        if subset and r.status == STATUS_OK:
            cut[r.dataset] = subset
        rows.append((
            r.task, r.dataset, r.model.get("name", "?"), r.run_id, r.main_score,
            (f"{score:.4f}" + (SUBSET_MARK if subset else "")) if r.status == STATUS_OK and score is not None else "-",
            r.status if r.status == STATUS_OK else
            f"skipped: {(r.error or '')[:60]}" if r.status == STATUS_SKIPPED else f"FAILED: {(r.error or '')[:60]}",
            f"{sum(r.timings.values()):.1f}" if r.timings else "-",
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines += [f"{SUBSET_MARK} {d}: evaluated on part of the dataset ({why}); not comparable with full-set numbers"
              for d, why in cut.items()]
    return "\n".join(lines)


def print_summary(records: Sequence[ResultRecord], stream: TextIO | None = None) -> None:
    if records:
        print("\n" + format_summary(records) + "\n", file=stream or sys.stdout, flush=True)
