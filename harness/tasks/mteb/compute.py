"""``task=mteb``'s evaluation: mteb's own evaluator on the model the harness loads, one record per task and split;
mteb is imported only here, when a run (or ``harness export --format mteb``) needs it."""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.core.errors import HarnessError, HubUnavailableError
from harness.core.results import ResultRecord
from harness.tasks.mteb import benchmark
from harness.tasks.mteb.benchmark import Aggregate
from harness.tasks.runplan import Cell, RunPlan, check_model, done, weights_of

log = logging.getLogger(__name__)

@dataclass(frozen=True, kw_only=True)
class MtebStages:
    """What ``task=mteb``'s evaluation reads: the mteb task objects (no data loaded), local ones' files, mteb."""

    tasks: Mapping[str, Any]
    local: Mapping[str, Any]
    mteb: Any


def require_mteb(what: str) -> Any:
    """The mteb module, or a one-line error naming the install command."""
    try:
        import mteb
    except ImportError as exc:
        raise HarnessError(f"{what} needs the mteb package, which is not installed: pip install 'harness[mteb]'") from exc
    return mteb


def check(plan: RunPlan[Any, MtebStages], todo: Sequence[Cell]) -> None:
    """The model's checks; offline, each hub task's data is tried in the cache before any model is loaded."""
    from harness.models import hub_reachable
    check_model(plan, todo)
    remote = [n for n in dict.fromkeys(c.payload[0] for c in todo if isinstance(c.payload, tuple))
              if n not in plan.stages.local]
    if not remote or hub_reachable():
        return
    for name in remote:
        task = plan.stages.tasks[name]
        try:
            task.load_data()
        except Exception as exc:   # datasets raises several types offline; all mean "not available here"
            ds = task.metadata.dataset
            raise HubUnavailableError(
                f"mteb task {name} needs its dataset {ds.get('path')}@{ds.get('revision')} from the Hugging Face "
                "hub, which is not reachable from here (and it is not cached). Run tasks defined on local data: "
                "task.task_files=[my_tasks.py] 'task.tasks=[MyTask]', or a benchmark of them: task.benchmark=<the name "
                "of an mteb.Benchmark that file defines> (docs/integrations.md; tests/fixtures/mteb_local_benchmark.py "
                f"defines one on SciFact and CodeSearchNet Ruby). ({type(exc).__name__})"
            ) from exc
        task.unload_data()


def run(plan: RunPlan, todo: Sequence[Cell]) -> Iterator[ResultRecord]:
    """The tasks' records (mteb's evaluation, a task at a time), then the benchmark's aggregates from the records."""
    by_task: dict[str, list[Cell]] = {}
    for cell in todo:
        if isinstance(cell.payload, tuple):
            by_task.setdefault(cell.payload[0], []).append(cell)
    if by_task:
        yield from evaluate_tasks(plan, by_task)
    for cell in todo:
        if isinstance(cell.payload, Aggregate):
            yield aggregate_record(plan, cell)


def evaluate_tasks(plan: RunPlan, by_task: Mapping[str, list[Cell]]) -> Iterator[ResultRecord]:
    from harness.models import load_sentence_transformer
    model, block = load_sentence_transformer(weights_of(plan), device=plan.device)
    if plan.lineage is not None:
        block |= plan.lineage.loaded(block, plan.model.path)
    for name, cells in by_task.items():
        task = plan.stages.tasks[name]
        task.filter_eval_splits(eval_splits=[c.payload[1] for c in cells])
        t0 = time.perf_counter()
        try:
            result = evaluate(plan, model, task)
        except (RuntimeError, ValueError, TypeError, KeyError, OSError) as exc:
            log.error("mteb/%s failed: %s", name, exc)
            for cell in cells:
                yield plan.header.failed(cell, f"{type(exc).__name__}: {exc}", model=block, split=cell.payload[1])
            continue
        seconds = time.perf_counter() - t0
        for cell in cells:
            yield record(plan, cell, task, result, block, seconds / len(cells))


def aggregate_record(plan: RunPlan, cell: Cell) -> ResultRecord:
    """The benchmark's aggregate ``cell`` from its members' records as written (this run's, or an earlier one's)."""
    from harness.core import results
    agg, cells = cell.payload, {c.dataset: c for c in plan.cells}
    found = {d: rec if done(rec := results.finished_at(plan.record_path(cell, d)), cells[d], overwrite=False) else None
             for ds in agg.tasks.values() for d in ds}   # a member's record as the runner reads it: current, or none
    got = benchmark.aggregate(agg, found)
    info = {"benchmark": agg.benchmark, "task_type": agg.task_type, "rule": benchmark.RULE, "tasks": sorted(agg.tasks)}
    split = ",".join(sorted({r.split for r in found.values() if r is not None}))
    if isinstance(got, str):
        return plan.header.failed(cell, got, split=split, details={"mteb": info})
    value, per_task, main = got
    lineage = next((r.model.get("lineage") for r in found.values() if r is not None and r.model.get("lineage")), None)
    model = {**plan.header.model, **({"lineage": lineage} if lineage else {})}
    return plan.header.record(cell, model=model, split=split, metrics={main: value}, main_score=main,
                              details={"mteb": info | {"task_scores": per_task}})


def evaluate(plan: RunPlan, model: Any, task: Any) -> Any:
    """mteb's own evaluation of ``task`` on ``model`` in the run's precision (autocast, as the harness' encoder)."""
    from harness.models import autocast
    with autocast(plan.precision, plan.device):
        out = plan.stages.mteb.evaluate(model, task, cache=None, overwrite_strategy="always", co2_tracker=False,
                                        encode_kwargs={"batch_size": plan.settings.batch_size}, show_progress_bar=True)
    if out.exceptions:
        raise RuntimeError("; ".join(f"{e.task_name}: {e.exception}" for e in out.exceptions))
    return out.task_results[0]


def record(plan: RunPlan, cell: Cell, task: Any, result: Any, block: dict[str, Any], seconds: float) -> ResultRecord:
    name, split = cell.payload
    meta = task.metadata
    entries = [dict(e) for e in result.scores.get(split, [])]
    if not entries:
        return plan.header.failed(cell, f"mteb returned no scores for split {split!r}", model=block, split=split)
    numeric = [k for k, v in entries[0].items() if isinstance(v, int | float) and not isinstance(v, bool)
               and all(isinstance(e.get(k), int | float) for e in entries)]
    metrics = {k: statistics.fmean(float(e[k]) for e in entries) for k in numeric if k != "main_score"}
    metrics[meta.main_score] = statistics.fmean(float(e["main_score"]) for e in entries)   # mteb's main score
    local = plan.stages.local.get(name)
    ds = meta.dataset
    return plan.header.record(
        cell, model=block, split=split, metrics=metrics, main_score=meta.main_score,
        hyperparameters={"precision": plan.precision, "batch_size": plan.settings.batch_size,
                         "max_length": getattr(plan.model, "max_length", None), "hf_subsets": sorted(task.hf_subsets)},
        details={"mteb": {
            "task": name, "type": meta.type, "split": split, "hf_subsets": [e.get("hf_subset") for e in entries],
            "aggregate": "one subset" if len(entries) == 1 else f"mean over {len(entries)} subsets (mteb's rule)",
            "scores": entries, "dataset_revision": result.dataset_revision, "mteb_version": result.mteb_version,
            "evaluation_time": result.evaluation_time, "local": local is not None,
            "file": local.source if local else None,
        }},
        timings={"evaluate_s": seconds},
        data_fingerprint=f"local:{local.sha[:16]}:{meta.revision}" if local else f"hub:{ds.get('path')}@{meta.revision}",
    )
