"""The shape of the leaderboard: the task specs' tables, plus the paper's Table-1 overview of their averages/cells."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness import specs
from harness.specs import TableSpec, column_of  # noqa: F401  (column_of: the leaderboard's name for it)

AVG = "avg"
#: Tables with published rows whose task has no spec yet (a spec's table of the same id replaces it); none now.
PENDING_TABLES: dict[str, TableSpec] = {}


@dataclass(frozen=True)
class OverviewColumn:
    id: str
    label: str
    table: str
    column: str   # a column of that table, or AVG


#: Table 1 of the ModernBERT paper: which table cell feeds each of its columns.
OVERVIEW: tuple[OverviewColumn, ...] = (
    OverviewColumn("beir_dpr", "BEIR (DPR)", "beir", AVG),
    OverviewColumn("mldr_ood_dpr", "MLDR OOD", "mldr", "mldr-en/ood"),
    OverviewColumn("mldr_id_dpr", "MLDR ID", "mldr", "mldr-en/id"),
    OverviewColumn("beir_colbert", "BEIR (ColBERT)", "colbert", AVG),
    OverviewColumn("mldr_ood_colbert", "MLDR OOD (ColBERT)", "mldr", "mldr-en/ood-colbert"),
    OverviewColumn("glue", "GLUE", "glue", AVG),
    OverviewColumn("csn", "CSN", "code", "codesearchnet"),
    OverviewColumn("sqa", "SQA", "code", "stackoverflow-qa"),
)

#: When one cell has records on several splits, the first split of this list wins (the others are noted).
SPLIT_PREFERENCE = ("test", "validation", "dev", "train")


def table_specs() -> dict[str, TableSpec]:
    """Every known table, in order: the task specs' tables, then the pending published-only ones."""
    out = {t.id: t for spec in specs.known().values() for t in spec.tables}
    return out | {k: v for k, v in PENDING_TABLES.items() if k not in out}


def table_spec(table_id: str) -> TableSpec:
    """A known table, or an open one (columns from the data, scale decided from the values)."""
    return table_specs().get(table_id) or TableSpec(id=table_id, label=table_id, title=table_id)


def higher_is_better(table_id: str) -> bool:
    """Direction of a table's numbers (its task's main metric); open tables: higher is better."""
    return next((spec.higher_is_better for spec in specs.known().values()
                 if any(t.id == table_id for t in spec.tables)), True)


def auto_scale(values: Sequence[float]) -> float:
    """Open families: 0-1 metrics are shown x100, anything else as is."""
    return 100.0 if values and all(0.0 <= v <= 1.0 for v in values) else 1.0
