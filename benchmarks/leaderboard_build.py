"""How long the leaderboard takes to build from 10,000 result records (target: under 10 s).

``python benchmarks/leaderboard_build.py [--records 10000] [--combine latest|best|mean]``

Writes synthetic but schema-true records with ``harness.core.results.write_record`` into a temp dir (BEIR and
ColBERT LR sweeps, GLUE grids with seeds, MLDR, code, a few failed runs), then times the whole build:
reading, combining, published baselines, Markdown, CSVs and the site.
"""

from __future__ import annotations

import argparse
import itertools
import random
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from harness import specs
from harness.core.results import ResultRecord, write_record
from harness.leaderboard import build

VERSIONS = {"harness": "0.1.0", "torch": "2.6.0", "transformers": "5.3.0", "sentence-transformers": "5.3.0"}
FAMILIES = [("BERT", "bert"), ("RoBERTa", "roberta"), ("ModernBERT", "modernbert"), ("GTE-en-MLM", "gte-en-mlm")]


def cells(n_models: int) -> Iterator[tuple[dict, str, str, str, dict, dict]]:
    """(model, task, dataset, metric, hyperparameters, details) for every planned run, model by model."""
    for m in range(n_models):
        fam, slug = FAMILIES[m % len(FAMILIES)]
        size = ("base", "large")[(m // len(FAMILIES)) % 2]
        model = {"name": f"{slug}-{size}-v{m}", "path": f"org/{slug}-{size}", "revision": f"{m:07x}",
                 "family": fam, "size": size, "fingerprint": f"{m:010x}"}
        for task in ("beir", "colbert"):
            for ds, lr in itertools.product(specs.get("beir").tables[0].columns, (1e-5, 3e-5, 5e-5, 8e-5)):
                yield model, task, ds, "ndcg_at_10", {"lr": lr}, {"n_queries": 300}
        for ds, lr, wd, seed in itertools.product(specs.get("glue").tables[0].columns, (1e-5, 3e-5, 5e-5, 8e-5), (1e-6, 1e-5), (42, 1618)):
            yield model, "glue", ds, "accuracy", {"lr": lr, "weight_decay": wd, "epochs": 3, "seed": seed}, {}
        for setting in ("ood", "id"):
            yield model, "mldr", "mldr-en", "ndcg_at_10", {"lr": 3e-5}, {"setting": setting}
        for ds in ("codesearchnet", "stackoverflow-qa", "stdlib"):
            yield model, "code", ds, "ndcg_at_10", {"lr": 3e-5}, {}


def write_records(root: Path, n: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    for i, (model, task, ds, metric, hp, details) in enumerate(itertools.islice(cells(10**6), n)):
        score = rng.uniform(0.2, 0.8) if task != "glue" else rng.uniform(55, 95)
        failed = rng.random() < 0.01
        write_record(root, ResultRecord(
            task=task, dataset=ds, split="validation" if task == "glue" else "test", model=model,
            metrics={} if failed else {metric: score, "recall_at_100": min(1.0, score + 0.2)}, main_score=metric,
            run_id=f"{task}-{i:06d}", status="failed" if failed else "ok", error="OOM" if failed else None,
            hyperparameters=hp, sweep=f"{task}-sweep", details=details,
            config={"task": {"name": task}, "model": model, "seed": hp.get("seed", 42), "precision": "bf16"},
            precision="bf16", data_fingerprint=f"{ds}-0001", versions=VERSIONS, git_sha="60dd824",
            timings={"train": 123.4, "eval": 5.6}, created_at=f"2025-03-{1 + i % 28:02d}T{i % 24:02d}:00:00+00:00"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=10_000)
    p.add_argument("--combine", choices=("latest", "best", "mean"), default=None, help="default: all three")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        write_records(root / "results", args.records)
        print(f"wrote {args.records} records in {time.perf_counter() - t0:.1f} s (not part of the build time)")
        for rule in [args.combine] if args.combine else ["latest", "best", "mean"]:
            t0 = time.perf_counter()
            lb, files = build([root / "results"], root / f"site-{rule}", combine=rule)
            dt = time.perf_counter() - t0
            size = sum(f.stat().st_size for f in files) / 1e6
            print(f"build --combine {rule}: {dt:.2f} s for {lb.meta['n_records']} records, {len(lb.rows)} rows, "
                  f"{len(files)} files ({size:.1f} MB)")


if __name__ == "__main__":
    main()
