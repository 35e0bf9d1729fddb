"""Kind ``hub_layout``: a hub dataset repository read file by file (mteb's ``Nano*Retrieval`` copies: configs
``corpus``, ``queries``, ``qrels`` of ``<split>-*.parquet``), as a snapshot fetched before any model loads, or a
local folder in that layout or in BEIR layout."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from harness.data.kinds import DataKind
from harness.data.kinds.beir import check_folder, read_folder

if TYPE_CHECKING:
    from harness.data.entry import DatasetEntry
    from harness.data.retrieval import RetrievalDataset


class HubLayoutKind(DataKind):
    """Local folders as kind ``beir`` reads them (hub or BEIR layout); the hub copy as a repository snapshot."""

    name = "hub_layout"
    has_hub = True
    hint: ClassVar[str] = ("{name}: task.data_dir=<dir> with a copy in <dir>/{local}/ (hub layout: corpus/, "
                           "queries/, qrels/ folders of <split>-*.parquet or .jsonl; or BEIR layout).")

    def check(self, entry: DatasetEntry, data_dir: str | None, split: str) -> str | None:
        return check_folder(self, entry, data_dir, split)

    def load_local(self, folder: Path, entry: DatasetEntry, split: str, strict_qrels: bool) -> RetrievalDataset:
        return read_folder(folder, entry.name, split, strict_qrels)

    def fetch(self, entry: DatasetEntry) -> None:
        from harness.data import hub_layout

        hub_layout.snapshot(str(entry.hub), entry.revision, entry.local or entry.name)

    def load_hub(self, entry: DatasetEntry, split: str, strict_qrels: bool) -> RetrievalDataset:
        from harness.data import hub_layout

        folder = hub_layout.snapshot(str(entry.hub), entry.revision, entry.local or entry.name)
        return hub_layout.read_hub_layout(folder, entry.name, split, strict_qrels=strict_qrels,
                                          source=f"{entry.hub}@{entry.revision}",
                                          fingerprint=f"hub:{entry.hub}@{entry.revision}")
