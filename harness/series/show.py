"""What the series command prints: the series with its cost, and the series table of the records."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.core import results
from harness.selection.comparable import read_comparable
from harness.series.units import Series, Unit


def _state(unit: Unit) -> str:
    if unit.skipped:
        return f"skipped: {unit.skipped}"
    if not unit.todo:
        return f"done ({unit.done} record{'s' if unit.done != 1 else ''})"
    failed = unit.state.failed if unit.state else []
    again = f"; failed before: {failed[0]}" if failed else ""
    return f"to run: {unit.cells - unit.done} of {unit.cells} cells{again}"


def _folder(unit: Unit, root: Path | None) -> str:
    folder = unit.checkpoint.folder
    return str(folder.relative_to(root)) if root and folder.is_relative_to(root) else str(folder)


def series_lines(series: Series, cost: str | None = None) -> list[str]:
    """The series: one line per checkpoint and task, the folders passed over, what is left and what it costs."""
    s = series.settings
    steps = sorted({u.step for u in series.units})
    where = f"under {s.root}" if s.root else "listed"
    tasks = ", ".join(t or "the default task" for t in s.tasks)
    head = (f"series {s.name}: {len(steps)} checkpoint{'s' if len(steps) != 1 else ''} {where}"
            + (f" (steps {', '.join(map(str, steps))})" if steps else "") + f"; task {tasks}")
    rows = [("step", "folder", "task", "state")]
    rows += [(str(u.step), _folder(u, s.root), u.task or "-", _state(u)) for u in series.units]
    lines = [head, *_table(rows, indent="  ")]
    if series.ignored:
        lines.append(f"  not checkpoints (no step in the name, '{s.pattern.pattern}'): {', '.join(series.ignored[:8])}"
                     + (f" and {len(series.ignored) - 8} more" if len(series.ignored) > 8 else ""))
    todo, skipped = series.todo, [u for u in series.units if u.skipped]
    lines.append(f"  {len(todo)} to run, {sum(1 for u in series.units if not u.todo and not u.skipped)} done, "
                 f"{len(skipped)} skipped" + (f"; {cost}" if cost else ""))
    return lines


def _table(rows: Sequence[Sequence[str]], indent: str = "") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def cost_text(series: Series, cluster: dict[str, Any]) -> str:
    """The cost of what is left: the paper graph's cost model and, once checkpoints are done, their seconds here."""
    from harness.paper import cost
    todo = series.todo
    parts = []
    if todo:
        gpu = str(cluster.get("gpu", "rtx4090"))
        hours, source = 0.0, ""
        try:
            for u in todo:
                assert u.state is not None
                tp = cost.throughput(u.state.model, u.state.results)
                hours += cost.gpu_hours(u.state.work, tp, gpu)
                source = tp.source
        except Exception as exc:   # a task the cost model does not size: say so, never stop the series for it
            parts.append(f"no GPU-hour estimate for this task ({type(exc).__name__}: {str(exc)[:80]})")
        else:
            parts.append(f"estimate {hours:.2f} GPU-hours on {gpu} ({source}; python -m harness.paper's cost model)")
    done = [u.state.seconds for u in series.units if u.state and not u.todo and not u.skipped and u.state.seconds > 0]
    if done:
        parts.append(f"measured here: {statistics.fmean(done):.3g} s of recorded work per checkpoint run ({len(done)} "
                     "done)")
    return "; ".join(parts)


def series_rows(units: Sequence[Unit]) -> dict[tuple[str, str], list[tuple[int, float | None, str]]]:
    """(task, dataset) -> one (step, score, note) per checkpoint, from the units' records as they are now."""
    out: dict[tuple[str, str], list[tuple[int, float | None, str]]] = {}
    for u in sorted(units, key=lambda u: u.step):
        for path in u.state.paths if u.state else []:
            try:
                rec = read_comparable(path) if path.is_file() else None   # in the score its column compares
            except (ValueError, OSError, TypeError):
                rec = None
            if rec is None or rec.details.get("member_of"):
                continue
            ok = rec.status == results.STATUS_OK and isinstance(rec.score, int | float)
            note = "" if ok else (rec.status if rec.status != results.STATUS_FAILED else
                                  f"FAILED: {(rec.error or '')[:60]}")
            out.setdefault((f"{rec.task}", f"{rec.dataset} ({rec.main_score})"), []).append(
                (u.step, float(rec.score) if ok else None, note))
    return out


def series_tables(series: Series) -> str:
    """Every (task, dataset) of the series as a table of step, score and difference to the previous step."""
    from harness.core.console import format_series
    units = [u for u in series.units if u.state and u.state.paths]
    hib = {u.state.plan.task: u.state.plan.header.higher_is_better for u in units if u.state and u.state.plan}
    blocks = [format_series(f"series {series.settings.name}: {task} / {what}", rows, hib.get(task, True))
              for (task, what), rows in series_rows(units).items()]
    return "\n\n".join(blocks)
