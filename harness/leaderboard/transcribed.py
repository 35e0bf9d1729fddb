"""Published rows of later papers (Ettin, mmBERT), transcribed into CSV: :class:`PaperSource` and its reader;
:class:`PublishedRow`, what every published source becomes (registry: ``baselines.PAPER_SOURCES``)."""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from harness.leaderboard.cells import OTHER_PROTOCOL_MARK, PUBLISHED, Cell, RowKey


def baselines_dir() -> Path:
    """The packaged copies of the published CSVs (they ship with the package; no ../shared needed)."""
    return Path(str(resources.files("harness.leaderboard") / "baselines"))


@dataclass
class PublishedRow:
    key: RowKey
    printed_name: str
    cells: dict[tuple[str, str], Cell]     # (table, column) -> cell
    #: the source tables the row comes from, each {"badge": "Ettin Table 3", "note": what its protocol changed}
    badges: list[dict[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class PaperSource:
    """A table of a later paper, transcribed (docs/fidelity.md): one CSV row per printed row, citing ``cited_as``;
    ``cells``: header -> (table, column); ``other_protocol``/``family_protocol``: footnoted, never ranked; ``recipes``:
    header -> the DPR recipe its numbers were fine-tuned under."""

    id: str
    file: str
    citation: str
    where: str
    cited_as: str
    badge: str
    protocol: str
    cells: Mapping[str, tuple[str, str]]
    other_protocol: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    notes: Mapping[str, str] = field(default_factory=dict)   # header -> what else a reader of the cell must know
    family_protocol: Mapping[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    recipes: Mapping[str, str] = field(default_factory=dict)

    def protocol_of(self, family: str, header: str) -> tuple[str, str]:
        """(short name, why) where a row's cell was measured under another protocol than its column's, else empty."""
        return self.other_protocol.get(header) or self.family_protocol.get((family, header)) or ("", "")


_PAPER_COLUMNS = ("source", "printed", "row", "family", "size")


def read_paper_source(source: PaperSource) -> list[PublishedRow]:
    """Rows of one later paper's table; every row must cite ``source.cited_as``; empty cells stay absent."""
    path = baselines_dir() / source.file
    rows = []
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        absent = [h for h in [*_PAPER_COLUMNS, *source.cells] if h not in (reader.fieldnames or ())]
        if absent:
            raise ValueError(f"{path}: registry entry {source.id!r} names columns the file lacks: {absent}")
        for i, line in enumerate(reader):
            if line["source"] != source.cited_as:
                raise ValueError(f"{path} row {i + 1}: cites {line['source']!r}, the registry says {source.cited_as!r}")
            cells = {}
            for header, (table, column) in source.cells.items():
                raw = line[header].strip()
                if raw:
                    cells[(table, column)] = _paper_cell(source, i, line, header, raw)
            key = RowKey(line["row"], line["family"], line["size"], PUBLISHED)
            rows.append(PublishedRow(key, line["printed"], cells, [{"badge": source.badge, "note": source.protocol}]))
    return rows


def _paper_cell(source: PaperSource, i: int, line: Mapping[str, str], header: str, raw: str) -> Cell:
    src = {"source": source.id, "citation": source.citation, "where": source.where, "file": source.file,
           "row": i + 1, "model": line["printed"], "column": header, "printed": raw}
    note = "; ".join(n for n in (f"published, {source.cited_as}", source.notes.get(header, ""),
                                 (line.get("note") or "").strip()) if n)
    short, why = source.protocol_of(line["family"], header)
    if short:
        note += f"; {OTHER_PROTOCOL_MARK} {why}"
    return Cell(float(raw), raw + (OTHER_PROTOCOL_MARK if short else ""), note=note, sources=[src], other_protocol=short)
