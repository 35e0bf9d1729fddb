"""Leaderboard -> static site: the packaged template (index.html, app.js, style.css) plus ``data.js``,
which sets ``window.LEADERBOARD`` so the page works from file:// (browsers block fetch() there)."""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

from harness.leaderboard.build import Leaderboard
from harness.leaderboard.layout import OVERVIEW, higher_is_better, table_spec
from harness.leaderboard.tables import table_rows

TEMPLATE_FILES = ("index.html", "app.js", "style.css")
_OVERVIEW_TABLE = {c.id: c.table for c in OVERVIEW}


def template_dir() -> Path:
    return Path(str(resources.files("harness.leaderboard") / "site_template"))


def site_data(lb: Leaderboard, sig: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything the page shows: rows, tables with per-cell provenance, build meta, version table, and (``sig``)
    the paired tests between run rows behind the baseline marks."""
    tables = {c.table for c in OVERVIEW} | {t.id for t in lb.tables}
    return {
        "meta": lb.meta,
        "labels": {t: table_spec(t).label for t in sorted(tables)},   # table id -> short label (filters, charts)
        "versions": lb.versions,
        "rows": [{"id": k.id, "name": k.name, "family": k.family, "size": k.size, "origin": k.origin} for k in lb.rows],
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
    paths = []
    for name in TEMPLATE_FILES:
        paths.append(Path(shutil.copyfile(template_dir() / name, out / name)))
    blob = json.dumps(site_data(lb, sig), separators=(",", ":"), default=str)
    data = out / "data.js"
    data.write_text(f"window.LEADERBOARD = {blob};\n")
    from harness.leaderboard.series_page import write

    return [*paths, data, *write(lb.series, out)]
