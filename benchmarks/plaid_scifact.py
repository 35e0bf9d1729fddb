"""PLAID's numbers on SciFact: the chunked build against the one-shot build, against exact MaxSim, and K index shards.

    python benchmarks/plaid_scifact.py --data ../shared/data         # tiny ModernBERT, all of SciFact, 180 tokens
    python benchmarks/plaid_scifact.py --data ../shared/data --model model=all-minilm-l6-v2 --shards 3

One process, one ColBERT model (the run's own loading, seeded head), the corpus encoded once into the token cache:
exact MaxSim; PLAID built as PyLate would from every document at once (float32 lists, one chunk); PLAID built as
the harness builds it (the token store read lazily, ``--chunk`` documents a chunk); PLAID with task.shards=K (an
index per shard, its own k-means sample and centroids; top-k merged by score). Each: nDCG@10 and the mean overlap
of its top-10 with exact MaxSim's and with the one-shot index's.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np

from harness.run import planning
from harness.run.overrides import compose_config
from harness.tasks.retrieval import compute, score
from harness.tasks.retrieval.planner import entries
from harness.tasks.retrieval.retrievers import plaid_index
from harness.tasks.retrieval.retrievers.retriever import evaluate
from harness.tasks.retrieval.retrievers.shards import ShardedRetriever

REPO = Path(__file__).resolve().parents[1]
TINY = ["model=modernbert-base", f"model.path={REPO / 'tests' / 'fixtures' / 'tiny-modernbert'}",
        "model.name=tiny-modernbert"]


class Captured:
    """A retriever indexed once (a second evaluation searches the same index) whose last top-10 is kept."""

    def __init__(self, inner) -> None:
        self.inner, self.top10, self.indexed = inner, np.zeros((0, 10), dtype=np.int64), None

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def index(self, ds):
        self.indexed = self.indexed or self.inner.index(ds)
        return self.indexed

    def search(self, queries, top_k):
        scores, idx, timings = self.inner.search(queries, top_k)
        self.top10 = idx[:, :10]
        return scores, idx, timings


def run(common: list[str], model, extra: list[str]) -> list[tuple[str, dict[str, float], np.ndarray]]:
    """(rerank, metrics, top-10) of one configuration: PLAID's candidates rescored exactly, then PLAID's own scores
    from the same index (exact MaxSim: once)."""
    plan = planning.plan(compose_config([*common, *extra]))
    inner = compute.retriever(plan, model, {"run": "plaid-scifact"})
    r = ShardedRetriever(inner, plan.settings.sharding) if plan.settings.sharding.sharded else inner
    (entry,) = entries(plan.settings)
    ds = score.loaded(plan, entry)
    score.prepare(plan, r, entry)
    captured, out = Captured(r), []
    for rerank in (True, False) if "task.index=plaid" in extra else (True,):
        inner.settings.search.plaid.rerank = rerank
        metrics, _, _ = evaluate(captured, ds, top_k=100)
        out.append(("exact rerank" if rerank else "PLAID scores", metrics, captured.top10))
    return out
def overlap(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean([len(set(x) & set(y)) / 10 for x, y in zip(a.tolist(), b.tolist(), strict=True)]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--model", nargs="*", default=TINY)
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--chunk", type=int, default=1000)
    ap.add_argument("--document-length", type=int, default=180)
    args = ap.parse_args()
    from pylate.indexes.stanford_nlp.data.collection import Collection

    with tempfile.TemporaryDirectory(prefix="plaid-scifact-") as tmp:
        common = ["task=colbert", *args.model, "precision=fp32", "device=cpu", "task.train=false",
                  f"task.data_dir={args.data}", "task.datasets=[scifact]", "task.plaid.backend=stanford",
                  f"task.document_length={args.document_length}",
                  f"paths.results={tmp}/results", f"paths.outputs={tmp}/outputs", f"paths.cache={tmp}/cache"]
        model, _ = compute.load_model(planning.plan(compose_config(common)))
        rows = {"exact": run(common, model, ["task.index=exact"])}
        with mock.patch.object(plaid_index, "StoreDocs",
                               lambda s: [np.asarray(s.doc(i), np.float32) for i in range(len(s))]):
            rows["plaid one-shot"] = run(common, model, ["task.index=plaid"])
        with mock.patch.object(Collection, "get_chunksize", lambda self: args.chunk):
            rows[f"plaid chunked ({args.chunk} docs)"] = run(common, model, ["task.index=plaid"])
        rows[f"plaid {args.shards} shards"] = run(common, model, ["task.index=plaid", f"task.shards={args.shards}"])
    exact, one_shot = rows["exact"][0][2], {k: idx for k, _, idx in rows["plaid one-shot"]}
    print(f"{'index':28s} {'scores':13s} {'nDCG@10':>8s} {'top-10 vs exact':>16s} {'vs one-shot':>12s}")
    for name, runs in rows.items():
        for kind, m, idx in runs:
            print(f"{name:28s} {kind:13s} {m['ndcg_at_10']:8.5f} {overlap(idx, exact):16.3f} "
                  f"{overlap(idx, one_shot.get(kind, exact)):12.3f}")


if __name__ == "__main__":
    main()
