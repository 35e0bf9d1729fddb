"""A catalog entry: where one dataset lives and the conventions that move its numbers (pure data; the catalog
builds entries from config, the data kinds read them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

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
    kind: str = DEFAULT_KIND              # the data kind: a key of harness.data.kinds.KINDS
    hub_config: str | None = None         # the hub subset: a CoIR language (ruby), an MLDR language (en)
    root: str | None = None               # mined kinds: folder to mine (None = installed stdlib)
    max_queries: int | None = 500         # mined kinds: queries sampled deterministically
    max_corpus: int | None = None         # mined kinds: cap the corpus (queries' documents kept)
    local: str | None = None              # folder under data_dir (default: the name); members: parent/member
    members: dict[str, DatasetEntry] = field(default_factory=dict)   # composite (CQADupstack): mean over members
    mteb_task: str | None = None          # the mteb task with the same data and protocol (export/import of results)
    mteb_subset: str | None = None        # its hf_subset when the mteb task has several (None: mteb's main score)
    #: content fingerprints of local copies verified to equal the pinned hub copy: a record on one of them is on
    #: the official data (harness.data_origin); any other local copy is marked as local data
    official_fingerprints: list[str] = field(default_factory=list)

    def definition(self) -> dict[str, Any]:
        """The fields that define the data (what a record's data spec hashes): everything but the labels
        (:data:`LABEL_FIELDS`), so naming a dataset's mteb task never makes finished records out of date."""
        out = {k: v for k, v in asdict(self).items() if k not in LABEL_FIELDS}
        out["members"] = {name: m.definition() for name, m in self.members.items()}
        return out


#: catalog fields that label a dataset without changing its data
LABEL_FIELDS = ("mteb_task", "mteb_subset", "official_fingerprints")
