"""The table printed at the end of a run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.core.data_origin import LOCAL_MARK, local_data
from harness.core.results import STATUS_OK, STATUS_SKIPPED, SUBSET_MARK, ResultRecord, evaluated_subset


def seconds(timings: Mapping[str, Any]) -> float:
    """A record's wall time from its timings: their ``total`` where it has one (GLUE: ``train`` and ``eval`` are
    parts of it), else the sum of its parts (numbers only)."""
    numbers = {k: v for k, v in timings.items() if isinstance(v, int | float)}
    return float(numbers["total"]) if "total" in numbers else float(sum(numbers.values()))


def format_summary(records: Sequence[ResultRecord]) -> str:
    """One row per record: task, dataset, model, main score (``§``: on part of the dataset; ``‡``: on data that
    is not the official copy; each explained below the table), status, seconds."""
    rows = [("task", "dataset", "model", "run", "metric", "score", "status", "time (s)")]
    cut: dict[str, str] = {}
    local: dict[str, str] = {}
    for r in records:
        score = r.score
        subset, other = evaluated_subset(r), local_data(r)
        if subset and r.status == STATUS_OK:
            cut[r.dataset] = subset
        if other and r.status == STATUS_OK:
            local[r.dataset] = other
        marks = (SUBSET_MARK if subset else "") + (LOCAL_MARK if other else "")
        rows.append((
            r.task, r.dataset, r.model.get("name", "?"), r.run_id, r.main_score,
            f"{score:.4f}{marks}" if r.status == STATUS_OK and score is not None else "-",
            r.status if r.status == STATUS_OK else
            f"skipped: {(r.error or '')[:60]}" if r.status == STATUS_SKIPPED else f"FAILED: {(r.error or '')[:60]}",
            f"{seconds(r.timings):.1f}" if r.timings else "-",
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines += [f"{SUBSET_MARK} {d}: evaluated on part of the dataset ({why}); not comparable with full-set numbers"
              for d, why in cut.items()]
    lines += [f"{LOCAL_MARK} {d}: {why}, not the pinned official copy; not comparable with published numbers"
              for d, why in local.items()]
    return "\n".join(lines)


def print_summary(records: Sequence[ResultRecord]) -> None:
    if records:
        print("\n" + format_summary(records) + "\n", flush=True)


def format_series(title: str, rows: Sequence[tuple[int, float | None, str]], higher_is_better: bool = True) -> str:
    """A series as a table: one row per step (its score, the difference to the previous step that has one, or why
    it has none), the best step marked ``*``."""
    scored = [(step, score) for step, score, _ in rows if score is not None]
    best = (max if higher_is_better else min)(scored, key=lambda p: p[1])[0] if scored else None
    table = [("step", "score", "vs previous")]
    previous: float | None = None
    for step, score, note in rows:
        if score is None:
            table.append((str(step), "-", note))
            continue
        change = f"{score - previous:+.4f}" if previous is not None else "-"
        table.append((str(step), f"{score:.4f}" + ("*" if step == best else " "), change))
        previous = score
    widths = [max(len(r[i]) for r in table) for i in range(3)]
    lines = [title] + ["  " + "  ".join([r[0].rjust(widths[0]), r[1].rjust(widths[1]), r[2].rjust(widths[2])
                                         if r[1] != "-" else r[2]]).rstrip() for r in table]
    if best is not None:
        lines.append(f"  * best step: {best} ({'highest' if higher_is_better else 'lowest'} score)")
    return "\n".join(lines)
