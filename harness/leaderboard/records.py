"""Result records -> leaderboard cells: load, group by (row, family, column), combine by the user's rule."""

from __future__ import annotations

import datetime as _dt
import json
import os
import statistics
import warnings
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness import specs
from harness.core.data_origin import MEANING, file_version, local_data
from harness.core.registry import Registry
from harness.core.results import STATUS_OK, STATUS_SKIPPED, ResultRecord, evaluated_subset
from harness.leaderboard.cells import LOCAL_MARK, SUBSET_MARK, Cell, RowKey, fmt
from harness.leaderboard.layout import SPLIT_PREFERENCE, column_of
from harness.selection.comparable import comparable_records, set_aside_lines
from harness.selection.rules import BestConfigPerDataset, configuration, group_by, rule_for

COMBINE_RULES: Registry[str] = Registry("combine rule", {
    "latest": "latest: the most recent record (created_at) of each cell, whatever run it came from",
    "best": "best: the task family's selection rule (as harness.select) applied to single runs: e.g. BEIR: the "
            "one run with the best mean nDCG@10 on the selection sets, on every dataset; GLUE: the best run per task",
    "mean": "mean: the task family's selection rule (as harness.select): mean ± std over the seeds of the selected "
            "configuration (runs that differ only in seed); e.g. BEIR: one configuration chosen on the selection "
            "sets, reported on every dataset; GLUE: the best configuration per task",
}, hint="Pass --combine latest, best or mean.")
#: Subdirectories of a results directory that hold derived files, not runs (GLUE selection summaries).
DERIVED_DIRS = ("selected",)
#: the rule of a cell whose family is not registered: the best configuration among the cell's records
_CELL_RULE = BestConfigPerDataset()


@dataclass(frozen=True)
class Loaded:
    """One record and where it came from."""

    path: Path
    record: ResultRecord


def load_records(dirs: Sequence[str | os.PathLike]) -> tuple[list[Loaded], list[str]]:
    """Every record under ``dirs`` (``selected/`` excluded), and the warnings for the page."""
    loaded: list[Loaded] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for root in dirs:
            root = Path(root)
            if not root.is_dir():
                warnings.warn(f"skipping {root}: not a directory", stacklevel=2)
                continue
            for path, record in comparable_records(root):
                if path.relative_to(root).parts[0] not in DERIVED_DIRS:
                    loaded.append(Loaded(path, record))
    for w in caught:   # re-raise to the caller's filters, category kept
        warnings.warn(w.message, stacklevel=2)
    skipped = [str(w.message) for w in caught if str(w.message).startswith("skipping ")]
    loaded = _dedupe(loaded)
    return loaded, skipped + [f"set aside: {line}" for line in set_aside_lines(i.record for i in loaded)]


def _dedupe(loaded: list[Loaded]) -> list[Loaded]:
    """The same record reached twice (two results dirs holding a copy) counts once."""
    seen: set[tuple] = set()
    out = []
    for item in loaded:
        r = item.record
        key = (r.task, r.dataset, r.split, r.model.get("name"), r.run_id, r.created_at, r.status, r.score)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def row_key(record: ResultRecord) -> RowKey:
    m = record.model or {}
    name = str(m.get("name") or m.get("path") or "unknown")
    return RowKey(name, str(m.get("family") or name), str(m.get("size") or ""))


def group(loaded: Iterable[Loaded]) -> dict[tuple[RowKey, str, str], list[Loaded]]:
    """Records by (row, table, column); composite members left out, ``extra_columns`` adding cells."""
    cells: dict[tuple[RowKey, str, str], list[Loaded]] = defaultdict(list)
    for item in loaded:
        r = item.record
        if (r.details or {}).get("member_of"):
            continue
        table, col = column_of(r)
        cells[(row_key(r), table, col)].append(item)
        spec = specs.for_record(r)
        for xtable, xcol, metric in spec.extra_cells(r) if spec else ():
            cells[(row_key(r), xtable, xcol)].append(Loaded(item.path, replace(r, main_score=metric)))
    return cells


@dataclass(frozen=True)
class Pick:
    """A selection rule's word on one cell: the records used (none: ``withheld`` says why) and a ``remark``."""

    used: list[Loaded]
    remark: str = ""
    withheld: str = ""


def selected(loaded: Sequence[Loaded], rule: str) -> dict[tuple[str, str, str], Pick]:
    """Each family's selection, (model, table, column) -> :class:`Pick`; ``best``: per run, ``mean``: seed-averaged."""
    out: dict[tuple[str, str, str], Pick] = {}
    for items in group_by(loaded, lambda i: i.record.task).values():
        spec = specs.for_record(items[0].record)
        if spec is None:
            continue
        by_id = {id(i.record): i for i in items}
        choices = rule_for(spec.selection).choose([i.record for i in items], key=spec.column_of, average_seeds=rule == "mean")
        for name, choice in choices.items():
            for (table, col), recs in choice.cells.items():
                out[(name, table, col)] = Pick([by_id[id(r)] for r in recs], choice.remarks.get((table, col), ""))
            for (table, col), why in choice.withheld.items():
                out[(name, table, col)] = Pick([], withheld=why)
    return out


def _when(record: ResultRecord) -> _dt.datetime:
    try:
        t = _dt.datetime.fromisoformat(record.created_at.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return _dt.datetime.min.replace(tzinfo=_dt.timezone.utc)
    return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)


class VersionTable:
    """Library-version dicts are shared by thousands of records: store each distinct one once."""

    def __init__(self) -> None:
        self._index: dict[str, int] = {}
        self.items: list[dict[str, str]] = []

    def ref(self, versions: dict[str, str]) -> int:
        key = json.dumps(versions, sort_keys=True)
        if key not in self._index:
            self._index[key] = len(self.items)
            self.items.append(versions)
        return self._index[key]


def provenance(item: Loaded, scale: float, link_root: Path | None, versions: VersionTable) -> dict[str, Any]:
    """What a cell's tooltip and detail panel show about one record (trimmed; the file has the rest)."""
    r = item.record
    path = item.path.resolve()
    rel = os.path.relpath(path, link_root) if link_root else str(path)
    score = r.score if r.status == STATUS_OK else None
    out: dict[str, Any] = {
        "path": Path(rel).as_posix(), "run_id": r.run_id, "created_at": r.created_at, "status": r.status,
        "score": None if score is None else round(score * scale, 4), "metric": r.main_score, "split": r.split,
        "dataset": r.dataset, "hp": r.hyperparameters, "ver": versions.ref(r.versions or {}),
    }
    for key, value in (("sweep", r.sweep), ("precision", r.precision), ("git", r.git_sha), ("error", r.error),
                       ("data", r.data_fingerprint), ("revision", (r.model or {}).get("revision")),
                       ("setting", (r.details or {}).get("setting"))):
        if value:
            out[key] = value
    return out


def _pick_split(ok: list[Loaded]) -> tuple[list[Loaded], str]:
    rank = {s: i for i, s in enumerate(SPLIT_PREFERENCE)}
    splits = sorted({i.record.split for i in ok}, key=lambda s: (rank.get(s, len(rank)), s))
    if len(splits) <= 1:
        return ok, ""
    return [i for i in ok if i.record.split == splits[0]], f"split {splits[0]} shown; also on: {', '.join(splits[1:])}"


def combine(items: list[Loaded], rule: str, scale: float, *, chosen: list[Loaded] | None = None,
            chosen_by: str = "", link_root: Path | None = None, versions: VersionTable | None = None,
            decimals: int = 1, remark: str = "", withheld: str = "") -> Cell:
    """One cell from its records: ``chosen`` (the selection's pick), else ``rule``; failures give no number."""
    COMBINE_RULES.lookup(rule)
    versions = versions or VersionTable()
    if withheld:
        return Cell(None, "incomplete", n=0, note=withheld,
                    sources=[provenance(i, scale, link_root, versions) for i in items])
    ok = [i for i in items if i.record.status == STATUS_OK and isinstance(i.record.score, int | float)]
    n_failed = len(items) - len(ok)
    if not ok:
        srcs = [provenance(i, scale, link_root, versions) for i in items]
        if all(i.record.status == STATUS_SKIPPED for i in items):   # does not apply to this model (e.g. too long)
            return Cell(None, "–", n=0, note=f"skipped: {items[0].record.error}", sources=srcs)
        why = next((i.record.error for i in items if i.record.error), "")
        return Cell(None, "failed", failed=True, n=0, sources=srcs,
                    note=f"{len(items)} failed record(s), no score" + (f": {why[:200]}" if why else ""))
    ok, split_note = _pick_split(ok)
    if rule == "latest":
        used, note = [max(ok, key=lambda i: (_when(i.record), str(i.path)))], f"latest of {len(ok)} record(s)"
    elif chosen:
        used, note = chosen, f"selected by the task family's rule: {chosen_by}"
    elif rule == "best":
        used, note = _best_configuration(ok, average_seeds=False), f"best of {len(ok)} record(s)"
    else:
        used = _best_configuration(ok, average_seeds=True)
        note = f"mean of {len(used)} seed(s)"
        n_configs = len({configuration(i.record, per_dataset=True) for i in ok})
        if n_configs > 1:
            note += f"; best of {n_configs} hyperparameter settings"
    scores = [i.record.score * scale for i in used]
    value = statistics.fmean(scores)
    std = statistics.stdev(scores) if rule == "mean" and len(scores) > 1 else None
    if std is not None:
        note += f"; {len(scores)} seeds, std {std:.2f}"
    notes = [note] + [x for x in (split_note, f"{n_failed} failed record(s) ignored" if n_failed else "", remark) if x]
    used_ids = {id(i) for i in used}
    ordered = sorted(items, key=lambda i: (id(i) not in used_ids, -_when(i.record).timestamp()))
    srcs = [{**provenance(i, scale, link_root, versions), "used": id(i) in used_ids} for i in ordered]
    text = fmt(value, decimals) + (f"±{std:.{decimals}f}" if std is not None else "")
    cut = sorted({c for i in used if (c := evaluated_subset(i.record))})
    if cut:
        text += SUBSET_MARK
        notes.insert(0, f"subset: evaluated on part of the dataset ({'; '.join(cut)}); not comparable with "
                        "full-set numbers, never marked best")
    local = sorted({why + file_version(i.record) for i in used if (why := local_data(i.record))})   # which files
    if local:
        text += LOCAL_MARK
        notes.insert(0, f"local data: {'; '.join(local)}; {MEANING}")
    return Cell(value, text, std=std, n=len(used), note="; ".join(notes), sources=srcs, subset=bool(cut),
                local=bool(local))


def _best_configuration(ok: list[Loaded], *, average_seeds: bool) -> list[Loaded]:
    """The cell's best configuration by the same rule GLUE selection uses (for cells no family selects)."""
    by_id = {id(i.record): i for i in ok}
    choice = _CELL_RULE.choose_model([i.record for i in ok], key=lambda r: 0, average_seeds=average_seeds)
    assert choice is not None
    return [by_id[id(r)] for r in choice.cells[0]]
