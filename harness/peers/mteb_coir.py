"""mteb 2.26's CoIR CodeSearchNet task (``COIRCodeSearchNetRetrieval``: its own loader, filters and evaluation)
run on a local folder in CoIR's hub layout, for the parity test and benchmark: the same bytes as the harness reads.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from harness.peers.mteb_local import mteb_scores

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer


def local_coir_csn_task(folder: str | Path, lang: str):
    """mteb's ``COIRCodeSearchNetRetrieval`` reading ``folder`` (CoIR's layout) for one language, unchanged
    otherwise (the loader is mteb's: configs ``<lang>-corpus/-queries/-qrels``, queries of partition test).

    datasets caches a local folder under its name, so mteb is pointed at a link named after the folder's content:
    a folder whose files changed (or another one of the same name) is never served from a stale cache."""
    from mteb.tasks.retrieval.code.coir_code_search_net_retrieval import COIRCodeSearchNetRetrieval

    from harness.data.coir import content_key

    folder = Path(folder).resolve()
    link = Path(tempfile.gettempdir()) / "harness-mteb-coir" / f"{folder.name}-{content_key(folder)}"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.exists():
        link.symlink_to(folder, target_is_directory=True)
    folder = link

    meta = COIRCodeSearchNetRetrieval.metadata
    local_meta = meta.model_copy(update={
        "name": f"LocalCOIRCodeSearchNet_{lang}",
        "dataset": {"path": str(folder), "revision": meta.dataset["revision"]},
        "eval_langs": {lang: meta.eval_langs[lang]},
    })

    class LocalCOIRCodeSearchNet(COIRCodeSearchNetRetrieval):
        metadata = local_meta

    return LocalCOIRCodeSearchNet()


def mteb_coir_csn_ndcg_at_10(model: SentenceTransformer, folder: str | Path, lang: str, *,
                             batch_size: int = 32) -> float:
    """mteb's nDCG@10 for ``model`` on ``folder``'s ``lang`` (exact search, the model's dtype, mteb defaults)."""
    scores = mteb_scores(model, local_coir_csn_task(folder, lang), batch_size)["test"]
    (score,) = [s for s in scores if s["hf_subset"] == lang]
    return float(score["ndcg_at_10"])
