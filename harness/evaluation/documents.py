"""How a document is written for the encoder. mteb prepends a document's title to its text, CoIR's own evaluator
encodes the text alone (CoIR issue #17), which moves CoIR numbers: ``task.title_convention`` names the one used
and every record states it."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from harness.data.retrieval import RetrievalDataset
    from harness.evaluation.retriever import Retriever

#: convention -> how a document is written for the encoder
TITLE_CONVENTIONS = {"coir": "text", "mteb": "title + ' ' + text"}


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
