"""Data kinds: how the data of one catalog entry is found, checked and read, one object per ``kind:``.

A kind is a :class:`DataKind` subclass in a module of its own, registered by one line in :data:`KINDS`; the
catalog (:mod:`harness.data.catalog`) and the retrieval families reach data only through it, so they name no kind.
A new kind (say a TSV corpus format) is a module like this, plus ``"tsv": "mypkg.tsv_kind:TsvKind"`` in
:data:`KINDS`; a catalog entry then says ``kind: tsv``::

    class TsvKind(DataKind):
        name = "tsv"
        hint = "{name}: task.data_dir=<dir containing {local}/> with corpus.tsv, queries.tsv, qrels.tsv."

        def load_local(self, folder, entry, split, strict_qrels):
            ...   # read the folder -> RetrievalDataset

The base class supplies the rest: the presence check (the folder under ``task.data_dir``), local-or-hub
dispatch (a kind with a hub copy sets ``has_hub`` and overrides :meth:`DataKind.load_hub`), the "no hub copy"
error and the offline hint.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from harness.errors import HarnessError, no_hub_copy
from harness.registry import Registry

if TYPE_CHECKING:
    from harness.data.entry import DatasetEntry
    from harness.data.retrieval import RetrievalDataset


#: kind name (a catalog entry's ``kind``) -> "module:Class"; the module is imported only when an entry of that
#: kind is checked or loaded. One line per kind.
KINDS: Registry[type[DataKind]] = Registry("data kind", {
    "beir": "harness.data.kinds.beir:BeirKind",                       # BEIR folder, or mteb's hub copy (datasets)
    "hub_layout": "harness.data.kinds.hub_layout:HubLayoutKind",      # a hub repository's files (NanoBEIR)
    "mldr": "harness.data.kinds.mldr:MldrKind",                       # MLDR's layout, or mteb's hub copy
    "coir_csn": "harness.data.kinds.coir_csn:CoirCsnKind",            # CoIR CodeSearchNet (hub, CoIR or CodeXGLUE)
    "cosqa_pairs": "harness.data.kinds.cosqa_pairs:CosqaPairsKind",   # CoSQA labelled pairs (CodeXGLUE JSON)
    "source_tree": "harness.data.kinds.source_tree:SourceTreeKind",   # functions mined from a source tree
    "source_files": "harness.data.kinds.source_files:SourceFilesKind",  # whole source files as long documents
}, lazy=True)


def get_kind(name: str, where: str = "the catalog entry") -> DataKind:
    """The kind registered as ``name``; an unknown name fails with the valid ones, closest first."""
    cls = KINDS.lookup(name, f"Set {where}'s kind to one of them, or register a new kind in harness.data.kinds.KINDS.")
    kind = cls()
    if not isinstance(kind, DataKind):
        raise HarnessError(f"data kind {name!r}: {KINDS.target(name)} is not a harness.data.kinds.DataKind")
    return kind


def local_folder(data_dir: str, entry: DatasetEntry) -> Path:
    """``<data_dir>/<name>``; a composite member (cqadupstack-android) lives in ``cqadupstack/android``."""
    return Path(data_dir).expanduser() / (entry.local or entry.name)


def shown_local(entry: DatasetEntry) -> str:
    """An entry's local folder as a message shows it (a composite: ``cqadupstack/<android|english|...>``)."""
    local = entry.local or entry.name
    return f"{local}/<{'|'.join(entry.members)}>" if entry.members else local


class DataKind:
    """One kind of retrieval data: its presence check, its loader (local folder or hub copy), its offline hint."""

    #: the registry key (a catalog entry's ``kind``)
    name: ClassVar[str] = ""
    #: True: the data is read from ``<task.data_dir>/<local>`` (or the hub); False: built from what the entry
    #: itself names (a mined source tree's ``root``), with neither ``task.data_dir`` nor the hub
    reads_data_dir: ClassVar[bool] = True
    #: the kind can read the entry's pinned hub copy (:meth:`load_hub`)
    has_hub: ClassVar[bool] = False
    #: the local alternative of the hub copy (``{name}``: the dataset, ``{local}``: its folder under data_dir)
    hint: ClassVar[str] = "{name}: task.data_dir=<dir containing {local}/>."

    # ------------------------------------------------------------------------------------------ checking
    def check(self, entry: DatasetEntry, data_dir: str | None, split: str) -> str | None:
        """The problem with the files ``entry`` reads (a one-line message with its fix), or None. Presence only,
        before any model is loaded: contents are validated when loaded."""
        if not data_dir:
            return f"dataset {entry.name!r} reads local files: pass task.data_dir=<dir containing {shown_local(entry)}/>."
        folder = local_folder(data_dir, entry)
        if not folder.exists():
            return (f"dataset folder not found: {folder}. Set task.data_dir to the directory that contains "
                    f"{entry.local or entry.name}/ (task.data_dir={data_dir}).")
        return None

    def hub_copy(self, entry: DatasetEntry) -> bool:
        """``entry`` can be read from the hub (the kind reads hub copies and the catalog pins one)."""
        return self.has_hub and entry.hub is not None

    def offline_hint(self, entry: DatasetEntry) -> str:
        """What to pass instead of the hub copy (``entry`` may be a composite: its members' folders are shown)."""
        return self.hint.format(name=entry.name, local=shown_local(entry))

    def fetch(self, entry: DatasetEntry) -> None:
        """Bring the hub copy local before any model is loaded (the hub is reachable). Default: read at load."""

    # ------------------------------------------------------------------------------------------ loading
    def load(self, entry: DatasetEntry, data_dir: str | None, split: str,
             strict_qrels: bool = True) -> RetrievalDataset:
        """One (non-composite) entry's data: ``<data_dir>/<local>`` when ``data_dir`` is set, else the pinned hub
        copy."""
        if data_dir:
            return self.load_local(local_folder(data_dir, entry), entry, split, strict_qrels)
        if not self.hub_copy(entry):
            raise no_hub_copy(entry.name, entry.local)
        return self.load_hub(entry, split, strict_qrels)

    def load_local(self, folder: Path, entry: DatasetEntry, split: str, strict_qrels: bool) -> RetrievalDataset:
        """The data from a local folder (or file) in this kind's layout, validated."""
        raise NotImplementedError(f"data kind {self.name!r} defines no load_local")

    def load_hub(self, entry: DatasetEntry, split: str, strict_qrels: bool) -> RetrievalDataset:
        """The data from the entry's pinned hub copy (fails fast, naming the local alternative, offline)."""
        raise no_hub_copy(entry.name, entry.local)
