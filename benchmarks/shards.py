"""Sharded vs unsharded evaluation on SciFact (5,183 docs, 300 queries) with all-MiniLM-L6-v2, on this machine:
wall time of the whole evaluation (fresh caches) unsharded and with K shards run one after another, the results
compared, then the merge alone in a fresh process: its time and its peak memory (it reads K x queries x k hits,
never an embedding).

    python benchmarks/shards.py [--shards 4] [--data /work/shared/data] [--top-k 1000]
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def evaluate_once(cfg, k: int | None, top_k: int) -> tuple[float, dict, object]:
    from harness.run import planning
    from harness.tasks.retrieval import compute, score
    from harness.tasks.retrieval.planner import entries
    from harness.tasks.retrieval.retrievers import shards
    from harness.tasks.retrieval.retrievers.retriever import evaluate

    plan = planning.plan(cfg)
    model, _ = compute.load_model(plan)
    (entry,) = entries(plan.settings)
    ds = score.loaded(plan, entry)
    retriever = compute.retriever(plan, model, {"run": "benchmark"})
    if k is not None:
        retriever = shards.ShardedRetriever(retriever, shards.ShardSettings(
            shards=k, shard_tokens=plan.settings.sharding.shard_tokens, shard=None, shard_launcher="sequential"))
    t0 = time.perf_counter()
    metrics, details, timings = evaluate(retriever, ds, top_k=top_k)
    return time.perf_counter() - t0, {"metrics": metrics, "details": details, "timings": timings}, retriever


def merge_alone(parts_file: Path, top_k: int) -> dict:
    """Run in a fresh process: load the shards' top-k lists, merge; time and peak RSS over the process' baseline."""
    import tracemalloc

    import torch  # noqa: F401  (imported before the baseline, as the merge process has it)

    from harness.tasks.retrieval.retrievers import shards

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()   # numpy reports its buffers to it: the merge's own allocations, whatever torch's import left
    t0 = time.perf_counter()
    meta = json.loads(parts_file.read_text())
    parts = []
    for path, positions in zip(meta["files"], meta["positions"], strict=True):
        scores, local, _ = shards.load_topk(Path(path), meta["n_queries"], len(np.load(positions)))
        parts.append((scores, np.load(positions)[local]))
    shards.merge(parts, top_k, np.load(meta["rank"]))
    took = time.perf_counter() - t0
    traced = tracemalloc.get_traced_memory()[1]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"merge_s": took, "peak_rss_over_baseline_mb": (peak - base) / 1024, "peak_alloc_mb": traced / 2**20,
            "hits_read": int(sum(p[0].size for p in parts))}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--data", default="/work/shared/data")
    p.add_argument("--top-k", type=int, default=1000)
    p.add_argument("--merge-only", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.merge_only:
        print(json.dumps(merge_alone(Path(args.merge_only), args.top_k)))
        return 0
    from tests.conftest import compose

    work = Path(tempfile.mkdtemp(prefix="bench-shards-"))
    common = ["task=beir", "model=all-minilm-l6-v2", f"task.data_dir={args.data}", "task.datasets=[scifact]",
              "task.train=false", "device=cpu", f"paths.results={work}/results", f"paths.outputs={work}/outputs"]
    plain_s, plain, _ = evaluate_once(compose([*common, f"paths.cache={work}/cache-plain"]), None, args.top_k)
    sharded_s, sharded, retriever = evaluate_once(compose([*common, f"paths.cache={work}/cache-sharded"]),
                                                  args.shards, args.top_k)
    same = plain["metrics"] == sharded["metrics"]
    # the merge alone, in a fresh process
    n_queries = plain["details"]["n_queries"]
    qkey = __import__("harness.tasks.retrieval.retrievers.embedding_cache", fromlist=["texts_key"]).texts_key(
        list(retriever.ds.evaluated_queries().values()))
    files, positions = [], []
    for i in range(len(retriever.plan)):
        files.append(str(retriever._path(i, qkey, args.top_k)))
        np.save(work / f"pos{i}.npy", retriever.plan.positions(i))
        positions.append(str(work / f"pos{i}.npy"))
    np.save(work / "rank.npy", retriever.rank)
    (work / "parts.json").write_text(json.dumps({"files": files, "positions": positions, "n_queries": n_queries,
                                                 "rank": str(work / "rank.npy")}))
    out = subprocess.run([sys.executable, __file__, "--merge-only", str(work / "parts.json"), "--top-k",
                          str(args.top_k)], capture_output=True, text=True, check=True)
    merge = json.loads(out.stdout.strip().splitlines()[-1])
    corpus_mb = plain["details"]["n_docs"] * 384 * 4 / 2**20
    print(f"machine: {cpu_model()}, {__import__('os').cpu_count()} cores; SciFact {plain['details']['n_docs']} docs, "
          f"{n_queries} queries, all-MiniLM-L6-v2, top-k {args.top_k}")
    print(f"unsharded:            {plain_s:7.1f} s  (encode corpus {plain['timings']['encode_corpus_s']:.1f} s)")
    print(f"sharded K={args.shards} (seq.):  {sharded_s:7.1f} s  (x{sharded_s / plain_s:.2f}; plan "
          f"{sharded['timings']['plan_s']:.1f} s, shards {sharded['timings']['shards_s']:.1f} s, merge "
          f"{sharded['timings']['merge_s']:.2f} s)")
    print(f"same metrics: {same}; nDCG@10 {plain['metrics']['ndcg_at_10']:.4f}")
    print(f"merge alone (fresh process): {merge['merge_s']:.2f} s, peak allocations {merge['peak_alloc_mb']:.1f} MB "
          f"(tracemalloc), peak RSS +{merge['peak_rss_over_baseline_mb']:.1f} MB over the process' baseline after "
          f"importing torch; it read {merge['hits_read']:,} hits ({args.shards} x {n_queries} x "
          f"{args.top_k}); the corpus embeddings are {corpus_mb:.1f} MB and are never read")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
