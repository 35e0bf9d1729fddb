"""Kind ``beir``: a BEIR folder under ``task.data_dir`` (``corpus.jsonl``, ``queries.jsonl``,
``qrels/<split>.tsv``; a folder in the hub layout reads too), else mteb's pinned hub copy through ``datasets``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from harness.data.kinds import DataKind, local_folder

if TYPE_CHECKING:
    from harness.data.entry import DatasetEntry
    from harness.data.retrieval import RetrievalDataset


def read_folder(folder: Path, name: str, split: str, strict_qrels: bool) -> RetrievalDataset:
    """A local folder in the hub layout (``corpus/``, ``queries/``; no ``corpus.jsonl``) or in BEIR layout."""
    from harness.data import beir, hub_layout

    if hub_layout.is_hub_layout(folder) and not (folder / "corpus.jsonl").is_file():
        return hub_layout.read_hub_layout(folder, name, split, strict_qrels=strict_qrels)
    return beir.load_local(folder, name, split, strict_qrels)


def check_folder(kind: DataKind, entry: DatasetEntry, data_dir: str | None, split: str) -> str | None:
    """The folder is there, and (unless in the hub layout) its corpus, queries and ``split``'s qrels."""
    from harness.data.hub_layout import is_hub_layout

    problem = DataKind.check(kind, entry, data_dir, split)
    if problem or data_dir is None:
        return problem
    folder = local_folder(data_dir, entry)
    if is_hub_layout(folder):
        return None
    for rel in ("corpus.jsonl", "queries.jsonl", f"qrels/{split}.tsv"):
        if not (folder / rel).is_file():
            qrels = sorted(p.stem for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
            hint = f" Splits here: {qrels or 'none'}; choose one with task.split=<split>." if rel.startswith("qrels") else ""
            return (f"{folder / rel} not found: a BEIR folder needs corpus.jsonl, queries.jsonl and "
                    f"qrels/<split>.tsv.{hint} Point task.data_dir at the folder that contains "
                    f"{entry.local or entry.name}/ in BEIR layout.")
    return None


class BeirKind(DataKind):
    name = "beir"
    has_hub = True
    hint: ClassVar[str] = "{name}: task.data_dir=<dir containing {local}/> in BEIR layout."

    def check(self, entry: DatasetEntry, data_dir: str | None, split: str) -> str | None:
        return check_folder(self, entry, data_dir, split)

    def load_local(self, folder: Path, entry: DatasetEntry, split: str, strict_qrels: bool) -> RetrievalDataset:
        return read_folder(folder, entry.name, split, strict_qrels)

    def load_hub(self, entry: DatasetEntry, split: str, strict_qrels: bool) -> RetrievalDataset:
        from harness.data import beir

        return beir.load_hub(str(entry.hub), entry.revision, entry.name, split, strict_qrels)
