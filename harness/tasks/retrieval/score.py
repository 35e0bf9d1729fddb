"""The retrieval run's search and score stages: each dataset loaded (``task.max_queries`` / ``max_docs``), retrieved
and scored by ``score.ir``; composites (CQADupstack) as the mean of their members."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from harness.core import data_origin, results
from harness.core.results import ResultRecord
from harness.tasks.retrieval.data.catalog import DatasetEntry, load_entry
from harness.tasks.retrieval.data.dataset import RetrievalDataset, subset
from harness.tasks.retrieval.retrievers.retriever import SUBGROUPS, QueryGroups, Retriever, evaluate_per_query
from harness.tasks.runplan import Cell, RunPlan

log = logging.getLogger(__name__)


def evaluate_cell(plan: RunPlan, cell: Cell, retriever: Retriever, block: dict[str, Any],
                  tokenizer: Any) -> Iterator[ResultRecord]:
    """One dataset's record (a composite: one per member, then their mean); ``tokenizer`` counts query tokens."""
    entry: DatasetEntry = cell.payload
    members = list(entry.members.values())
    if not members:
        yield evaluate_entry(plan, cell, entry, retriever, block, tokenizer)
        return
    parts = []
    for m in members:
        mcell = Cell(m.name, cell.run_id, cell.identity, plan.stages.member_specs[m.name], m)
        rec = evaluate_entry(plan, mcell, m, retriever, block, tokenizer, member_of=entry.name)
        parts.append(rec)
        yield rec
    yield plan.header.record(
        cell, model=block, split=plan.settings.split or entry.split,
        metrics={k: float(np.mean([p.metrics[k] for p in parts])) for k in parts[0].metrics},
        details={"members": [m.name for m in members], "aggregate": "mean over members",
                 "data": data_origin.combined([p.details.get("data") or {} for p in parts])},
        timings={k: float(sum(p.timings.get(k, 0.0) for p in parts)) for k in parts[0].timings},
        data_fingerprint=results.stable_hash([p.data_fingerprint for p in parts], length=16),
    )


def prepare(plan: RunPlan, retriever: Retriever, entry: DatasetEntry) -> None:
    """Per-dataset retriever settings: the dataset's query length where the task sets one (ColBERT)."""
    lengths = plan.stages.query_lengths
    if lengths is not None:
        engine = getattr(retriever, "engine", retriever)   # a sharded retriever's engine is the retriever
        engine.query_length = lengths[entry.name]


def loaded(plan: RunPlan, entry: DatasetEntry) -> RetrievalDataset:
    """The entry's data as evaluated (``task.max_queries`` / ``task.max_docs`` applied)."""
    s = plan.settings
    ds = load_entry(entry, data_dir=s.data_dir, split=s.split, strict_qrels=s.strict_qrels)
    return subset(ds, s.max_queries, s.max_docs) if s.max_queries or s.max_docs else ds


def document_length(retriever: Retriever) -> int | None:
    """The length documents are encoded at, as the retriever says (ColBERT: capped at the model's positions)."""
    described = retriever.describe()
    length = described.get("document_length", described.get("max_length"))
    return None if length is None else int(length)


def subgroups(plan: RunPlan, retriever: Retriever, tokenizer: Any) -> list[QueryGroups]:
    """The query groups ``task.subgroups`` names, where the task has the key (MLDR: before/after truncation)."""
    names = getattr(plan.settings, "subgroups", ())
    return [SUBGROUPS[name](tokenizer, document_length(retriever)) for name in names]


def evaluate_entry(plan: RunPlan, cell: Cell, entry: DatasetEntry, retriever: Retriever,
                   block: dict[str, Any], tokenizer: Any, member_of: str | None = None) -> ResultRecord:
    s = plan.settings
    t0 = time.perf_counter()
    prepare(plan, retriever, entry)
    ds = loaded(plan, entry)
    load_s = time.perf_counter() - t0
    log.info("%s: %d docs, %d queries (%s)", entry.name, len(ds), len(ds.evaluated_queries()), ds.source)
    metrics, details, timings, per_query = evaluate_per_query(
        retriever, ds, top_k=s.ranking.top_k, ignore_identical_ids=entry.ignore_identical_ids,
        subgroups=subgroups(plan, retriever, tokenizer),
    )
    length = document_length(retriever)
    if length is not None:
        details["max_length"] = length
    details["data"] = data_origin.origin((ds.meta.get("subset") or {}).get("of") or ds.fingerprint, ds.source,
                                         hub=entry.hub, revision=entry.revision,
                                         official_fingerprints=entry.official_fingerprints)
    if member_of:
        details["member_of"] = member_of
    rec = plan.header.record(cell, model=block, split=ds.split, metrics=metrics, details=details,
                          timings={"load_s": load_s, **timings}, data_fingerprint=ds.fingerprint)
    if not plan.save_run:
        per_query.run = None
    rec.per_query = per_query
    return rec
