"""Run mteb's retrieval evaluation on a harness ``RetrievalDataset``, and mteb 2.26's ``COIRCodeSearchNetRetrieval``
on a local folder in CoIR's hub layout: the parity tests compare on the bytes the harness reads, offline."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from harness.tasks.retrieval.data.dataset import RetrievalDataset


def mteb_task_for(ds: RetrievalDataset, ignore_identical_ids: bool = False):
    """An mteb ``AbsTaskRetrieval`` whose data is ``ds`` (queries limited to those with qrels, as mteb does)."""
    from datasets import Dataset
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData
    from mteb.abstasks.task_metadata import TaskMetadata
    queries = ds.evaluated_queries()

    class HarnessLocalRetrieval(AbsTaskRetrieval):
        metadata = TaskMetadata(
            type="Retrieval", name=f"HarnessLocal_{ds.name}", main_score="ndcg_at_10",
            description=f"harness dataset {ds.name} ({ds.source})", reference="https://github.com/",
            dataset={"path": "local", "revision": ds.fingerprint}, category="t2t", eval_splits=[ds.split],
            eval_langs=["eng-Latn"], date=("2020-01-01", "2020-01-01"), dialect=["Written"], domains=[],
            task_subtypes=[], license="cc-by-4.0", annotations_creators="derived", modalities=["text"],
            sample_creation="found", bibtex_citation="",
        )

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            split = RetrievalSplitData(
                queries=Dataset.from_dict({"id": list(queries), "text": list(queries.values())}),
                corpus=Dataset.from_dict(dict(zip(("id", "title", "text"),
                                                  (list(c) for c in zip(*ds.corpus.rows(), strict=True)),
                                                  strict=True))),
                relevant_docs={q: dict(ds.qrels[q]) for q in queries},
                top_ranked=None,
            )
            self.dataset = {"default": {ds.split: split}}
            self.data_loaded = True

    HarnessLocalRetrieval.ignore_identical_ids = ignore_identical_ids
    return HarnessLocalRetrieval()


def mteb_scores(model: SentenceTransformer, task: Any, batch_size: int) -> dict[str, Any]:
    """mteb's scores of ``task`` for ``model`` by split (exact search, mteb defaults; results cached nowhere)."""
    import mteb
    with tempfile.TemporaryDirectory() as cache:
        result = mteb.evaluate(model, task, cache=mteb.ResultCache(cache_path=cache), overwrite_strategy="always",
                               encode_kwargs={"batch_size": batch_size}, show_progress_bar=False)
    return result.task_results[0].scores


def mteb_ndcg_at_10(
    model: SentenceTransformer, ds: RetrievalDataset, *, batch_size: int = 32, ignore_identical_ids: bool = False
) -> float:
    """mteb's nDCG@10 for ``model`` on ``ds`` (exact search, fp32, mteb defaults)."""
    scores = mteb_scores(model, mteb_task_for(ds, ignore_identical_ids), batch_size)
    return float(scores[ds.split][0]["ndcg_at_10"])


def local_coir_csn_task(folder: str | Path, lang: str):
    """mteb's ``COIRCodeSearchNetRetrieval`` reading ``folder`` (CoIR's layout) for one language, otherwise
    unchanged; pointed at a link named after the folder's content, so datasets' by-name cache is never stale."""
    from mteb.tasks.retrieval.code.coir_code_search_net_retrieval import COIRCodeSearchNetRetrieval

    from harness.tasks.retrieval.data.coir import content_key
    folder = Path(folder).resolve()
    link = Path(tempfile.gettempdir()) / "harness-mteb-coir" / f"{folder.name}-{content_key(folder)}"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.exists():
        link.symlink_to(folder, target_is_directory=True)
    folder = link

    meta = COIRCodeSearchNetRetrieval.metadata
    local_meta = meta.model_copy(update={"name": f"LocalCOIRCodeSearchNet_{lang}",
                                         "dataset": {"path": str(folder), "revision": meta.dataset["revision"]},
                                         "eval_langs": {lang: meta.eval_langs[lang]}})

    class LocalCOIRCodeSearchNet(COIRCodeSearchNetRetrieval):
        metadata = local_meta

    return LocalCOIRCodeSearchNet()


def mteb_coir_csn_ndcg_at_10(model: SentenceTransformer, folder: str | Path, lang: str, *,
                             batch_size: int = 32) -> float:
    """mteb's nDCG@10 for ``model`` on ``folder``'s ``lang`` (exact search, the model's dtype, mteb defaults)."""
    scores = mteb_scores(model, local_coir_csn_task(folder, lang), batch_size)["test"]
    (score,) = [s for s in scores if s["hf_subset"] == lang]
    return float(score["ndcg_at_10"])
