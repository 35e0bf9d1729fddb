"""What ``python -m harness.paper`` prints: the graph (stages, jobs, waits, resources, done, GPU-hours) for
``--dry-run``, and each stage's state for ``--status`` (records, plus the SLURM queue where there is one)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.paper import cost
from harness.paper.graph import Stage
from harness.paper.plan import JobState


def resources(stage: Stage, cluster: Mapping[str, Any]) -> str:
    r = cluster[stage.kind]
    gpus = int(r.get("gpus") or 0)
    return f"{gpus} GPU, {r['cpus']} CPU, {r['mem_gb']:g} GB, {r['timeout_min']} min" if gpus else \
        f"CPU: {r['cpus']} CPU, {r['mem_gb']:g} GB, {r['timeout_min']} min"


def stage_hours(stage: Stage, states: Mapping[str, JobState], tp: cost.Throughput, gpu: str,
                todo_only: bool = False) -> float:
    if stage.kind == "cpu":
        return 0.0
    jobs = [states[j.key] for j in stage.jobs if not (todo_only and states[j.key].finished)]
    return sum(cost.gpu_hours(s.work, tp, gpu) for s in jobs)


def dry_run(stages: Sequence[Stage], states: Mapping[str, JobState], tp: cost.Throughput,
            cluster: Mapping[str, Any], header: str) -> list[str]:
    """The graph as a table, then the GPU-hour total (all of it, and what is left)."""
    gpu = str(cluster.get("gpu", "rtx4090"))
    lines = [header, f"throughput: {tp.short / 1000:.1f}k tokens/s (<= 512 tokens), {tp.long / 1000:.1f}k (long), "
             f"{tp.source}; GPU: {gpu} (x{cost.cost_data()['gpu_speed'].get(gpu, 1.0) if not tp.measured else 1:g})",
             f"{'stage':20s} {'kind':5s} {'jobs':>5s} {'done':>5s} {'GPU-h':>8s}  waits for / resources"]
    total = left = 0.0
    for s in stages:
        ss = [states[j.key] for j in s.jobs]
        hours, todo = stage_hours(s, states, tp, gpu), stage_hours(s, states, tp, gpu, todo_only=True)
        total, left = total + hours, left + todo
        waits = ", ".join(f"{up} ({cond})" for up, cond in s.after) or "-"
        if s.name.endswith(".shards"):   # a shard array: its jobs run at once, one GPU each
            waits += f"; {len(ss)} at once: ~{hours / max(1, len(ss)):.1f} h wall"
        lines.append(f"{s.name:20s} {s.kind:5s} {len(ss):5d} {sum(x.finished for x in ss):5d} {hours:8.1f}  "
                     f"{waits if len(waits) < 60 else waits[:57] + '...'}; {resources(s, cluster)}")
        upstream_done = all(states[j.key].finished for up, _ in s.after for st in stages if st.name == up
                            for j in st.jobs)
        why = next((x.waiting for x in ss if x.waiting and not x.waiting.startswith("waits for")), None)
        if why and upstream_done:
            lines.append(f"{'':20s} not plannable yet: {why}")
    lines.append(f"{'total':20s} {'':5s} {sum(len(s.jobs) for s in stages):5d} "
                 f"{sum(states[j.key].finished for s in stages for j in s.jobs):5d} {total:8.1f}  "
                 f"GPU-hours estimated ({left:.1f} left to run)")
    return lines


def status(stages: Sequence[Stage], states: Mapping[str, JobState], live: Mapping[str, str],
           spent: Mapping[str, float], tp: cost.Throughput, gpu: str) -> list[str]:
    """Each stage: done / running / pending / failed jobs, the failing cells' errors, GPU-hours spent vs estimate."""
    lines = [f"{'stage':20s} {'done':>5s} {'run':>5s} {'queue':>5s} {'fail':>5s} {'GPU-h spent':>12s} {'estimate':>9s}"]
    for s in stages:
        ss = [states[j.key] for j in s.jobs]
        state = [live.get(j.key, "") for j in s.jobs]
        failed = [x for x in ss if x.failed and not x.finished]
        lines.append(f"{s.name:20s} {sum(x.finished for x in ss):5d} {state.count('R'):5d} {state.count('PD'):5d} "
                     f"{len(failed):5d} {spent.get(s.name, 0.0):12.2f} {stage_hours(s, states, tp, gpu):9.1f}")
        lines += [f"    {x.job.key}: {x.failed[0]}" for x in failed[:5]]
    return lines
