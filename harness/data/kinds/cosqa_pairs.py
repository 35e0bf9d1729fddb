"""Kind ``cosqa_pairs``: CoSQA's labelled pairs, the JSON file ``<data_dir>/<local>`` (CodeXGLUE's
``cosqa-dev.json``); local only."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.data.kinds import DataKind

if TYPE_CHECKING:
    from harness.data.entry import DatasetEntry
    from harness.data.retrieval import RetrievalDataset


class CosqaPairsKind(DataKind):
    name = "cosqa_pairs"

    def load_local(self, folder: Path, entry: DatasetEntry, split: str, strict_qrels: bool) -> RetrievalDataset:
        from harness.data import coir

        return coir.load_cosqa_pairs(folder, entry.name, split)
