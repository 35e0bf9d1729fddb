"""What ``python -m harness.paper`` prints: the graph (steps, jobs, waits, resources, done, GPU-hours) for
``--dry-run``, and each step's state for ``--status`` (records, plus the SLURM queue where there is one)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.paper import cost
from harness.paper.graph import Step
from harness.paper.progress import JobState
from harness.paper.slurm import FAILED, QUEUED, RUNNING, job_states


def resources(step: Step, cluster: Mapping[str, Any]) -> str:
    r = step.resources(cluster)
    gpus = int(r.get("gpus") or 0)
    each = f" ({step.devices} training processes)" if step.devices > 1 else ""
    return (f"{gpus} GPU, " if gpus else "CPU: ") + f"{r['cpus']} CPU, {r['mem_gb']:g} GB, {r['timeout_min']} min{each}"


def step_hours(step: Step, states: Mapping[str, JobState], tp: cost.Throughput, gpu: str,
                todo_only: bool = False) -> float:
    if step.kind == "cpu":
        return 0.0
    jobs = [states[j.key] for j in step.jobs if not (todo_only and states[j.key].finished)]
    return sum(cost.device_hours(s.work, tp, gpu, step.devices) for s in jobs)


def _waits(step: Step, steps: Sequence[Step]) -> str:
    """What a step waits for, in full: ``every other step (afterany)`` where it waits for all of them alike."""
    conds = {cond for _, cond in step.after}
    if len(step.after) > 1 and len(step.after) == len(steps) - 1 and len(conds) == 1:
        return f"every other step ({conds.pop()})"
    return ", ".join(f"{up} ({cond})" for up, cond in step.after) or "-"


def dry_run(steps: Sequence[Step], states: Mapping[str, JobState], tp: cost.Throughput,
            cluster: Mapping[str, Any], header: str) -> list[str]:
    """The graph as a table, then the GPU-hour total (all of it, and what is left)."""
    gpu = str(cluster.get("gpu", "rtx4090"))
    lines = [header, f"throughput: {tp.short / 1000:.1f}k tokens/s (<= 512 tokens), {tp.long / 1000:.1f}k (long), "
             f"{tp.source}; GPU: {gpu} (x{cost.cost_data()['gpu_speed'].get(gpu, 1.0) if not tp.measured else 1:g})",
             sizes_line(states),
             f"{'step':20s} {'kind':5s} {'jobs':>5s} {'done':>5s} {'GPU-h':>8s}  resources; waits for"]
    total = left = 0.0
    for s in steps:
        ss = [states[j.key] for j in s.jobs]
        hours, todo = step_hours(s, states, tp, gpu), step_hours(s, states, tp, gpu, todo_only=True)
        total, left = total + hours, left + todo
        waits = _waits(s, steps)
        if s.name.endswith(".shards"):   # a shard array: its jobs run at once, one GPU each
            waits += f"; {len(ss)} at once: ~{hours / max(1, len(ss)):.1f} h wall"
        lines.append(f"{s.name:20s} {s.kind:5s} {len(ss):5d} {sum(x.finished for x in ss):5d} {hours_text(hours):>8s}  "
                     f"{resources(s, cluster)}; {waits}")
        host = cost.host_by_dataset(s, states)
        if host:
            lines.append(f"{'':20s} host memory: " + ", ".join(f"{d} {gb:.1f}" for d, gb in
                                                               sorted(host.items(), key=lambda x: -x[1])) + " GB")
        upstream_done = all(states[j.key].finished for up, _ in s.after for st in steps if st.name == up
                            for j in st.jobs)
        why = next((x.waiting for x in ss if x.waiting and not x.waiting.startswith("waits for")), None)
        if why and upstream_done:
            lines.append(f"{'':20s} not plannable yet: {why}")
    lines.append(f"{'total':20s} {'':5s} {sum(len(s.jobs) for s in steps):5d} "
                 f"{sum(states[j.key].finished for s in steps for j in s.jobs):5d} {hours_text(total):>8s}  "
                 f"GPU-hours estimated ({hours_text(left)} left to run)")
    return lines


def hours_text(hours: float) -> str:
    """GPU-hours as printed: one decimal from 1 h (and for none), three below (a small graph's jobs are not 0.0)."""
    return f"{hours:.1f}" if hours >= 1 or hours == 0 else f"{hours:.3f}"


def sizes_line(states: Mapping[str, JobState]) -> str:
    """Which sizes the estimate rests on: the configured local data's, the cost file's published ones, or both."""
    local = sum(x.work.local for x in states.values())
    published = sum(x.work.published for x in states.values())
    return (f"sizes: {local} dataset/file size(s) read from this run's local data, {published} from "
            f"conf/paper/cost.yaml (published); plus {cost.cost_data()['job_overhead_s']} s per job")


#: step states, the first that any of its jobs is in wins (``done`` only when every job is done)
ORDER = ("running", "blocked", "failed", "queued", "stopped", "pending", "todo")


def status(steps: Sequence[Step], states: Mapping[str, JobState], tp: cost.Throughput, cluster: Mapping[str, Any],
           folder: Path) -> list[str]:
    """Each step: state, job counts, failing cells' errors, jobs that can never start, device-hours vs the estimate."""
    from harness.paper.job import outcomes as read_outcomes
    live = job_states(folder)   # each job's SLURM attempt: queued, running, blocked, or its final state
    outcomes = read_outcomes(folder)
    gpu = str(cluster.get("gpu", "rtx4090"))
    spent = {s.name: sum(job_seconds(outcomes.get(j.key), states[j.key].seconds) for j in s.jobs)
             * devices(s.kind, cluster) * s.devices / 3600 for s in steps}
    started = bool(live or outcomes)
    lines = [f"{'step':20s} {'state':8s} {'jobs':>4s} {'done':>4s} {'run':>4s} {'queue':>5s} {'fail':>4s} "
             f"{'GPU-h spent':>11s} {'estimate':>9s}"]
    if not started:
        lines.insert(0, "not submitted yet: no ledger and no job has run (submit with the same command without "
                        "--status)")
    total_spent = total_estimate = 0.0
    for s in steps:
        ss = [states[j.key] for j in s.jobs]
        each = {x.job.key: _job_state(x, live.get(x.job.key, ""), outcomes.get(x.job.key), started) for x in ss}
        kinds = [k for k, _ in each.values()]
        notes = {key: why for key, (k, why) in each.items() if why and k in ("failed", "blocked", "stopped")}
        done = kinds.count("done")
        state = "done" if done == len(ss) else next(k for k in ORDER if k in kinds)
        estimate = step_hours(s, states, tp, gpu)
        total_spent, total_estimate = total_spent + spent.get(s.name, 0.0), total_estimate + estimate
        lines.append(f"{s.name:20s} {state:8s} {len(ss):4d} {done:4d} {kinds.count('running'):4d} "
                     f"{kinds.count('queued') + kinds.count('blocked'):5d} {kinds.count('failed'):4d} "
                     f"{spent.get(s.name, 0.0):11.3f} {hours_text(estimate):>9s}")
        lines += [f"    {k}: {e}" for k, e in list(notes.items())[:5]]
        if len(notes) > 5:
            lines.append(f"    ... and {len(notes) - 5} more")
        lines += [f"    {x.job.key}: unreadable record {u}" for x in ss for u in x.unreadable][:5]
        lines += [f"    {x.job.key}: {u}: its record's data is not what the dataset holds now; computed again on "
                  "the next run" for x in ss if not x.finished for u in x.stale][:5]
    lines.append(f"{'total':20s} {'':8s} {sum(len(s.jobs) for s in steps):4d} "
                 f"{sum(states[j.key].finished for s in steps for j in s.jobs):4d} {'':4s} {'':5s} {'':4s} "
                 f"{total_spent:11.3f} {hours_text(total_estimate):>9s}")
    return lines


def job_seconds(outcome: Mapping[str, Any] | None, recorded: float) -> float:
    """What a job held its devices for: its last attempt's wall time, else what its records' timings add up to."""
    from datetime import datetime
    try:
        return (datetime.fromisoformat(outcome["ended"]) - datetime.fromisoformat(outcome["started"])).total_seconds()
    except (TypeError, KeyError, ValueError):
        return recorded


def devices(kind: str, cluster: Mapping[str, Any]) -> int:
    """Devices a job of ``kind`` holds, as the estimate counts them (N times that for N training processes)."""
    return 0 if kind == "cpu" else max(int(cluster[kind].get("gpus") or 0), 1)


def _job_state(state: JobState, slurm: str, outcome: Mapping[str, Any] | None, started: bool) -> tuple[str, str | None]:
    """One job's state for ``--status`` and why (the error line, or what SLURM said)."""
    if state.finished:
        return "done", None
    if slurm in RUNNING:
        return "running", None
    if slurm == "BLOCKED":
        return "blocked", "blocked: an afterok upstream failed, so it can never start (re-submit to replace)"
    if slurm in QUEUED:
        return "queued", None
    error = _error(state, outcome)
    final = slurm.split()[0] if slurm else ""
    if error:
        return "failed", error
    if final in FAILED:
        return "failed", f"SLURM: {slurm} (before it noted an error; see its .err file)"
    if final in ("CANCELLED", "ENDED"):
        return "stopped", f"SLURM: {slurm}; re-submit to run it again"
    return ("pending" if started else "todo"), None


def _error(state: JobState, outcome: Mapping[str, Any] | None) -> str | None:
    """Why an unfinished job failed: its first failed cell's record, else its last attempt's error."""
    if state.failed:
        return state.failed[0] + (f" (+{len(state.failed) - 1} more cells)" if len(state.failed) > 1 else "")
    return str(outcome.get("error")) if outcome and outcome.get("status") == "failed" else None
