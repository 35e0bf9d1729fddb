"""``task=code``: single-vector code retrieval, evaluated as is (a mined source tree, CoIR's sets, local stand-ins)
with the selected ``task=beir`` run's model (``task.source``) or ``model.path`` as is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.typed import choices, excluded, flat
from harness.tasks.retrieval import beir
from harness.tasks.retrieval.beir import TrainData
from harness.tasks.retrieval.planner import Resolved, RetrievalKind, RetrievalSettings
from harness.tasks.retrieval.retrievers.retriever import TITLE_CONVENTIONS
from harness.tasks.retrieval.settings import SingleVectorEval
from harness.tasks.runplan import SOURCE, SourceSettings
from harness.training.settings import DenseTraining


@dataclass(kw_only=True)
class CodeSettings(RetrievalSettings):
    """task=beir's stages (conf/task/code.yaml extends beir.yaml), and how documents are written."""

    retriever: str
    evaluation: SingleVectorEval = flat()
    training: DenseTraining = flat()
    train_data: TrainData
    #: datasets=[tree]: the source tree to mine
    path: str | None = excluded("the tree's root is part of the `tree` catalog entry (each cell's data spec)")
    title_convention: str = choices(*TITLE_CONVENTIONS)
    source: SourceSettings = excluded(SOURCE)
    recipes: dict[str, dict[str, Any]] = excluded(beir.RECIPES)

    def __post_init__(self) -> None:
        beir.check_recipes(self.recipes)


def hyperparameters(r: Resolved) -> dict[str, Any]:
    return beir.hyperparameters(r) | {"title_convention": r.settings.title_convention}


CODE = RetrievalKind(CodeSettings, hyperparameters, details=beir.details)
