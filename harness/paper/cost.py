"""The graph's cost model (``conf/paper/cost.yaml``): GPU-hours = ((training tokens x ``train_factor`` + evaluation
tokens) / (tokens/s x ``gpu_speed``) + ``job_overhead_s``) / 3600; tokens from the job's runner, the throughput from
the paper's Table 2, or this folder's ``task=efficiency`` records of the model."""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from harness.core import layout, results
from harness.core.work import Work, cost_data
from harness.tasks.runplan import RunPlan

__all__ = ["Throughput", "Work", "cost_data", "device_hours", "gpu_hours", "host_memory", "job_work", "throughput"]

def job_work(plan: RunPlan) -> Work:
    """What one job processes: its plan's work, plus the cost file's fixed seconds per job."""
    w = Work(**asdict(plan.work))
    w.fixed_s += float(cost_data()["job_overhead_s"])
    return w


def host_memory(steps: Sequence[Any], states: Mapping[str, Any]) -> None:
    """Each step's ``mem_gb`` (SLURM ``--mem``): its jobs' largest host memory x headroom; None: none models it."""
    headroom = float(cost_data()["host_memory"]["headroom"])
    for step in steps:
        need = max((states[j.key].work.host_gb for j in step.jobs), default=0.0)
        step.mem_gb = math.ceil(need * headroom) if need > 0 else None


def host_by_dataset(step: Any, states: Mapping[str, Any]) -> dict[str, float]:
    """Host GB per dataset over a step's jobs (the largest where several jobs evaluate it)."""
    out: dict[str, float] = {}
    for j in step.jobs:
        for d, gb in states[j.key].work.host.items():
            out[d] = max(gb, out.get(d, 0.0))
    return out


@dataclass(frozen=True)
class Throughput:
    """Tokens/s of the model on short (<= 512) and long inputs, and where the figures come from."""

    short: float
    long: float
    source: str
    measured: bool = False


def throughput(model: Mapping[str, Any], results_dir: str | None) -> Throughput:
    """The model's measured throughput in this results folder, else the paper's Table 2 row (RTX 4090)."""
    measured = _measured(str(model.get("name")), results_dir) if results_dir else None
    if measured is not None:
        return measured
    rows = _table2()
    key = (str(model.get("size")), str(model.get("family")))
    row, note = rows.get(key), f"Table 2, {key[1]} {key[0]} (RTX 4090)"
    if row is None:
        row, note = rows[("base", "BERT")], f"Table 2 has no {key[1]} {key[0]}: BERT base's figures (RTX 4090)"
    short = float(row["short_variable"]) * 1000
    long = float(row["long_variable"] or row["short_variable"]) * 1000
    return Throughput(short, long, note)


@cache
def _table2() -> dict[tuple[str, str], dict[str, str]]:
    path = Path(str(resources.files("harness"))) / "leaderboard" / "baselines" / cost_data()["throughput_table"]
    with open(path, newline="") as fh:
        return {(r["size"], r["model"]): r for r in csv.DictReader(fh)}


def _measured(model: str, results_dir: str) -> Throughput | None:
    folder = layout.model_folder(results_dir, "efficiency", model)
    if not folder.is_dir():
        return None
    got: dict[str, tuple[str, float, str]] = {}
    for _, r in results.iter_records(folder, warn=False):
        rate = (r.metrics or {}).get("tokens_per_s")
        finite = isinstance(rate, int | float) and not isinstance(rate, bool) and math.isfinite(rate) and rate > 0
        usable = r.status == results.STATUS_OK and finite and r.dataset in ("short_variable", "long_variable")
        if usable and (r.dataset not in got or r.created_at > got[r.dataset][0]):
            got[r.dataset] = (r.created_at, float(rate), str((r.details or {}).get("device", "")))
    if "short_variable" not in got:
        return None
    short = got["short_variable"][1]
    long = got.get("long_variable", got["short_variable"])[1]
    return Throughput(short, long, f"measured here (task=efficiency records, {got['short_variable'][2]})", True)


def gpu_hours(work: Work, tp: Throughput, gpu: str) -> float:
    """GPU-hours of ``work`` at ``tp`` on ``gpu`` (a measured throughput is not rescaled: it is that device's)."""
    c = cost_data()
    speed = 1.0 if tp.measured else float(c["gpu_speed"].get(gpu, 1.0))
    seconds = (work.train * c["train_factor"] + work.short) / (tp.short * speed) + work.long / (tp.long * speed)
    return (seconds + work.fixed_s) / 3600.0


def device_hours(work: Work, tp: Throughput, gpu: str, devices: int) -> float:
    """GPU-hours of a job on ``devices`` GPUs: its compute, shared (perfect scaling), plus each one's fixed time."""
    return gpu_hours(work, tp, gpu) + work.fixed_s * (devices - 1) / 3600.0
