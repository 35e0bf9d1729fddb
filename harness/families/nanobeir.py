"""``task=nanobeir``: the 13 NanoBEIR sets (50 queries, up to ~10k documents each), a cheap BEIR signal and the
benchmark of the mmBERT pruned-model card. Data: the hub copies mteb 2.26 evaluates (``mteb/Nano*Retrieval`` at
its pinned revisions, split ``train``; sentence-transformers' ``NanoBEIREvaluator`` reads the same sets from
``sentence-transformers/NanoBEIR-en``); metrics and conventions as task=beir (title + " " + text, exact cosine
search, trec_eval nDCG@10), self-match removal as mteb's Nano tasks (none)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.data.catalog import DatasetEntry, local_folder
from harness.data.retrieval import RetrievalDataset
from harness.families.base import Cell, TableSpec
from harness.families.beir import DenseFamily, DenseSettings
from harness.selection.rules import BestRunOnSelectionSets

#: dataset name (the leaderboard column) -> the set's own name (mteb task name minus "Retrieval"; the folder)
NANOBEIR_LABELS = {
    n.lower(): n for n in (
        "NanoArguAna", "NanoClimateFEVER", "NanoDBPedia", "NanoFEVER", "NanoFiQA2018", "NanoHotpotQA",
        "NanoMSMARCO", "NanoNFCorpus", "NanoNQ", "NanoQuoraRetrieval", "NanoSCIDOCS", "NanoSciFact",
        "NanoTouche2020",
    )
}


class NanoBeirFamily(DenseFamily):
    name = "nanobeir"
    settings_class = DenseSettings
    selection = BestRunOnSelectionSets(())   # no LR sweep: one run per model, chosen on the sets every run has
    tables = (TableSpec("nanobeir", "NanoBEIR", "NanoBEIR nDCG@10", tuple(NANOBEIR_LABELS), NANOBEIR_LABELS,
                        scale=100, note="The mmBERT card prints 0-1 values; they are shown x100 with the printed "
                                        "digits unchanged (0.5151 -> 51.51)."),)

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.snapshots: dict[str, Path] = {}

    def check(self, todo: Sequence[Cell]) -> None:
        """Find every set's data (local folder or hub snapshot) before loading a model: offline without a local
        copy fails at once, naming it."""
        self.snapshots = {} if self.settings.data_dir else {c.dataset: self.snapshot(c.payload) for c in todo}
        super().check(todo)

    def snapshot(self, entry: DatasetEntry) -> Path:
        from harness.data import hub_layout
        from harness.errors import no_hub_copy

        if entry.hub is None:
            raise no_hub_copy(entry.name, entry.local)
        return hub_layout.snapshot(entry.hub, entry.revision, entry.local or entry.name)

    def load_dataset(self, entry: DatasetEntry) -> RetrievalDataset:
        """A local folder (task.data_dir) in hub layout or BEIR layout, else the pinned hub copy."""
        from harness.data import beir, hub_layout

        s = self.settings
        split = s.split or entry.split
        if s.data_dir:
            folder = local_folder(s.data_dir, entry)
            if (folder / "corpus.jsonl").is_file():
                return beir.load_local(folder, entry.name, split, s.strict_qrels)
            return hub_layout.read_hub_layout(folder, entry.name, split, strict_qrels=s.strict_qrels)
        folder = self.snapshots.get(entry.name) or self.snapshot(entry)
        return hub_layout.read_hub_layout(folder, entry.name, split, strict_qrels=s.strict_qrels,
                                          source=f"{entry.hub}@{entry.revision}",
                                          fingerprint=f"hub:{entry.hub}@{entry.revision}")
