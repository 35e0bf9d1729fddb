"""An mteb benchmark by its own name: its tasks and its aggregate as mteb computes it (``Benchmark.get_score``). Our
own aggregation: mteb's needs one process's ``TaskResult`` objects, a resumed run's records come from several."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.core.errors import HarnessError, closest_first
from harness.core.results import STATUS_OK, ResultRecord

#: how the aggregate is computed, in every aggregate record (mteb 2.26: mteb/benchmarks/_benchmark_metrics.py)
RULE = ("mteb's Benchmark.get_score: per task type, the mean of its tasks' main scores (a task's: the mean over "
        "its splits and subsets, TaskResult.get_score); Mean(TaskType): the mean of the types' means")


def benchmark_column(benchmark: str, task_type: str | None = None) -> str:
    """The mteb table's column of a benchmark's aggregate over its tasks of ``task_type`` (None: the mean over task
    types), shared by published rows (Ettin Table 3's "Retrieval") and task=mteb runs: ``"MTEB(eng, v2) Retrieval"``."""
    return f"{benchmark} {task_type or 'Mean(TaskType)'}"


@dataclass(frozen=True)
class Aggregate:
    """An aggregate cell's payload: the task type it averages (None: all) and its members' datasets, by task."""

    benchmark: str
    task_type: str | None
    tasks: Mapping[str, tuple[str, ...]]      # task -> its records' datasets (one per split)

    @property
    def column(self) -> str:
        """The aggregate record's dataset: its column of the mteb table."""
        return benchmark_column(self.benchmark, self.task_type)


def benchmark_tasks(mteb: Any, name: str, local: Mapping[str, Any], types: Sequence[str]) -> list[Any]:
    """The tasks of benchmark ``name`` as it restricts them (splits, subsets, languages), of ``types`` if given."""
    if name in local:
        bench = local[name]
    else:
        try:
            bench = mteb.get_benchmark(name)
        except (KeyError, ValueError):
            known = [b.name for b in mteb.get_benchmarks()] + list(local)
            raise HarnessError(
                f"task.benchmark={name!r} is not an mteb benchmark; closest: {', '.join(closest_first(name, known)[:6])}"
                " (a benchmark of your own: define an mteb.Benchmark in a task file, task.task_files=[my_tasks.py])"
            ) from None
    tasks = list(bench.tasks)
    present = sorted({t.metadata.type for t in tasks})
    unknown = [t for t in types if t not in present]
    if unknown:
        raise HarnessError(f"task.task_types={list(types)}: {name} has no task of type {', '.join(unknown)}; its "
                           f"types: {', '.join(present)}")
    return [t for t in tasks if not types or t.metadata.type in types]


def aggregates(benchmark: str, tasks: Mapping[str, Any], datasets: Mapping[str, tuple[str, ...]],
               types: Sequence[str]) -> list[Aggregate]:
    """The benchmark's aggregates over ``tasks``: one per task type, and the mean over types where it applies."""
    present = sorted({t.metadata.type for t in tasks.values()})
    out = [Aggregate(benchmark, ty, {n: datasets[n] for n, t in tasks.items() if t.metadata.type == ty})
           for ty in (types or present)]
    if not types and len(present) > 1:
        out.append(Aggregate(benchmark, None, dict(datasets)))
    return out


def task_score(records: Sequence[ResultRecord]) -> float:
    """A task's score as mteb's ``TaskResult.get_score``: the mean main score over every split's subset entries."""
    return statistics.fmean(float(e["main_score"]) for r in records for e in r.details["mteb"]["scores"])


def aggregate(agg: Aggregate, found: Mapping[str, ResultRecord | None]) -> tuple[float, dict[str, float], str] | str:
    """(the aggregate, each task's score, the main score's name) from the members' records, or why not."""
    bad = [d for ds in agg.tasks.values() for d in ds if found.get(d) is None or found[d].status != STATUS_OK]
    if bad:
        return (f"{agg.benchmark}'s aggregate needs every task's record; not ok: {', '.join(bad[:5])}"
                + (f" and {len(bad) - 5} more" if len(bad) > 5 else "") + " (run them again: the aggregate follows)")
    per_task = {name: task_score([found[d] for d in ds]) for name, ds in agg.tasks.items()}
    types: dict[str, list[float]] = {}
    for name, ds in agg.tasks.items():
        types.setdefault(found[ds[0]].details["mteb"]["type"], []).append(per_task[name])
    means = [statistics.fmean(v) for v in types.values()]
    value = means[0] if agg.task_type is not None else statistics.fmean(means)
    names = {found[ds[0]].main_score for ds in agg.tasks.values()}
    return value, per_task, names.pop() if len(names) == 1 else "main_score"
