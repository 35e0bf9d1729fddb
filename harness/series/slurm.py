"""``--launcher slurm``: each checkpoint's run is one SLURM array task; a look at the folder that finds new complete
checkpoints submits them as one array (with ``--watch``, as they appear). Nothing stays alive on the login node but
the watch itself.

``<results>/../series/<name>/ledger.json`` maps each run (task, step, weights' fingerprint) to its SLURM id: a run
still queued or running is not submitted again; a finished one has its records (the plan skips it); a failed one
is submitted again by the next look. Jobs run :func:`run_job` through submitit, with the cluster profile's
resources (``conf/cluster/<name>.yaml``: ``eval``, or ``train`` for a task that trains).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.errors import HarnessError, one_line
from harness.results import atomic_write_json
from harness.series.plan import Plan, Unit


def folder_of(plan: Plan) -> Path:
    """Where the series' SLURM bookkeeping lives: ``series/<name>/`` beside the results folder."""
    unit = next(u for u in plan.units if u.config is not None)
    return Path(str(unit.config.paths.results)).resolve().parent / "series" / plan.settings.name


def read_ledger(path: Path) -> dict[str, str]:
    """Run key -> SLURM id; a ledger that is not that is one line naming it and the fix."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        data = exc
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise HarnessError(f"{path} is not a series ledger (run key -> SLURM id; {one_line(str(data))[:80]}): restore "
                           "it, or remove it (runs still queued are then submitted again: scancel them first)")
    return data


def job_spec(plan: Plan, unit: Unit) -> dict[str, Any]:
    """What a job needs to run one checkpoint: the overrides, the checkpoint, its series value (JSON)."""
    return {"overrides": plan.settings.task_overrides(unit.task), "model_path": str(unit.checkpoint.folder),
            "model_name": unit.model_name, "series": unit.series}


def run_job(spec: dict[str, Any]) -> None:
    """One array task: the checkpoint's run through the one loop; a failed cell fails the job."""
    from omegaconf import OmegaConf

    from harness import runner, scheduler
    from harness.compose import compose_config

    scheduler.stop_on_signals()
    cfg = compose_config(spec["overrides"])
    OmegaConf.update(cfg, "model.path", spec["model_path"], merge=False)
    OmegaConf.update(cfg, "model.name", spec["model_name"], merge=False)
    OmegaConf.update(cfg, "series", spec["series"], merge=False)
    runner.run(cfg)


class Submitter:
    """The SLURM launcher of one command: each run is submitted at most once by it (a watch does not resubmit a job
    that failed every poll: it reports it; the next command submits it again)."""

    def __init__(self, cluster: dict[str, Any]) -> None:
        self.cluster = cluster
        self.submitted: dict[str, str] = {}   # run key -> SLURM id, by this command

    def __call__(self, plan: Plan) -> tuple[dict[str, str], int]:
        from harness.paper.slurm import LIVE, queue

        if not plan.todo:
            return {}, 0
        q = queue()
        live = {k for k, i in self.submitted.items() if q.get(i, ("", ""))[0] in LIVE}
        failures = {u.key: f"SLURM job {self.submitted[u.key]} ended without every record (its log: "
                           f"{folder_of(plan) / 'jobs' / self.submitted[u.key]})"
                    for u in plan.todo if u.key in self.submitted and u.key not in live}
        todo = [u for u in plan.todo if u.key not in self.submitted]
        started = submit(Plan(plan.settings, todo, plan.ignored), self.cluster, q) if todo else {}
        self.submitted |= started
        return failures, len(started)


def submit(plan: Plan, cluster: dict[str, Any], q: dict[str, tuple[str, str]]) -> dict[str, str]:
    """Submit the plan's runs that are not queued or running already (``q``: the queue), as one array; returns run
    key -> SLURM id of what it submitted. The ledger is written as soon as sbatch has answered."""
    from submitit.core.utils import FailedJobError

    from harness.paper.slurm import LIVE, executor

    folder = folder_of(plan)
    ledger = read_ledger(folder / "ledger.json")
    todo = [u for u in plan.todo if q.get(ledger.get(u.key, ""), ("", ""))[0] not in LIVE]
    if not todo:
        return {}
    trains = any(bool(u.config.task.get("train")) for u in todo)
    ex = executor(folder / "jobs", f"series-{plan.settings.name}", cluster, "train" if trains else "eval")
    try:
        jobs = ex.map_array(run_job, [job_spec(plan, u) for u in todo])
    except (FailedJobError, OSError) as exc:
        raise HarnessError(f"sbatch refused the series' {len(todo)} jobs: {one_line(exc)[-300:]}; fix the cause "
                           "and run the command again (nothing of these was submitted)") from None
    for unit, job in zip(todo, jobs, strict=True):
        ledger[unit.key] = str(job.job_id)
        print(f"[series {plan.settings.name}] step {unit.step}: submitted as SLURM job {job.job_id}", flush=True)
    atomic_write_json(folder / "ledger.json", ledger)
    return {u.key: ledger[u.key] for u in todo}
