"""Dataset names -> loaders, driven by the task's ``catalog`` (data, not code branches)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.data.retrieval import RetrievalDataset
from harness.errors import unknown_name


@dataclass
class DatasetEntry:
    """One catalog row: where a dataset lives and the conventions that move its numbers."""

    name: str
    split: str = "test"
    hub: str | None = None
    revision: str | None = None
    ignore_identical_ids: bool = False
    kind: str = "beir"                    # beir (local folder or hub) | source_tree (mined code set)
    root: str | None = None               # source_tree: folder to mine (None = installed stdlib)
    max_queries: int | None = 500         # source_tree: queries sampled deterministically
    max_corpus: int | None = None         # source_tree: cap the corpus (the queries' documents are kept)
    local: str | None = None              # folder under data_dir (default: the name); members: parent/member
    members: dict[str, DatasetEntry] = field(default_factory=dict)   # composite (CQADupstack): mean over members

    @property
    def is_composite(self) -> bool:
        return bool(self.members)


def entry_from_config(name: str, raw: dict[str, Any]) -> DatasetEntry:
    members_raw = raw.get("members") or {}
    base = {k: v for k, v in raw.items() if k != "members"}
    members = {
        m: entry_from_config(
            f"{name}-{m}",
            {"local": f"{name}/{m}", **{k: v for k, v in base.items() if k in ("split", "ignore_identical_ids")}, **mraw},
        )
        for m, mraw in members_raw.items()
    }
    known = set(DatasetEntry.__dataclass_fields__) - {"name", "members"}
    return DatasetEntry(name=name, members=members, **{k: v for k, v in base.items() if k in known})


def resolve_entries(names: list[str], catalog: dict[str, Any]) -> list[DatasetEntry]:
    """Catalog entries for ``names``; an unknown name fails with the valid ones, closest first."""
    entries = []
    for name in names:
        if name not in catalog:
            raise unknown_name(
                "dataset", name, catalog,
                "Add it to task.catalog, e.g. +task.catalog.mydata={split:test} with task.data_dir=<dir with mydata/>.",
            )
        entries.append(entry_from_config(name, dict(catalog[name] or {})))
    return entries


def local_folder(data_dir: str, entry: DatasetEntry) -> Path:
    """``<data_dir>/<name>``; a composite member (cqadupstack-android) lives in ``cqadupstack/android``."""
    return Path(data_dir).expanduser() / (entry.local or entry.name)


def load_entry(
    entry: DatasetEntry, *, data_dir: str | None, split: str | None = None, strict_qrels: bool = True
) -> RetrievalDataset:
    """Load one (non-composite) dataset: a mined source tree, a local BEIR folder, or the pinned hub copy."""
    from harness.data import beir

    split = split or entry.split
    if entry.kind == "source_tree":
        from harness.data.code import build_code_retrieval_set

        root = Path(entry.root).expanduser() if entry.root else None
        return build_code_retrieval_set(
            root, name=entry.name, max_queries=entry.max_queries, max_corpus=entry.max_corpus
        )
    if data_dir:
        return beir.load_local(local_folder(data_dir, entry), entry.name, split, strict_qrels)
    if entry.hub is None:
        from harness.errors import DataError

        raise DataError(
            f"dataset {entry.name!r} has no hub copy in the catalog; pass task.data_dir=<dir containing {entry.name}/>."
        )
    return beir.load_hub(entry.hub, entry.revision, entry.name, split, strict_qrels)
