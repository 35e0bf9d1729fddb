"""Kind ``source_tree``: a code-retrieval set mined from the Python source tree ``root`` (null: the installed
standard library): a function's docstring summary finds its code. Needs neither ``task.data_dir`` nor the hub."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.data.kinds import DataKind

if TYPE_CHECKING:
    from harness.data.entry import DatasetEntry
    from harness.data.retrieval import RetrievalDataset


def check_root(entry: DatasetEntry) -> str | None:
    """The entry's ``root`` folder exists (null: the installed Python stdlib)."""
    if entry.root and not Path(entry.root).expanduser().is_dir():
        return (f"dataset {entry.name!r}: root folder not found: {entry.root}. Fix the catalog entry's root "
                "(null mines the installed Python stdlib).")
    return None


class SourceTreeKind(DataKind):
    name = "source_tree"
    reads_data_dir = False

    def check(self, entry: DatasetEntry, data_dir: str | None, split: str) -> str | None:
        return check_root(entry)

    def load(self, entry: DatasetEntry, data_dir: str | None, split: str,
             strict_qrels: bool = True) -> RetrievalDataset:
        from harness.data.code import build_code_retrieval_set

        root = Path(entry.root).expanduser() if entry.root else None
        return build_code_retrieval_set(root, name=entry.name, max_queries=entry.max_queries,
                                        max_corpus=entry.max_corpus)
