"""Published baselines as data: a registry of the source tables (file, citation, column mapping, scale)
and a loader that turns them into published rows whose cells keep the printed text exactly."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from importlib import resources
from pathlib import Path

from harness.families.beir import BEIR_DATASETS
from harness.families.efficiency import TABLE2_COLUMNS
from harness.families.glue import GLUE_PAPER_TASKS as GLUE_TASKS
from harness.families.nanobeir import NANOBEIR_LABELS
from harness.leaderboard.cells import PUBLISHED, Cell, RowKey
from harness.leaderboard.layout import AVG, OVERVIEW

MODERNBERT_PAPER = (
    "Warner et al., \"Smarter, Better, Faster, Longer: A Modern Bidirectional Encoder for Fast, Memory "
    "Efficient, and Long Context Finetuning and Inference\", arXiv 2412.13663v2"
)
MMBERT_CARD = "mmBERT-L4H384/L7H384/L13H384 layer-pruned model card (NanoBEIR NDCG@10, unpruned mmBERT-small and pruned variants)"

OVERVIEW_TABLE = "overview"
_BEIR_RENAMED = {"trec-covid": "trec_covid", "climate-fever": "climate_fever", "dbpedia-entity": "dbpedia",
                 "webis-touche2020": "touche2020"}
_BEIR_CSV = {_BEIR_RENAMED.get(d, d): d for d in BEIR_DATASETS} | {"avg": AVG}   # Tables 7/8 header -> dataset


@dataclass(frozen=True)
class PublishedSource:
    """One published table. ``columns`` maps CSV header -> leaderboard column of ``table`` (a family id,
    or ``overview``); ``scale`` multiplies the printed values onto the leaderboard's 0-100 scale
    (done in decimal, so the digits stay those printed)."""

    id: str
    file: str
    citation: str
    table: str
    where: str                               # e.g. "Table 7"
    columns: Mapping[str, str]
    scale: int = 1
    model_column: str = "model"
    size_column: str | None = "size"
    family_aliases: Mapping[str, str] = field(default_factory=dict)   # printed name -> Table 1 family

    def row_key(self, printed: str, size: str) -> RowKey:
        if self.size_column is None:   # mmBERT card: "mmBERT-small (22 layers)" or "L13H384-<kept layers>"
            fam, size = ("mmBERT", "small") if printed.startswith("mmBERT") else ("mmBERT-small pruned", printed.split("-")[0])
            return RowKey(printed, fam, size, PUBLISHED)
        fam = self.family_aliases.get(printed, printed)
        return RowKey(f"{fam}-{size}", fam, size, PUBLISHED)


SOURCES: tuple[PublishedSource, ...] = (
    PublishedSource("modernbert-table1", "modernbert_table1_overview.csv", MODERNBERT_PAPER, OVERVIEW_TABLE,
                    "Table 1", {c.id: c.id for c in OVERVIEW}),
    PublishedSource("modernbert-table2", "modernbert_table2_efficiency.csv", MODERNBERT_PAPER, "efficiency", "Table 2",
                    {c: c for c in TABLE2_COLUMNS}),
    PublishedSource("modernbert-table5", "modernbert_table5_glue.csv", MODERNBERT_PAPER, "glue", "Table 5",
                    {t: t for t in GLUE_TASKS}, family_aliases={"DeBERTav3": "DeBERTaV3", "NomicBERT-2048": "NomicBERT"}),
    PublishedSource("modernbert-table7", "modernbert_table7_beir_dpr.csv", MODERNBERT_PAPER, "beir", "Table 7", _BEIR_CSV),
    PublishedSource("modernbert-table8", "modernbert_table8_beir_colbert.csv", MODERNBERT_PAPER, "colbert", "Table 8", _BEIR_CSV),
    PublishedSource("mmbert-pruned-nanobeir", "mmbert_pruned_nanobeir.csv", MMBERT_CARD, "nanobeir", "model card table",
                    {"mean": AVG} | {v: k for k, v in NANOBEIR_LABELS.items()}, scale=100, size_column=None),
)


def baselines_dir() -> Path:
    """The packaged copies of the published CSVs (they ship with the package; no ../shared needed)."""
    return Path(str(resources.files("harness.leaderboard") / "baselines"))


def scaled_text(printed: str, scale: int) -> str:
    """``printed`` times ``scale`` without float rounding: "0.5151" x 100 -> "51.51"."""
    exponent = len(str(scale)) - 1
    if scale != 10**exponent:
        raise ValueError(f"published scale must be a power of ten, got {scale}")
    return printed if exponent == 0 else format(Decimal(printed).scaleb(exponent), "f")


@dataclass
class PublishedRow:
    key: RowKey
    printed_name: str
    cells: dict[tuple[str, str], Cell]     # (table, column) -> cell


def read_source(source: PublishedSource, directory: Path | None = None) -> list[PublishedRow]:
    """Rows of one published table; empty CSV cells (no value in the source) stay absent."""
    path = (directory or baselines_dir()) / source.file
    rows = []
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        absent = [h for h in [*source.columns, source.model_column, source.size_column] if h and h not in reader.fieldnames]
        if absent:
            raise ValueError(f"{path}: registry entry {source.id!r} names columns the file lacks: {absent}")
        for i, line in enumerate(reader):
            printed = line[source.model_column]
            key = source.row_key(printed, line[source.size_column] if source.size_column else "")
            cells = {}
            for header, column in source.columns.items():
                raw = line[header].strip()
                if not raw:
                    continue
                text = scaled_text(raw, source.scale)
                src = {"source": source.id, "citation": source.citation, "where": source.where, "file": source.file,
                       "row": i + 1, "model": printed, "column": header, "printed": raw}
                cells[(source.table, column)] = Cell(float(text), text, note=f"published, {source.where}", sources=[src])
            rows.append(PublishedRow(key, printed, cells))
    return rows


def load_published(sources: Iterable[PublishedSource] = SOURCES, directory: Path | None = None) -> list[PublishedRow]:
    """All published rows, merged by row key across sources (Tables 1, 5, 7, 8 share the paper's rows),
    in the order they first appear."""
    merged: dict[RowKey, PublishedRow] = {}
    for source in sources:
        for row in read_source(source, directory):
            if row.key in merged:
                merged[row.key].cells.update(row.cells)
            else:
                merged[row.key] = row
    return list(merged.values())
