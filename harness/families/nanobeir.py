"""``task=nanobeir``: the 13 NanoBEIR sets (50 queries, up to ~10k documents each), a cheap BEIR signal and the
benchmark of the mmBERT pruned-model card. Data: the hub copies mteb 2.26 evaluates (``mteb/Nano*Retrieval`` at
its pinned revisions, split ``train``; sentence-transformers' ``NanoBEIREvaluator`` reads the same sets from
``sentence-transformers/NanoBEIR-en``); metrics and conventions as task=beir (title + " " + text, exact cosine
search, trec_eval nDCG@10), self-match removal as mteb's Nano tasks (none)."""

from __future__ import annotations

from harness.families.base import TableSpec
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
