"""The SLURM executor: the whole graph submitted at once through submitit, one job array per stage, each array
waiting on its upstream arrays with SLURM's own ``afterok`` / ``afterany``. Returns as soon as everything is
queued; nothing stays alive on the login node. A ledger beside the results (job key -> SLURM id) makes a re-submit
resume: finished jobs are skipped (records), jobs still queued or running are not submitted again but waited on.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.paper.graph import Stage
from harness.paper.plan import JobState


def live_ids() -> set[str]:
    """SLURM ids (``123`` and ``123_4``) of this user's jobs that are pending or running."""
    out = subprocess.run(["squeue", "-h", "-r", "--me", "-t", "PD,R,CF,RQ,S", "-o", "%i"], capture_output=True,
                         text=True, check=False).stdout
    return {i for line in out.split() for i in (line, line.split("_")[0])}


def _executor(folder: Path, stage: Stage, cluster: Mapping[str, Any], dependency: str | None) -> Any:
    import submitit

    res = cluster[stage.kind]
    ex = submitit.AutoExecutor(folder=folder / "%j", cluster="slurm")
    params: dict[str, Any] = {
        "name": f"paper-{stage.name}", "timeout_min": int(res["timeout_min"]), "cpus_per_task": int(res["cpus"]),
        "mem_gb": float(res["mem_gb"]), "slurm_array_parallelism": int(cluster.get("array_parallelism", 64)),
        "slurm_setup": list(cluster.get("setup") or []),
    }
    if res.get("partition"):
        params["slurm_partition"] = str(res["partition"])
    if int(res.get("gpus") or 0) > 0:
        params["gpus_per_node"] = int(res["gpus"])
    if dependency:
        params["slurm_additional_parameters"] = {"dependency": dependency}
    ex.update_parameters(**params)
    return ex


def submit(stages: Sequence[Stage], states: Mapping[str, JobState], context: Path, cluster: Mapping[str, Any],
           folder: Path) -> dict[str, list[str]]:
    """Queue every unfinished job; returns stage -> the SLURM ids it runs as (new or already queued)."""
    from harness.paper.job import run_job

    ledger_path = folder / "ledger.json"
    ledger: dict[str, str] = json.loads(ledger_path.read_text()) if ledger_path.is_file() else {}
    live = live_ids()
    ids: dict[str, list[str]] = {}
    for stage in stages:
        todo = [j for j in stage.jobs if not states[j.key].finished]
        queued = [ledger[j.key] for j in todo if ledger.get(j.key) in live]
        new = [j for j in todo if ledger.get(j.key) not in live]
        deps = [f"{cond}:{':'.join(ids[up])}" for up, cond in stage.after if ids.get(up)]
        ids[stage.name] = list(queued)
        if new:
            ex = _executor(folder, stage, cluster, ",".join(deps) or None)
            jobs = ex.map_array(run_job, [str(context)] * len(new), [j.key for j in new])
            for j, sj in zip(new, jobs, strict=True):
                ledger[j.key] = str(sj.job_id)
            ids[stage.name].append(str(jobs[0].job_id).split("_")[0])
    folder.mkdir(parents=True, exist_ok=True)
    ledger_path.write_text(json.dumps(ledger, indent=1))
    return ids


def queue_states() -> dict[str, str]:
    """SLURM id -> state (PD, R, ...) of this user's queued jobs; empty where SLURM is absent."""
    try:
        out = subprocess.run(["squeue", "-h", "-r", "--me", "-o", "%i %t"], capture_output=True, text=True,
                             check=False).stdout
    except FileNotFoundError:
        return {}
    return dict(line.split() for line in out.splitlines() if len(line.split()) == 2)
