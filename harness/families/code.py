"""``task=code``: single-vector code retrieval, evaluated as is by default: a set mined from a Python source tree
(the installed stdlib: the offline main job), or the paper's CoIR sets (CodeSearchNet: six languages, code ->
docstring, the CSN number being their mean; StackOverflow-QA) from the hub, and local stand-ins (the CodeXGLUE
Ruby slice, its BEIR view, CoSQA dev). As the paper, the model evaluated is by default the selected ``task=beir``
run's (``task.source``, see :mod:`harness.families.lineage`), or ``model.path`` as is when that model has none.

mteb prepends a document's title to its text, CoIR's own evaluator encodes the text alone (CoIR issue #17), which
moves CoIR numbers: ``task.title_convention`` names the one used (default CoIR's) and every record states it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from harness.families.beir import DenseFamily, DenseSettings
from harness.families.lineage import SOURCE_EXCLUDE, SourceSettings, TrainedSource
from harness.families.retrieval import RetrievalFamily
from harness.typed import choices

if TYPE_CHECKING:
    import numpy as np

    from harness.data.retrieval import RetrievalDataset
    from harness.evaluation.retriever import Retriever

#: convention -> how a document is written for the encoder
TITLE_CONVENTIONS = {"coir": "text", "mteb": "title + ' ' + text"}


@dataclass(kw_only=True)
class CodeSettings(DenseSettings):
    path: str | None             # datasets=[tree]: the source tree to mine
    title_convention: str = choices(*TITLE_CONVENTIONS)
    source: SourceSettings


class TitleConvention:
    """A retriever that writes documents by a named convention: ``coir`` encodes a document's text alone (CoIR's
    evaluator), ``mteb`` its title + " " + text (mteb's, and the inner retriever's own way)."""

    def __init__(self, inner: Retriever, convention: str):
        self.inner = inner
        self.kind = inner.kind
        self.convention = convention

    def index(self, ds: RetrievalDataset) -> tuple[dict[str, Any], dict[str, float]]:
        if self.convention == "coir" and any(ds.corpus_titles):
            # same content hash: the run identity (task.title_convention) keys the embedding cache apart
            ds = replace(ds, corpus_titles=[""] * len(ds))
        return self.inner.index(ds)

    def search(self, queries: list[str], top_k: int) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
        return self.inner.search(queries, top_k)

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "title_convention": self.convention,
                "document_text": TITLE_CONVENTIONS[self.convention]}


class CodeFamily(TrainedSource, DenseFamily):
    settings_class = CodeSettings
    identity_exclude: ClassVar[Mapping[str, str]] = {
        **RetrievalFamily.identity_exclude,
        "task.path": "the tree's root is part of the `tree` catalog entry (each cell's data spec)",
        **SOURCE_EXCLUDE,
    }

    def retriever(self, model: Any, cache_identity: Mapping[str, Any]) -> Retriever:
        return TitleConvention(super().retriever(model, cache_identity), self.settings.title_convention)

    def hyperparameters(self) -> dict[str, Any]:
        return super().hyperparameters() | {"title_convention": self.settings.title_convention}
