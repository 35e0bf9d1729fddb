"""Kind ``coir_csn``: CoIR's CodeSearchNet for one language (``hub_config``), from the pinned hub copy, or a local
folder in CoIR's hub layout or CodeXGLUE's ``{train,valid,test}.jsonl``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from harness.data.kinds import DataKind
from harness.errors import DataError

if TYPE_CHECKING:
    from harness.data.entry import DatasetEntry
    from harness.data.retrieval import RetrievalDataset


def language(entry: DatasetEntry) -> str:
    """The entry's CodeSearchNet language: ``hub_config``, else its name's last part (``csn-ruby``)."""
    from harness.data.coir import CSN_LANGUAGES

    lang = entry.hub_config or entry.name.rsplit("-", 1)[-1]
    if lang not in CSN_LANGUAGES:
        raise DataError(f"catalog entry {entry.name!r}: hub_config={lang!r} is not a CodeSearchNet language; "
                        f"use one of {', '.join(CSN_LANGUAGES)}.")
    return lang


class CoirCsnKind(DataKind):
    name = "coir_csn"
    has_hub = True
    hint: ClassVar[str] = ("{name}: task.data_dir=<dir containing {local}/> (CodeXGLUE {{train,valid,test}}.jsonl "
                           "or CoIR's hub layout); the Ruby slice: task.datasets=[csn-ruby] task.data_dir=../shared/data.")

    def load(self, entry: DatasetEntry, data_dir: str | None, split: str,
             strict_qrels: bool = True) -> RetrievalDataset:
        language(entry)   # a wrong language fails first, local or hub
        return super().load(entry, data_dir, split, strict_qrels)

    def load_local(self, folder: Path, entry: DatasetEntry, split: str, strict_qrels: bool) -> RetrievalDataset:
        from harness.data import coir

        return coir.load_csn_local(folder, language(entry), entry.name, split, strict_qrels)

    def load_hub(self, entry: DatasetEntry, split: str, strict_qrels: bool) -> RetrievalDataset:
        from harness.data import coir

        return coir.load_csn(str(entry.hub), entry.revision, language(entry), entry.name, split, strict_qrels)
