"""Leaderboard -> Markdown (``leaderboard.md``), one CSV per table and the static site: the packaged template plus
``data.js``, which sets ``window.LEADERBOARD`` so the page works from file:// (browsers block fetch() there)."""

from __future__ import annotations

import csv
import json
import math
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

from harness.leaderboard.build import Leaderboard, Table
from harness.leaderboard.cells import (
    COMPUTED_MARK,
    LOCAL_MARK,
    OTHER_METRIC_MARK,
    OTHER_PROTOCOL_MARK,
    PARTIAL_MARK,
    SUBSET_MARK,
    Cell,
    RowKey,
    ranked,
)
from harness.leaderboard.layout import OVERVIEW, higher_is_better, table_spec

_ROW_HEADERS = ("model", "family", "size", "origin")
TEMPLATE_FILES = ("index.html", "app.js", "style.css")
_OVERVIEW_TABLE = {c.id: c.table for c in OVERVIEW}



def table_rows(lb: Leaderboard, table: Table) -> list[RowKey]:
    """The rows a table shows, in the leaderboard's order (rows with no cell in it are left out)."""
    return [k for k in lb.rows if k.id in table.cells]


def best_by_column(lb: Leaderboard, table: Table) -> dict[str, float]:
    """Best complete full-set value per column, in the table's direction (partial, subset, local or failed: never)."""
    sign = 1 if higher_is_better(table.family) else -1
    best: dict[str, float] = {}
    for key in table_rows(lb, table):
        for col, cell in table.cells[key.id].items():
            if ranked(cell) and sign * cell.value > sign * best.get(col, -sign * math.inf):
                best[col] = cell.value
    return best


def csv_value(cell: Cell | None) -> str:
    """The number alone: published text verbatim; partial marker and ±std moved to the notes column."""
    if cell is None:
        return ""
    marks = PARTIAL_MARK + COMPUTED_MARK + SUBSET_MARK + LOCAL_MARK + OTHER_METRIC_MARK + OTHER_PROTOCOL_MARK
    return cell.text.rstrip(marks).split("±")[0]


def _notes(table: Table, key: RowKey) -> list[str]:
    labels = dict(table.columns)
    return [f"{labels.get(col, col)}: {cell.note}" for col, cell in table.cells[key.id].items()
            if (cell.partial or cell.failed or cell.computed or cell.subset or cell.local or cell.other_metric
                or cell.other_protocol or cell.std is not None)]


def write_csvs(lb: Leaderboard, out: Path) -> list[Path]:
    paths = []
    for table in lb.tables:
        path = out / f"{table.id}.csv"
        with open(path, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow([*_ROW_HEADERS, *(c for c, _ in table.columns), "notes"])
            for key in table_rows(lb, table):
                cells = table.cells[key.id]
                w.writerow([key.name, key.family, key.size, key.origin,
                            *(csv_value(cells.get(c)) for c, _ in table.columns), " | ".join(_notes(table, key))])
        paths.append(path)
    return paths


def _md_cell(cell: Cell | None, best: float | None) -> str:
    if cell is None:
        return ""
    text = cell.text.replace("*", r"\*")
    return f"**{text}**" if best is not None and cell.value == best and ranked(cell) else text


def markdown(lb: Leaderboard) -> str:
    m = lb.meta
    lines = [
        "# Leaderboard", "",
        f"Generated {m['generated_at']} from {m['n_records']} record(s) ({m['n_failed']} failed) in "
        f"{', '.join(m['results_dirs']) or 'no results directory'}; combine rule: **{m['combine']}** — {m['combine_text']}.",
        "", "## Rules", "", *(f"- {r}" for r in m["rules"]), "",
    ]
    for table in lb.tables:
        rows = table_rows(lb, table)
        if not rows:
            continue
        best = best_by_column(lb, table)
        lines += [f"## {table.title}", ""]
        if table.note:
            lines += [table.note, ""]
        lines.append("| Model | Size | Origin | " + " | ".join(label for _, label in table.columns) + " |")
        lines.append("|---|---|---|" + "---:|" * len(table.columns))
        notes = []
        for key in rows:
            cells = table.cells[key.id]
            vals = [_md_cell(cells.get(c), best.get(c)) for c, _ in table.columns]
            badges = "".join(f" [{b['badge']}]" for b in lb.badges.get(key.id, []))
            lines.append(f"| {key.name}{badges} | {key.size} | {key.origin} | " + " | ".join(vals) + " |")
            notes += [f"- {key.name} ({key.origin}) — {n}" for n in _notes(table, key)]
        lines.append("")
        if notes:
            lines += ["Notes:", "", *notes, ""]
    if m["sources"]:
        lines += ["## Published sources", ""]
        lines += [f"- `{s['file']}` ({s['where']}): {s['citation']}"
                  + (f" — protocol: {s['protocol']}" if s.get("protocol") else "") for s in m["sources"]]
        lines.append("")
    if m["skipped"]:
        lines += ["## Skipped files", "", *(f"- {s}" for s in m["skipped"]), ""]
    return "\n".join(lines)


def write_markdown(lb: Leaderboard, out: Path) -> Path:
    path = out / "leaderboard.md"
    path.write_text(markdown(lb))
    return path


def site_data(lb: Leaderboard, sig: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the page shows: rows, tables with cell provenance, build meta, versions, (``sig``) the paired tests."""
    tables = {c.table for c in OVERVIEW} | {t.id for t in lb.tables}
    return {
        "meta": lb.meta,
        "labels": {t: table_spec(t).label for t in sorted(tables)},   # table id -> short label (filters, charts)
        "versions": lb.versions,
        "rows": [{"id": k.id, "name": k.name, "family": k.family, "size": k.size, "origin": k.origin}
                 | ({"badges": lb.badges[k.id]} if k.id in lb.badges else {}) for k in lb.rows],
        "tables": [
            {
                "id": t.id, "title": t.title, "family": t.family, "note": t.note,
                "hib": higher_is_better(t.family),
                "columns": [{"id": c, "label": label, "family": _OVERVIEW_TABLE.get(c, t.family) if t.id == "overview"
                             else t.family} for c, label in t.columns],
                "cells": {k.id: {c: cell.to_json() for c, cell in t.cells[k.id].items()} for k in table_rows(lb, t)},
            }
            for t in lb.tables
        ],
        "sig": sig,
        "series": lb.meta.get("series", []),
    }


def write_site(lb: Leaderboard, out: Path, sig: dict[str, Any] | None = None) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    template = Path(str(resources.files("harness.leaderboard") / "site_template"))
    paths = [Path(shutil.copyfile(template / name, out / name)) for name in TEMPLATE_FILES]
    blob = json.dumps(site_data(lb, sig), separators=(",", ":"), default=str)
    data = out / "data.js"
    data.write_text(f"window.LEADERBOARD = {blob};\n")
    from harness.leaderboard.series_page import write
    return [*paths, data, *write(lb.series, out)]
