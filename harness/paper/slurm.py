"""The SLURM executor: the whole graph submitted at once through submitit, one job array per stage, each array
waiting on its upstream arrays with SLURM's own ``afterok`` / ``afterany``. Returns as soon as everything is
queued; nothing stays alive on the login node. A ledger beside the results (job key -> SLURM id) makes a re-submit
resume: finished jobs are skipped (records), jobs still queued or running are not submitted again but waited on;
a pending job that can never start (an ``afterok`` upstream ended FAILED) is cancelled and submitted again, waiting on
the upstream's new attempt.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.paper.graph import Stage
from harness.paper.plan import JobState

#: why a pending job will never start (an ``afterok`` upstream failed): re-submitting replaces it
NEVER = "DependencyNeverSatisfied"


def queue() -> dict[str, tuple[str, str]]:
    """SLURM id (``123_4``) -> (state, reason) of this user's queued jobs, one line per array task; empty where
    SLURM is absent."""
    try:
        out = subprocess.run(["squeue", "-h", "-r", "--me", "-o", "%i|%t|%r"], capture_output=True, text=True,
                             check=False).stdout
    except FileNotFoundError:
        return {}
    return {i: (t, r) for i, t, r in (line.split("|", 2) for line in out.splitlines() if line.count("|") == 2)}


def live_ids(ledger: Mapping[str, str], queued: Mapping[str, tuple[str, str]] | None = None) -> set[str]:
    """The ledger's SLURM ids still queued or running (in ``queued``, a :func:`queue` taken before the records were
    read, else now); pending ones that can never start are cancelled."""
    q = queue() if queued is None else queued
    doomed = sorted({i for i in ledger.values() if q.get(i, ("", ""))[1] == NEVER})
    if doomed:
        subprocess.run(["scancel", *doomed], check=False)
    return {i for i in ledger.values() if i in q and i not in doomed and q[i][0] in LIVE}


#: squeue states of a job that will still run (pending, running, configuring, requeued, suspended, completing)
LIVE = ("PD", "R", "CF", "RQ", "RH", "RF", "RS", "S", "CG")


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
           folder: Path, queued: Mapping[str, tuple[str, str]] | None = None) -> dict[str, list[str]]:
    """Queue every unfinished job; returns stage -> the SLURM ids it runs as (new or already queued). ``queued``:
    the queue as it was before ``states`` were read from the records (else it is read now, and a job that ended in
    between would be neither finished nor queued, and submitted again)."""
    from harness.paper.job import run_job

    ledger_path = folder / "ledger.json"
    ledger: dict[str, str] = json.loads(ledger_path.read_text()) if ledger_path.is_file() else {}
    live = live_ids(ledger, queued)
    ids: dict[str, list[str]] = {}
    for stage in stages:
        todo = [j for j in stage.jobs if not states[j.key].finished]
        queued = [ledger[j.key] for j in stage.jobs if ledger.get(j.key) in live]   # still waited on
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
    return {i: t for i, (t, _) in queue().items()}
