"""Kind ``source_files``: whole files of the Python source tree ``root`` (null: the installed standard library) as
long documents, split into train and test by a hash of their path. Needs neither ``task.data_dir`` nor the hub."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.data.kinds import DataKind
from harness.data.kinds.source_tree import check_root

if TYPE_CHECKING:
    from harness.data.entry import DatasetEntry
    from harness.data.retrieval import RetrievalDataset


class SourceFilesKind(DataKind):
    name = "source_files"
    reads_data_dir = False

    def check(self, entry: DatasetEntry, data_dir: str | None, split: str) -> str | None:
        return check_root(entry)

    def load(self, entry: DatasetEntry, data_dir: str | None, split: str,
             strict_qrels: bool = True) -> RetrievalDataset:
        from harness.data.longdocs import build_long_document_set

        return build_long_document_set(entry.root, name=entry.name, split=split, max_queries=entry.max_queries,
                                       max_corpus=entry.max_corpus)
