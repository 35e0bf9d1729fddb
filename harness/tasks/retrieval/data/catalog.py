"""The retrieval catalog: an entry (:class:`DatasetEntry`, built from config by :func:`resolve_entries`), the data
kinds (a :class:`DataKind` subclass registered in :data:`KINDS`: docs/layout.md, "Adding a task"), and the checks
and loading through the entry's kind (:func:`check_entries`, :func:`load_entry`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from harness.core.errors import DataError, HarnessError, HubUnavailableError, no_hub_copy, unknown_name
from harness.core.registry import Registry
from harness.core.typed import build
from harness.tasks.retrieval.data.reads import local_folder

if TYPE_CHECKING:
    from harness.tasks.retrieval.data.dataset import RetrievalDataset


#: the kind of a catalog entry that names none
DEFAULT_KIND = "beir"


@dataclass
class DatasetEntry:
    """One catalog row: where a dataset lives and the conventions that move its numbers."""

    name: str
    split: str = "test"
    hub: str | None = None
    revision: str | None = None
    ignore_identical_ids: bool = False
    kind: str = DEFAULT_KIND              # the data kind: a key of KINDS
    hub_config: str | None = None         # the hub subset: a CoIR language (ruby), an MLDR language (en)
    root: str | None = None               # mined kinds: folder to mine (None = installed stdlib)
    max_queries: int | None = 500         # mined kinds: queries sampled deterministically
    max_corpus: int | None = None         # mined kinds: cap the corpus (queries' documents kept)
    local: str | None = None              # folder under data_dir (default: the name); members: parent/member
    members: dict[str, DatasetEntry] = field(default_factory=dict)   # composite (CQADupstack): mean over members
    mteb_task: str | None = None          # the mteb task with the same data and protocol (export/import of results)
    mteb_subset: str | None = None        # its hf_subset when the mteb task has several (None: mteb's main score)
    #: content fingerprints of local copies verified to equal the pinned hub copy: a record on one of them is on
    #: the official data (harness.core.data_origin); any other local copy is marked as local data
    official_fingerprints: list[str] = field(default_factory=list)

    def definition(self) -> dict[str, Any]:
        """The fields a record's data spec hashes: all but :data:`LABEL_FIELDS` (mteb task names outdate no record)."""
        out = {k: v for k, v in asdict(self).items() if k not in LABEL_FIELDS}
        out["members"] = {name: m.definition() for name, m in self.members.items()}
        return out


#: catalog fields that label a dataset without changing its data
LABEL_FIELDS = ("mteb_task", "mteb_subset", "official_fingerprints")


def get_kind(name: str, where: str = "the catalog entry") -> DataKind:
    """The kind registered as ``name``; an unknown name fails with the valid ones, closest first."""
    cls = KINDS.lookup(name, f"Set {where}'s kind to one of them, or register a new kind in harness.tasks.retrieval.data.catalog.KINDS.")
    kind = cls()
    if not isinstance(kind, DataKind):
        raise HarnessError(f"data kind {name!r}: {KINDS.target(name)} is not a harness.tasks.retrieval.data.catalog.DataKind")
    return kind


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
    #: the files of a local copy that its loader reads, as globs under its folder (``{split}``: the split read);
    #: what a record's data spec fingerprints (:mod:`harness.tasks.retrieval.data.reads`). Default: every file
    reads: ClassVar[tuple[str, ...]] = ("**/*",)

    # ------------------------------------------------------------------------------------------ checking
    def check(self, entry: DatasetEntry, data_dir: str | None, split: str) -> str | None:
        """The problem with the files ``entry`` reads (a line with its fix), or None; presence only, before loading."""
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
        """One (non-composite) entry's data: ``<data_dir>/<local>`` when ``data_dir`` is set, else the hub copy."""
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


# ------------------------------------------------------------------------------------------ the shipped kinds
class BeirKind(DataKind):
    """A BEIR (or hub-layout) folder under ``task.data_dir``, else mteb's pinned hub copy through ``datasets``."""

    name = "beir"
    has_hub = True
    hint: ClassVar[str] = "{name}: task.data_dir=<dir containing {local}/> in BEIR layout."
    reads: ClassVar[tuple[str, ...]] = ("corpus.jsonl", "queries.jsonl", "qrels/{split}.tsv",   # or the hub layout's:
                                        "corpus/**/*", "queries/**/*", "qrels/**/*.parquet", "qrels/**/*.json*",
                                        "default/**/*")

    def check(self, entry: DatasetEntry, data_dir: str | None, split: str) -> str | None:
        """The folder is there, and (unless in the hub layout) its corpus, queries and ``split``'s qrels."""
        from harness.tasks.retrieval.data.hub_layout import is_hub_layout
        problem = DataKind.check(self, entry, data_dir, split)   # also serves HubLayoutKind (one level deep)
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

    def load_local(self, folder: Path, entry: DatasetEntry, split: str, strict_qrels: bool) -> RetrievalDataset:
        """A local folder in the hub layout (``corpus/``, ``queries/``; no ``corpus.jsonl``) or in BEIR layout."""
        from harness.tasks.retrieval.data import beir, hub_layout
        if hub_layout.is_hub_layout(folder) and not (folder / "corpus.jsonl").is_file():
            return hub_layout.read_hub_layout(folder, entry.name, split, strict_qrels=strict_qrels)
        return beir.load_local(folder, entry.name, split, strict_qrels)

    def load_hub(self, entry: DatasetEntry, split: str, strict_qrels: bool) -> RetrievalDataset:
        from harness.tasks.retrieval.data import beir
        return beir.load_hub(str(entry.hub), entry.revision, entry.name, split, strict_qrels)


class HubLayoutKind(DataKind):
    """A hub dataset repository read file by file (mteb's ``Nano*Retrieval``), fetched before any model loads."""

    name = "hub_layout"
    has_hub = True
    check = BeirKind.check
    load_local = BeirKind.load_local
    reads = BeirKind.reads
    hint: ClassVar[str] = ("{name}: task.data_dir=<dir> with a copy in <dir>/{local}/ (hub layout: corpus/, "
                           "queries/, qrels/ folders of <split>-*.parquet or .jsonl; or BEIR layout).")

    def fetch(self, entry: DatasetEntry) -> None:
        from harness.tasks.retrieval.data import hub_layout
        hub_layout.snapshot(str(entry.hub), entry.revision, entry.local or entry.name)

    def load_hub(self, entry: DatasetEntry, split: str, strict_qrels: bool) -> RetrievalDataset:
        from harness.tasks.retrieval.data import hub_layout
        folder = hub_layout.snapshot(str(entry.hub), entry.revision, entry.local or entry.name)
        return hub_layout.read_hub_layout(folder, entry.name, split, strict_qrels=strict_qrels,
                                          source=f"{entry.hub}@{entry.revision}",
                                          fingerprint=f"hub:{entry.hub}@{entry.revision}")


class MldrKind(DataKind):
    """An MLDR-layout folder under ``task.data_dir``, else mteb's pinned hub copy (``hub_config``: language, ``en``)."""

    name = "mldr"
    has_hub = True
    hint: ClassVar[str] = ("{name}: task.data_dir=<dir containing {local}/> in MLDR's layout (corpus.jsonl, "
                           "test.jsonl; e.g. a copy of Shitao/MLDR's mldr-v1.0-en/).")
    reads: ClassVar[tuple[str, ...]] = ("corpus.jsonl", "corpus.jsonl.gz", "{split}.jsonl", "{split}.jsonl.gz")

    def load_local(self, folder: Path, entry: DatasetEntry, split: str, strict_qrels: bool) -> RetrievalDataset:
        from harness.tasks.retrieval.data import mldr
        return mldr.load_local(folder, entry.name, split, strict_qrels)

    def load_hub(self, entry: DatasetEntry, split: str, strict_qrels: bool) -> RetrievalDataset:
        from harness.tasks.retrieval.data import mldr
        return mldr.load_hub(str(entry.hub), entry.revision, entry.hub_config or "en", entry.name, split, strict_qrels)


class CoirCsnKind(DataKind):
    """CoIR's CodeSearchNet for one language: the hub copy, or a folder in CoIR's or CodeXGLUE's layout."""

    name = "coir_csn"
    has_hub = True
    hint: ClassVar[str] = ("{name}: task.data_dir=<dir containing {local}/> (CodeXGLUE {{train,valid,test}}.jsonl "
                           "or CoIR's hub layout); the Ruby slice: task.datasets=[csn-ruby] task.data_dir=../shared/data.")

    @staticmethod
    def language(entry: DatasetEntry) -> str:
        """The entry's CodeSearchNet language: ``hub_config``, else its name's last part (``csn-ruby``)."""
        from harness.tasks.retrieval.data.coir import CSN_LANGUAGES
        lang = entry.hub_config or entry.name.rsplit("-", 1)[-1]
        if lang not in CSN_LANGUAGES:
            raise DataError(f"catalog entry {entry.name!r}: hub_config={lang!r} is not a CodeSearchNet language; "
                            f"use one of {', '.join(CSN_LANGUAGES)}.")
        return lang

    def load(self, entry: DatasetEntry, data_dir: str | None, split: str,
             strict_qrels: bool = True) -> RetrievalDataset:
        self.language(entry)   # a wrong language fails first, local or hub
        return super().load(entry, data_dir, split, strict_qrels)

    def load_local(self, folder: Path, entry: DatasetEntry, split: str, strict_qrels: bool) -> RetrievalDataset:
        from harness.tasks.retrieval.data import coir
        return coir.load_csn_local(folder, self.language(entry), entry.name, split, strict_qrels)

    def load_hub(self, entry: DatasetEntry, split: str, strict_qrels: bool) -> RetrievalDataset:
        from harness.tasks.retrieval.data import coir
        return coir.load_csn(str(entry.hub), entry.revision, self.language(entry), entry.name, split, strict_qrels)


class CosqaPairsKind(DataKind):
    """CoSQA's labelled pairs, the JSON file ``<data_dir>/<local>`` (CodeXGLUE's ``cosqa-dev.json``); local only."""

    name = "cosqa_pairs"

    def load_local(self, folder: Path, entry: DatasetEntry, split: str, strict_qrels: bool) -> RetrievalDataset:
        from harness.tasks.retrieval.data import coir
        return coir.load_cosqa_pairs(folder, entry.name, split)


class SourceTreeKind(DataKind):
    """A code-retrieval set mined from the source tree ``root`` (null: the stdlib), without data_dir or hub."""

    name = "source_tree"
    reads_data_dir = False
    reads: ClassVar[tuple[str, ...]] = ("**/*.py",)   # under ``root`` (the stdlib, root=null: not fingerprinted)

    def check(self, entry: DatasetEntry, data_dir: str | None, split: str) -> str | None:
        """The entry's ``root`` folder exists (null: the installed Python stdlib)."""
        if entry.root and not Path(entry.root).expanduser().is_dir():
            return (f"dataset {entry.name!r}: root folder not found: {entry.root}. Fix the catalog entry's root "
                    "(null mines the installed Python stdlib).")
        return None

    def load(self, entry: DatasetEntry, data_dir: str | None, split: str,
             strict_qrels: bool = True) -> RetrievalDataset:
        from harness.tasks.retrieval.data.code import build_code_retrieval_set
        root = Path(entry.root).expanduser() if entry.root else None
        return build_code_retrieval_set(root, name=entry.name, max_queries=entry.max_queries,
                                        max_corpus=entry.max_corpus)


class SourceFilesKind(DataKind):
    """Whole files of the Python source tree ``root`` (null: the stdlib) as long documents, split by a hash."""

    name = "source_files"
    reads_data_dir = False
    check = SourceTreeKind.check
    reads = SourceTreeKind.reads

    def load(self, entry: DatasetEntry, data_dir: str | None, split: str,
             strict_qrels: bool = True) -> RetrievalDataset:
        from harness.tasks.retrieval.data.longdocs import build_long_document_set
        return build_long_document_set(entry.root, name=entry.name, split=split, max_queries=entry.max_queries,
                                       max_corpus=entry.max_corpus)


#: kind name (a catalog entry's ``kind``) -> its class (a user's: "module:Class", imported when first used)
KINDS: Registry[type[DataKind]] = Registry("data kind", {
    "beir": BeirKind,                   # BEIR folder, or mteb's hub copy (datasets)
    "hub_layout": HubLayoutKind,        # a hub repository's files (NanoBEIR)
    "mldr": MldrKind,                   # MLDR's layout, or mteb's hub copy
    "coir_csn": CoirCsnKind,            # CoIR CodeSearchNet (hub, CoIR or CodeXGLUE)
    "cosqa_pairs": CosqaPairsKind,      # CoSQA labelled pairs (CodeXGLUE JSON)
    "source_tree": SourceTreeKind,      # functions mined from a source tree
    "source_files": SourceFilesKind,    # whole source files as long documents
}, lazy=True)


# ------------------------------------------------------------------------------------------ the catalog
def entry_from_config(name: str, raw: Mapping[str, Any] | None) -> DatasetEntry:
    """A typed catalog entry; a composite's members inherit ``split`` and ``ignore_identical_ids``."""
    raw = dict(raw or {})
    members_raw = raw.pop("members", None) or {}
    entry = build(DatasetEntry, {"name": name, **raw}, f"catalog entry {name!r}")
    if entry.kind not in KINDS:
        get_kind(entry.kind, f"catalog entry {name!r}")   # raises: the valid kinds, closest first
    inherited = {k: raw[k] for k in ("split", "ignore_identical_ids") if k in raw}
    members = {m: entry_from_config(f"{name}-{m}", {"local": f"{name}/{m}", **inherited, **dict(mraw or {})})
               for m, mraw in members_raw.items()}
    return replace(entry, members=members) if members else entry


def resolve_entries(names: list[str], catalog: Mapping[str, Any]) -> list[DatasetEntry]:
    """Catalog entries for ``names``, all validated; an unknown name fails with the valid ones, closest first."""
    entries = {name: entry_from_config(name, raw) for name, raw in catalog.items()}
    for name in names:
        if name not in entries:
            raise unknown_name(
                "dataset", name, entries,
                "Add it to task.catalog, e.g. +task.catalog.mydata={split:test} with task.data_dir=<dir with mydata/>.",
            )
    return [entries[name] for name in names]


def load_entry(
    entry: DatasetEntry, *, data_dir: str | None, split: str | None = None, strict_qrels: bool = True
) -> RetrievalDataset:
    """One (non-composite) dataset through its kind: ``<data_dir>/<local>``, what the entry names, or the hub copy."""
    return get_kind(entry.kind).load(entry, data_dir, split or entry.split, strict_qrels)


def check_local(entry: DatasetEntry, data_dir: str | None, split: str | None = None) -> None:
    """A (non-composite) entry's files are there (its kind's check), before any model loads; contents checked later."""
    problem = get_kind(entry.kind).check(entry, data_dir, split or entry.split)
    if problem:
        raise DataError(problem)


def hub_label(entry: DatasetEntry) -> str:
    """``hub@revision`` of an entry (of a composite's first member, with the number of members)."""
    members = list(entry.members.values())
    first = members[0] if members else entry
    return f"{first.hub}@{first.revision}" + (f", {len(members)} subsets" if members else "")


def check_entries(entries: Sequence[DatasetEntry], data_dir: str | None, split: str | None = None) -> None:
    """Before any model loads: every entry's local files are there, or its hub copy is reachable (and fetched)."""
    needs_hub: list[DatasetEntry] = []
    for entry in entries:
        parts = list(entry.members.values()) or [entry]
        if data_dir or not any(get_kind(p.kind).reads_data_dir for p in parts):
            for p in parts:
                check_local(p, data_dir, split or p.split)
        elif not all(get_kind(p.kind).hub_copy(p) for p in parts):
            raise no_hub_copy(entry.name, entry.local)
        else:
            needs_hub.append(entry)
    if not needs_hub:
        return
    from harness.models import hub_reachable
    if not hub_reachable():
        hints = (get_kind((list(e.members.values()) or [e])[0].kind).offline_hint(e) for e in needs_hub)
        raise HubUnavailableError(
            f"{', '.join(e.name for e in needs_hub)}: the pinned hub copies "
            f"({'; '.join(hub_label(e) for e in needs_hub)}) need the Hugging Face hub, which is not reachable "
            "from here. Offline: " + " ".join(hints)
        )
    for entry in needs_hub:
        for p in list(entry.members.values()) or [entry]:
            get_kind(p.kind).fetch(p)
