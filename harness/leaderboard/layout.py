"""The shape of the leaderboard: task families, their columns, and the Table-1 overview.

A record lands in one cell: row = (model name, family, size), table = task family, column = dataset
(see :func:`column_of`). The overview's columns are averages or single cells of the family tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

BEIR_DATASETS = (
    "nfcorpus", "scifact", "trec-covid", "fiqa", "arguana", "climate-fever", "dbpedia-entity", "fever",
    "hotpotqa", "msmarco", "nq", "quora", "scidocs", "webis-touche2020", "cqadupstack",
)
BEIR_LABELS = {
    "nfcorpus": "NFCorpus", "scifact": "SciFact", "trec-covid": "TREC-Covid", "fiqa": "FiQA", "arguana": "ArguAna",
    "climate-fever": "Climate-FEVER", "dbpedia-entity": "DBPedia", "fever": "FEVER", "hotpotqa": "HotpotQA",
    "msmarco": "MSMARCO", "nq": "NQ", "quora": "Quora", "scidocs": "SciDocs", "webis-touche2020": "Touche2020",
    "cqadupstack": "CQADupstack",
}
GLUE_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte")
GLUE_LABELS = {
    "cola": "CoLA", "sst2": "SST-2", "mrpc": "MRPC", "stsb": "STS-B", "qqp": "QQP", "mnli": "MNLI", "qnli": "QNLI",
    "rte": "RTE",
}
NANOBEIR_LABELS = {
    n.lower(): n for n in (
        "NanoArguAna", "NanoClimateFEVER", "NanoDBPedia", "NanoFEVER", "NanoFiQA2018", "NanoHotpotQA",
        "NanoMSMARCO", "NanoNFCorpus", "NanoNQ", "NanoQuoraRetrieval", "NanoSCIDOCS", "NanoSciFact",
        "NanoTouche2020",
    )
}
MLDR_LABELS = {"mldr-en/ood": "MLDR-en OOD", "mldr-en/id": "MLDR-en ID", "mldr-en/ood-colbert": "MLDR-en OOD (ColBERT)"}
CODE_LABELS = {"codesearchnet": "CodeSearchNet", "stackoverflow-qa": "StackOverflow-QA"}

AVG = "avg"


@dataclass(frozen=True)
class Family:
    """One task family = one detail table. ``datasets`` fixes the columns and what a complete row is
    (None: the columns are whatever datasets the records have, and there is no average)."""

    id: str
    title: str
    datasets: tuple[str, ...] | None
    labels: Mapping[str, str]
    scale: float | None      # record metric -> displayed number (100 for 0-1 IR metrics); None: decide from data
    note: str = ""

    @property
    def has_average(self) -> bool:
        return self.datasets is not None

    def label(self, column: str) -> str:
        return "Avg" if column == AVG else self.labels.get(column, column)


FAMILIES: dict[str, Family] = {
    f.id: f for f in (
        Family("beir", "BEIR nDCG@10, single-vector (DPR) — Table 7 shape", BEIR_DATASETS, BEIR_LABELS, 100),
        Family("colbert", "BEIR nDCG@10, multi-vector (ColBERT) — Table 8 shape", BEIR_DATASETS, BEIR_LABELS, 100),
        Family("glue", "GLUE dev scores — Table 5 shape", GLUE_TASKS, GLUE_LABELS, 1),
        Family("mldr", "MLDR English nDCG@10", None, MLDR_LABELS, 100),
        Family("code", "Code retrieval nDCG@10", None, CODE_LABELS, 100),
        Family("nanobeir", "NanoBEIR nDCG@10", tuple(NANOBEIR_LABELS), NANOBEIR_LABELS, 100,
               "The mmBERT card prints 0-1 values; they are shown x100 with the printed digits unchanged (0.5151 -> 51.51)."),
    )
}


def family(family_id: str) -> Family:
    """The known family, or an open one (columns from the data, scale decided from the values)."""
    return FAMILIES.get(family_id) or Family(family_id, family_id, None, {}, None)


@dataclass(frozen=True)
class OverviewColumn:
    id: str
    label: str
    family: str
    column: str   # a dataset column of that family, or AVG


OVERVIEW: tuple[OverviewColumn, ...] = (
    OverviewColumn("beir_dpr", "BEIR (DPR)", "beir", AVG),
    OverviewColumn("mldr_ood_dpr", "MLDR OOD", "mldr", "mldr-en/ood"),
    OverviewColumn("mldr_id_dpr", "MLDR ID", "mldr", "mldr-en/id"),
    OverviewColumn("beir_colbert", "BEIR (ColBERT)", "colbert", AVG),
    OverviewColumn("mldr_ood_colbert", "MLDR OOD (ColBERT)", "mldr", "mldr-en/ood-colbert"),
    OverviewColumn("glue", "GLUE", "glue", AVG),
    OverviewColumn("csn", "CSN", "code", "codesearchnet"),
    OverviewColumn("sqa", "SQA", "code", "stackoverflow-qa"),
)

#: When one cell has records on several splits, the first split of this list wins (the others are noted).
SPLIT_PREFERENCE = ("test", "validation", "dev", "train")


def _is_colbert(details: Mapping[str, Any]) -> bool:
    kind = str(details.get("retriever") or details.get("model_type") or "").lower()
    return "colbert" in kind or "multi" in kind


def column_of(task: str, dataset: str, details: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """(family, column) of a record. MLDR cells carry their setting (``details.setting`` ood|id) and
    retriever; ColBERT records on MLDR go to the MLDR table; NanoBEIR names are case-folded."""
    details = details or {}
    ds = dataset.lower()
    if task == "mldr" or (task == "colbert" and ds.startswith("mldr")):
        setting = str(details.get("setting") or "ood").lower()
        colbert = task == "colbert" or _is_colbert(details)
        return "mldr", f"{ds}/{setting}" + ("-colbert" if colbert else "")
    if task == "nanobeir":
        return "nanobeir", ds
    return task, dataset
