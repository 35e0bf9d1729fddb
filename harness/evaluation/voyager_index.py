"""The authors' ColBERT index: PyLate's Voyager HNSW over document tokens, then PyLate's exact MaxSim rerank of the
candidates (``retrieve.ColBERT``), with the parameters of MB@8c57a0f:examples/evaluate_pylate.py:23 (M 200,
ef_construction 500, ef_search 500) and its search depth k=100 (:53): :class:`VoyagerSettings`. Needs the ``voyager``
package (a PyLate dependency); it runs offline on CPU. Document ids are corpus positions as strings, as in
:func:`harness.evaluation.multivector.build_plaid`, so the results are (scores, positions) arrays like PLAID's.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import HarnessError
from harness.evaluation.multivector_settings import VoyagerSettings


def check_voyager() -> None:
    """One ``error:``-style refusal, before any encoding, when the voyager package is missing."""
    if importlib.util.find_spec("voyager") is None:
        raise HarnessError("task.index=voyager needs the voyager package (pip install voyager; PyLate's Voyager "
                           "index), which is not installed; or use task.index=plaid or exact")


def build_voyager(docs: Sequence[np.ndarray], dim: int, settings: VoyagerSettings, folder: Path) -> Any:
    """A PyLate Voyager index over ``docs`` (one [tokens, dim] array per document, ids = positions)."""
    check_voyager()
    from pylate import indexes

    index = indexes.Voyager(index_folder=str(folder), index_name="index", override=True, embedding_size=dim,
                            M=settings.M, ef_construction=settings.ef_construction, ef_search=settings.ef_search)
    with contextlib.redirect_stderr(io.StringIO()):          # PyLate's per-batch progress bar
        index.add_documents(documents_ids=[str(i) for i in range(len(docs))],
                            documents_embeddings=[np.asarray(d, dtype=np.float32) for d in docs])
    return index


def voyager_search(index: Any, queries: Sequence[np.ndarray], top_k: int, depth: int = VoyagerSettings.k
                   ) -> tuple[np.ndarray, np.ndarray]:
    """PyLate's ``retrieve.ColBERT`` over the index (token candidates, exact MaxSim rerank): [queries, top_k]
    scores and corpus positions, -inf / -1 where fewer came back. At most ``depth`` documents come back: the
    authors asked for k=100 (PyLate then keeps its default 100 neighbours per query token; a deeper k raises
    them to k, a different search)."""
    from pylate import retrieve

    with contextlib.redirect_stderr(io.StringIO()):
        hits = retrieve.ColBERT(index=index).retrieve(
            queries_embeddings=[np.asarray(q, dtype=np.float32) for q in queries], k=min(top_k, depth))
    scores = np.full((len(hits), top_k), -np.inf, dtype=np.float32)
    idx = np.full((len(hits), top_k), -1, dtype=np.int64)
    for row, h in enumerate(hits):
        for j, r in enumerate(h[:top_k]):
            scores[row, j], idx[row, j] = r["score"], int(r["id"])
    return scores, idx
