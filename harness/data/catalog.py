"""Dataset names -> loaders, driven by the task's ``catalog`` (data, not code branches)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.data.retrieval import RetrievalDataset
from harness.errors import unknown_name
from harness.typed import build, choices

#: kind -> "module:function(entry, data_dir, split, strict_qrels) -> RetrievalDataset" for kinds beyond BEIR
#: folders and mined functions; the module is imported only when a dataset of that kind is loaded
LOADERS: dict[str, str] = {
    "coir_csn": "harness.data.coir:load_entry",          # CoIR CodeSearchNet (hub, its layout, CodeXGLUE JSONL)
    "cosqa_pairs": "harness.data.coir:load_cosqa_entry",  # CoSQA labelled pairs (CodeXGLUE JSON)
    "mldr": "harness.data.mldr:load_entry",              # MLDR (mteb's hub copy or a folder in MLDR's layout)
    "source_files": "harness.data.longdocs:load_entry",  # whole source files as long documents
}


@dataclass
class DatasetEntry:
    """One catalog row: where a dataset lives and the conventions that move its numbers."""

    name: str
    split: str = "test"
    hub: str | None = None
    revision: str | None = None
    ignore_identical_ids: bool = False
    kind: str = choices("beir", "source_tree", *LOADERS, default="beir")   # see LOADERS for the others
    hub_config: str | None = None         # the hub subset: a CoIR language (ruby), an MLDR language (en)
    root: str | None = None               # source_tree/source_files: folder to mine (None = installed stdlib)
    max_queries: int | None = 500         # source_tree/source_files: queries sampled deterministically
    max_corpus: int | None = None         # source_tree/source_files: cap the corpus (queries' documents kept)
    local: str | None = None              # folder under data_dir (default: the name); members: parent/member
    members: dict[str, DatasetEntry] = field(default_factory=dict)   # composite (CQADupstack): mean over members
    mteb_task: str | None = None          # the mteb task with the same data and protocol (export/import of results)
    mteb_subset: str | None = None        # its hf_subset when the mteb task has several (None: mteb's main score)

    @property
    def is_composite(self) -> bool:
        return bool(self.members)

    def definition(self) -> dict[str, Any]:
        """The fields that define the data (what a record's data spec hashes): everything but the labels
        (:data:`LABEL_FIELDS`), so naming a dataset's mteb task never makes finished records out of date."""
        out = {k: v for k, v in asdict(self).items() if k not in LABEL_FIELDS}
        out["members"] = {name: m.definition() for name, m in self.members.items()}
        return out


#: catalog fields that label a dataset without changing its data
LABEL_FIELDS = ("mteb_task", "mteb_subset")


def entry_from_config(name: str, raw: Mapping[str, Any] | None) -> DatasetEntry:
    """A typed catalog entry: an unknown key (``ignore_identical_id``) is an error naming the closest valid one.
    Members of a composite inherit ``split`` and ``ignore_identical_ids`` and live in ``<name>/<member>``."""
    raw = dict(raw or {})
    members_raw = raw.pop("members", None) or {}
    entry = build(DatasetEntry, {"name": name, **raw}, f"catalog entry {name!r}")
    inherited = {k: raw[k] for k in ("split", "ignore_identical_ids") if k in raw}
    members = {
        m: entry_from_config(f"{name}-{m}", {"local": f"{name}/{m}", **inherited, **dict(mraw or {})})
        for m, mraw in members_raw.items()
    }
    return replace(entry, members=members) if members else entry


def resolve_entries(names: list[str], catalog: Mapping[str, Any]) -> list[DatasetEntry]:
    """Catalog entries for ``names``. Every entry is validated (a typo anywhere in the catalog is an error); an
    unknown name fails with the valid ones, closest first."""
    entries = {name: entry_from_config(name, raw) for name, raw in catalog.items()}
    for name in names:
        if name not in entries:
            raise unknown_name(
                "dataset", name, entries,
                "Add it to task.catalog, e.g. +task.catalog.mydata={split:test} with task.data_dir=<dir with mydata/>.",
            )
    return [entries[name] for name in names]


def local_folder(data_dir: str, entry: DatasetEntry) -> Path:
    """``<data_dir>/<name>``; a composite member (cqadupstack-android) lives in ``cqadupstack/android``."""
    return Path(data_dir).expanduser() / (entry.local or entry.name)


def load_entry(
    entry: DatasetEntry, *, data_dir: str | None, split: str | None = None, strict_qrels: bool = True
) -> RetrievalDataset:
    """Load one (non-composite) dataset: a kind of :data:`LOADERS`, a mined source tree, a local BEIR folder,
    or the pinned hub copy."""
    from harness.data import beir

    split = split or entry.split
    if entry.kind in LOADERS:
        import importlib

        module, _, func = LOADERS[entry.kind].partition(":")
        return getattr(importlib.import_module(module), func)(entry, data_dir, split, strict_qrels)
    if entry.kind == "source_tree":
        from harness.data.code import build_code_retrieval_set

        root = Path(entry.root).expanduser() if entry.root else None
        return build_code_retrieval_set(
            root, name=entry.name, max_queries=entry.max_queries, max_corpus=entry.max_corpus
        )
    if data_dir:
        return beir.load_local(local_folder(data_dir, entry), entry.name, split, strict_qrels)
    if entry.hub is None:
        from harness.errors import no_hub_copy

        raise no_hub_copy(entry.name, entry.local)
    return beir.load_hub(entry.hub, entry.revision, entry.name, split, strict_qrels)


def check_local(entry: DatasetEntry, data_dir: str | None, split: str | None = None) -> None:
    """The files a (non-composite) entry reads are there, before any model is loaded: a mined source tree's root,
    or the dataset's folder (file) under ``data_dir``, and for a BEIR folder its corpus, queries and qrels. Presence
    only: contents are validated when loaded."""
    from harness.errors import DataError

    if entry.kind in ("source_tree", "source_files"):
        if entry.root and not Path(entry.root).expanduser().is_dir():
            raise DataError(f"dataset {entry.name!r}: root folder not found: {entry.root}. Fix the catalog entry's "
                            "root (null mines the installed Python stdlib).")
        return
    if not data_dir:
        raise DataError(f"dataset {entry.name!r} reads local files: pass task.data_dir=<dir containing "
                        f"{entry.local or entry.name}/>.")
    folder = local_folder(data_dir, entry)
    if not folder.exists():
        raise DataError(f"dataset folder not found: {folder}. Set task.data_dir to the directory that contains "
                        f"{entry.local or entry.name}/ (task.data_dir={data_dir}).")
    if entry.kind != "beir" or (folder / "corpus").is_dir():   # other layouts, and the hub layout's folders
        return
    split = split or entry.split
    for rel in ("corpus.jsonl", "queries.jsonl", f"qrels/{split}.tsv"):
        if not (folder / rel).is_file():
            qrels = sorted(p.stem for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
            hint = f" Splits here: {qrels or 'none'}; choose one with task.split=<split>." if rel.startswith("qrels") else ""
            raise DataError(f"{folder / rel} not found: a BEIR folder needs corpus.jsonl, queries.jsonl and "
                            f"qrels/<split>.tsv.{hint} Point task.data_dir at the folder that contains "
                            f"{entry.local or entry.name}/ in BEIR layout.")
