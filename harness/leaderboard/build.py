"""Assemble the leaderboard: combined record cells + published rows -> family tables + the overview."""

from __future__ import annotations

import datetime as _dt
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

from harness import specs
from harness.core.console import step
from harness.core.data_origin import LOCAL_MARK, MEANING
from harness.core.results import STATUS_FAILED, STATUS_OK
from harness.leaderboard.baselines import (
    OVERVIEW_TABLE,
    PAPER_SOURCES,
    SOURCES,
    TASK_ROW_SOURCES,
    load_mteb_published,
    load_published,
    mteb_source,
)
from harness.leaderboard.cells import (
    COMPUTED_MARK,
    OTHER_METRIC_MARK,
    OTHER_PROTOCOL_MARK,
    PARTIAL_MARK,
    PUBLISHED,
    SUBSET_MARK,
    Cell,
    RowKey,
    fmt,
)
from harness.leaderboard.layout import AVG, OVERVIEW, auto_scale, table_spec, table_specs
from harness.leaderboard.recipes import column_recipes, mark_recipe, run_recipes
from harness.leaderboard.records import COMBINE_RULES, VersionTable, combine, group, load_records, selected
from harness.leaderboard.series import collect, latest_only
from harness.selection.rules import rule_for

_SIZE_ORDER = {"small": 0, "base": 1, "large": 2}


@dataclass
class Table:
    id: str
    title: str
    family: str                                     # task family id ("overview" for Table 1)
    columns: list[tuple[str, str]]                  # (column id, label)
    cells: dict[str, dict[str, Cell]] = field(default_factory=dict)   # row id -> column -> cell
    note: str = ""


@dataclass
class Leaderboard:
    rows: list[RowKey]
    tables: list[Table]
    meta: dict[str, Any]
    versions: list[dict[str, str]]
    series: list[Any] = field(default_factory=list)   # harness.leaderboard.series.Plot: the series view
    #: row id -> the source tables of a published row from a later paper, [{"badge": ..., "note": ...}]
    badges: dict[str, list[dict[str, str]]] = field(default_factory=dict)

    def table(self, table_id: str) -> Table:
        return next(t for t in self.tables if t.id == table_id)


def rules_text(combine_rule: str) -> list[str]:
    return [
        "IR scores (nDCG@10) are shown x100 and GLUE scores as reported (x100), with one decimal as in the paper.",
        "Which runs a model's cells come from is decided by its task family's selection rule, the same code as "
        "harness.select (BEIR: one learning rate, chosen by mean nDCG@10 over NFCorpus, SciFact, TREC-COVID and "
        "FiQA, reported on every dataset; GLUE: the best configuration per task), unless the combine rule is latest.",
        "Averages: BEIR = mean over the 15 datasets (CQADupstack is one record, itself the mean of its "
        "subforums); GLUE = mean over the 8 tasks; NanoBEIR = mean over the 13 sets. A row that misses some "
        "datasets shows the mean of those it has, marked * with 'partial: k/N datasets'; a partial mean is "
        "not comparable, is never marked best and sorts after complete ones.",
        f"Several records for one model, task and dataset are combined by the rule '{combine_rule}' — "
        f"{COMBINE_RULES[combine_rule]}.",
        "Failed records are never shown as numbers. Published rows are copied exactly as printed in their source; "
        f"{COMPUTED_MARK} marks a mean computed here from published numbers where the source prints none (Table 5).",
        f"{SUBSET_MARK} marks a number evaluated on part of a dataset (task.max_queries / max_docs / "
        "max_eval_samples): published columns mean whole datasets, so it is never marked best and sorts after "
        "full-set numbers; an average over such a cell carries the mark too.",
        f"{LOCAL_MARK} marks a number {MEANING} (records say where their data came from; one written before they "
        "did is local data when it read task.data_dir for a dataset whose catalog entry names a hub copy); it sorts "
        "after other numbers and an average over such a cell carries the mark too.",
        f"{OTHER_METRIC_MARK} marks a published number in another metric than its column's (Table 5's QQP and MRPC "
        "columns are accuracy, but it copies GTE-en-MLM's F1: QQP's by arithmetic, MRPC's our reading): footnoted, "
        "never marked best; an average over such a cell (Table 1's GLUE of that row) carries the mark too.",
        f"{OTHER_PROTOCOL_MARK} marks a published number measured under another protocol than its column's (a later "
        "paper's own fine-tuning or evaluation code: mmBERT's GLUE via mGTE's NLU code, the Ettin rows' own GLUE "
        "sweep, Ettin's CSN and MLDR), and a run's number whose DPR model was not fine-tuned under the recipe of the "
        "published rows beside it (MTEB(eng, v2) Retrieval: Ettin's train_st.py, sweep=beir-lr-ettin; task=beir "
        "alone trains with the ModernBERT paper's): footnoted with what differs, never marked best; a published row "
        "is badged with its source table.",
        "GLUE runs made here follow the authors' eval.py protocol (last evaluation, batch patience, three seeds, "
        "MNLI chaining of every weight but the classifier): that it is what produced Table 5, like each default "
        "docs/fidelity.md marks 'our reading', is a reading of unpublished sweep configs, not a fact the sources state.",
        "Best value per column (among complete full-set values of the rows shown) is marked in bold.",
    ]


def average_cell(cells: dict[str, Cell], expected: Sequence[str], decimals: int = 1) -> Cell | None:
    """Mean over ``expected`` columns; a partial mean is marked and explained, never silently complete."""
    present = [d for d in expected if d in cells and cells[d].value is not None]
    if not present:
        return None
    mean = statistics.fmean(cells[d].value for d in present)
    parts = [{"component": d, "text": cells[d].text} for d in present]
    cut = [d for d in present if cells[d].subset]
    mark, extra = (SUBSET_MARK, f"; subset: {', '.join(cut)} evaluated on part of the dataset") if cut else ("", "")
    local = [d for d in present if cells[d].local]
    if local:
        mark, extra = mark + LOCAL_MARK, extra + f"; local data: {', '.join(local)} not the official copy"
    missing = [d for d in expected if d not in present]
    note = (f"partial: {len(present)}/{len(expected)} datasets (missing: {', '.join(missing)}); mean of those present "
            "only, not comparable with complete rows") if missing else f"mean of all {len(expected)} datasets"
    return Cell(mean, fmt(mean, decimals) + (PARTIAL_MARK if missing else "") + mark, n=len(present),
                partial=bool(missing), note=note + extra, sources=parts, subset=bool(cut), local=bool(local))


def _published_mean(cells: dict[str, Cell], expected: Sequence[str]) -> Cell | None:
    """A published table without an average column (Table 5): its printed values' mean, in decimal, labelled so."""
    if not all(d in cells for d in expected):
        return None
    where = next((src["where"] for cell in cells.values() for src in cell.sources if "where" in src), "the source")
    mean = sum(Decimal(cells[d].text.rstrip(OTHER_METRIC_MARK + OTHER_PROTOCOL_MARK)) for d in expected) / len(expected)
    number = str(mean.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))
    return _over_other_metrics(Cell(
        float(number), number + COMPUTED_MARK, n=len(expected), computed=True,
        note=f"{COMPUTED_MARK} computed here: mean of the {len(expected)} published scores ({where} prints no "
             "average; not a published number)"), cells, expected)


def _over_other_metrics(avg: Cell, cells: dict[str, Cell], expected: Sequence[str]) -> Cell:
    """``avg`` marked where it averages a published number in another metric (or protocol) than its column's."""
    other = [d for d in expected if d in cells and cells[d].other_protocol]
    if other and not avg.other_protocol:
        avg = replace(avg, text=avg.text + OTHER_PROTOCOL_MARK, other_protocol=cells[other[0]].other_protocol,
                      note=f"{avg.note}; {OTHER_PROTOCOL_MARK} averages {', '.join(other)}, measured under another "
                           "protocol than the column's")
    odd = [d for d in expected if d in cells and cells[d].other_metric]
    if not odd:
        return avg
    metrics = sorted({cells[d].other_metric for d in odd})
    return replace(avg, text=avg.text + OTHER_METRIC_MARK, other_metric="/".join(metrics),
                   note=f"{avg.note}; {OTHER_METRIC_MARK} averages {', '.join(odd)} in {'/'.join(metrics)}, not "
                        "its column's metric")


def _published_averages(overview: dict[RowKey, dict[str, Cell]],
                        by_table: dict[str, dict[RowKey, dict[str, Cell]]]) -> None:
    """A published row's table average as printed (DeBERTaV3-base: 88.1), not from its rounded cells (88.3)."""
    for key, cells in overview.items():
        for col in OVERVIEW:
            rows = by_table.get(col.table, {})
            if col.column == AVG and col.id in cells and key in rows and AVG not in rows[key]:
                rows[key][AVG] = _over_other_metrics(cells[col.id], rows[key], list(rows[key]))


def _row_order(key: RowKey) -> tuple:
    return (key.family.lower(), _SIZE_ORDER.get(key.size, 9), key.size, key.name)


def build_leaderboard(dirs: Sequence[str | os.PathLike], *, combine_rule: str = "mean", published: bool = True,
                      link_root: Path | None = None, mteb_results: Sequence[str | os.PathLike] = (),
                      mteb_models: Sequence[str] = ()) -> Leaderboard:
    """Every record under ``dirs``, each cell combined by ``combine_rule``, with the published rows."""
    COMBINE_RULES.lookup(combine_rule)
    with step(f"leaderboard: reading the records under {', '.join(map(str, dirs))}") as done:
        loaded, skipped = load_records(dirs)
        done.outcome = f"{len(loaded):,} records" + (f", {len(skipped)} skipped" if skipped else "")
    everything, loaded = loaded, latest_only(loaded)   # a series' earlier steps: the series view only
    groups = group(loaded)
    picks = selected(loaded, combine_rule) if combine_rule != "latest" else {}
    versions = VersionTable()
    link_root = link_root.resolve() if link_root else None

    table_values: dict[str, list[float]] = {}
    for (_, table, _), items in groups.items():
        table_values.setdefault(table, []).extend(
            i.record.score for i in items if i.record.status == STATUS_OK and isinstance(i.record.score, int | float))
    scales = {t: table_spec(t).scale or auto_scale(v) for t, v in table_values.items()}

    # (table -> row -> column -> cell), user rows first, then published rows
    by_table: dict[str, dict[RowKey, dict[str, Cell]]] = {}
    recipes, wanted = run_recipes(i.record for i in everything), column_recipes(PAPER_SOURCES)
    for (key, table, col), items in groups.items():
        fam, spec = specs.for_record(items[0].record), table_spec(table)
        pick = picks.get((key.name, table, col))
        chosen = pick.used if pick else None
        cell = combine(items, combine_rule, spec.column_scale.get(col, scales[table]), chosen=chosen,
                       chosen_by=rule_for(fam.selection).description if fam and chosen else "",
                       link_root=link_root, versions=versions, decimals=spec.column_decimals.get(col, spec.decimals),
                       remark=pick.remark if pick else "", withheld=pick.withheld if pick else "")
        cell = mark_recipe(cell, [i.record for i in items], wanted.get((table, col)), recipes)
        by_table.setdefault(table, {}).setdefault(key, {})[col] = cell
    user_rows = sorted({k for (k, _, _) in groups}, key=_row_order)

    overview_published: dict[RowKey, dict[str, Cell]] = {}
    papers = pub_rows = load_published() if published else []   # also the series view's reference lines
    for prow in papers:
        for (table, col), cell in prow.cells.items():
            target = overview_published if table == OVERVIEW_TABLE else by_table.setdefault(table, {})
            target.setdefault(prow.key, {})[col] = cell
    _published_averages(overview_published, by_table)
    if mteb_results:   # after the published tables: a task by name joins the mteb table when it has that column
        existing = {t: {c for cells in rows.values() for c in cells} for t, rows in by_table.items()}
        imported = load_mteb_published(mteb_results, models=mteb_models, existing=existing)
        for prow in imported:
            for (table, col), cell in prow.cells.items():
                by_table.setdefault(table, {}).setdefault(prow.key, {})[col] = cell
        pub_rows = imported + pub_rows   # next to this run's rows, before the papers' rows

    known = table_specs()
    tables = [_family_table(t, by_table[t], scales.get(t))
              for t in [t for t in known if t in by_table] + sorted(t for t in by_table if t not in known)]
    overview = _overview_table(user_rows, overview_published, tables)
    rows = user_rows + [p.key for p in pub_rows]
    meta = {
        "generated_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "combine": combine_rule,
        "combine_text": COMBINE_RULES[combine_rule],
        "results_dirs": [str(d) for d in dirs],
        "n_records": len(everything),
        "n_failed": sum(1 for i in everything if i.record.status == STATUS_FAILED),
        "skipped": skipped,
        "rules": rules_text(combine_rule),
        "sources": ([{"id": s.id, "citation": s.citation, "where": s.where, "file": s.file}
                     for s in (*SOURCES, *TASK_ROW_SOURCES)]
                    + [{"id": s.id, "citation": s.citation, "where": s.where, "file": s.file, "protocol": s.protocol}
                       for s in PAPER_SOURCES] if published else [])
        + [mteb_source(d) for d in mteb_results],
    }
    plots = collect(everything, papers)
    meta["series"] = sorted({p.series for p in plots})
    if plots:
        meta["rules"].append("A series (python -m harness.series) shows its latest step in the tables, as the row "
                             "<series>-step<N>; series.html plots every step against the training step.")
    badges = {p.key.id: p.badges for p in papers if p.badges}
    return Leaderboard(rows, [overview, *tables], meta, versions.items, plots, badges)


def _family_table(table_id: str, rows: dict[RowKey, dict[str, Cell]], scale: float | None) -> Table:
    spec = table_spec(table_id)
    if spec.columns is not None:
        columns = [*spec.columns, AVG] if spec.average else list(spec.columns)
    else:
        seen = {c for cells in rows.values() for c in cells}
        columns = [c for c in spec.labels if c in seen] + sorted(seen - set(spec.labels))
    labels = [(c, "Avg" if c == AVG else spec.labels.get(c, c)) for c in columns]
    table = Table(table_id, spec.title, table_id, labels, note=spec.note)
    if spec.scale is None and scale == 100.0:
        table.note = "scores were on a 0-1 scale and are shown x100"
    for key in rows:   # display order is Leaderboard.rows; this dict is only a lookup
        cells = dict(rows[key])
        if spec.columns is not None and spec.average and AVG not in cells:
            avg = (_published_mean(cells, spec.columns) if key.origin == PUBLISHED
                   else average_cell(cells, spec.columns, spec.decimals))
            if avg is not None:
                cells[AVG] = avg
        table.cells[key.id] = cells
    return table


def _overview_table(user_rows: list[RowKey], published: dict[RowKey, dict[str, Cell]], tables: list[Table]) -> Table:
    """Table 1 shape. User rows take their family averages/cells; published rows take Table 1 verbatim."""
    by_id = {t.id: t for t in tables}
    table = Table("overview", "Overview — Table 1 shape", "overview", [(c.id, c.label) for c in OVERVIEW])
    table.note = "Published rows are Table 1 of the ModernBERT paper, verbatim; run rows come from the tables below."
    for key in user_rows:
        found = {c.id: by_id[c.table].cells.get(key.id, {}).get(c.column) for c in OVERVIEW if c.table in by_id}
        table.cells[key.id] = {c: cell for c, cell in found.items() if cell is not None}
    for key, cells in published.items():
        table.cells[key.id] = cells
    return table
