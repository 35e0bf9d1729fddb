"""Kind ``mldr``: a folder in MLDR's layout under ``task.data_dir`` (``corpus.jsonl``, ``<split>.jsonl``, each
possibly gzipped), else mteb's pinned hub copy (``hub_config``: the language, default ``en``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from harness.data.kinds import DataKind

if TYPE_CHECKING:
    from harness.data.entry import DatasetEntry
    from harness.data.retrieval import RetrievalDataset


class MldrKind(DataKind):
    name = "mldr"
    has_hub = True
    hint: ClassVar[str] = ("{name}: task.data_dir=<dir containing {local}/> in MLDR's layout (corpus.jsonl, "
                           "test.jsonl; e.g. a copy of Shitao/MLDR's mldr-v1.0-en/).")

    def load_local(self, folder: Path, entry: DatasetEntry, split: str, strict_qrels: bool) -> RetrievalDataset:
        from harness.data import mldr

        return mldr.load_local(folder, entry.name, split, strict_qrels)

    def load_hub(self, entry: DatasetEntry, split: str, strict_qrels: bool) -> RetrievalDataset:
        from harness.data import mldr

        return mldr.load_hub(str(entry.hub), entry.revision, entry.hub_config or "en", entry.name, split,
                             strict_qrels)
