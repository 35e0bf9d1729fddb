"""Retrieval LR selection (the paper's appendix E.2): among the runs of one model, the run with the best mean
nDCG@10 over the selection datasets wins. Reads records only; never reruns anything."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from harness.results import STATUS_OK, ResultRecord

#: the paper's selection sets (NFCorpus, SciFact, TREC-COVID, FiQA)
SELECTION_DATASETS = ("nfcorpus", "scifact", "trec-covid", "fiqa")


def select_retrieval(
    records: Sequence[ResultRecord],
    model: str | None = None,
    *,
    task: str = "beir",
    datasets: Sequence[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """{model name: selection}. The selection datasets are those the runs were configured with
    (``task.selection_datasets`` in the recorded config; the paper's four by default). A run is eligible only
    when it has ok records for every selection dataset present in any run of that model."""
    by_model: dict[str, dict[str, dict[str, ResultRecord]]] = defaultdict(lambda: defaultdict(dict))
    for r in records:
        if r.task != task or r.status != STATUS_OK or (model and r.model.get("name") != model):
            continue
        by_model[r.model["name"]][r.run_id][r.dataset] = r
    out: dict[str, dict[str, Any]] = {}
    for name, runs in sorted(by_model.items()):
        wanted = datasets
        if wanted is None:
            configured = next(
                (r.config.get("task", {}).get("selection_datasets") for recs in runs.values() for r in recs.values()),
                None,
            )
            wanted = tuple(configured or SELECTION_DATASETS)
        available = {d for recs in runs.values() for d in recs if d in wanted}
        if not available:
            continue
        sets = sorted(available)
        candidates = []
        for rid, recs in runs.items():
            if all(d in recs for d in sets):
                score = statistics.fmean(recs[d].metrics["ndcg_at_10"] for d in sets)
                candidates.append((score, rid, recs))
        if not candidates:
            continue
        candidates.sort(key=lambda c: (-c[0], c[1]))
        best_score, best_rid, best_recs = candidates[0]
        out[name] = {
            "schema": "harness.selection/1",
            "task": task,
            "model": next(iter(best_recs.values())).model,
            "selection_rule": f"the run with the best mean nDCG@10 over {sets}",
            "selected_run_id": best_rid,
            "selected_score": best_score,
            "hyperparameters": next(iter(best_recs.values())).hyperparameters,
            "candidates": [
                {"run_id": rid, "score": s, "lr": next(iter(recs.values())).hyperparameters.get("lr")}
                for s, rid, recs in candidates
            ],
            "missing_selection_datasets": sorted(set(wanted) - available),
            # same run id -> the trained model and the finished datasets are reused, only the rest is evaluated
            "next_command": f"python -m harness task={task} model={name} task.lr={best_recs[sets[0]].hyperparameters.get('lr')}",
        }
    return out


def format_retrieval_table(sel: dict[str, Any]) -> str:
    """Plain-text summary of a retrieval selection: every candidate run, the winner marked."""
    lines = [f"{sel['model']['name']}: {sel['selection_rule']}"]
    for c in sel["candidates"]:
        mark = "*" if c["run_id"] == sel["selected_run_id"] else " "
        lines.append(f" {mark} lr={c['lr']!s:8s} mean nDCG@10 {c['score']:.4f}  {c['run_id']}")
    lines.append(f"  next: {sel['next_command']}")
    return "\n".join(lines)
