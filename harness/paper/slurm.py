"""The SLURM executor: the whole graph submitted at once through submitit, one job array per step waiting on its
upstream arrays; ``ledger.json`` and ``attempts.json`` keep each job's SLURM id and end after SLURM forgets it. A
re-submit resumes, replacing a job that can never start (or waits on stale attempts) and everything downstream."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from harness.core.errors import HarnessError
from harness.core.results import atomic_write_json
from harness.paper.graph import Step
from harness.paper.progress import JobState

#: why a pending job will never start (an ``afterok`` upstream failed): re-submitting replaces it
NEVER = "DependencyNeverSatisfied"
#: squeue states of a job that will still run: running (configuring, completing), queued (pending, requeued, suspended)
RUNNING, QUEUED = ("R", "CG", "CF"), ("PD", "RQ", "RH", "RF", "RS", "S")
LIVE = RUNNING + QUEUED
#: scheduler states of a job that has ended without doing its work, and of any job that has ended
FAILED = ("FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "PREEMPTED")
ENDED = ("COMPLETED", "CANCELLED", *FAILED)
REPLACED = "CANCELLED (replaced by a re-submit)"


def queue() -> dict[str, tuple[str, str]]:
    """SLURM id (``123_4``) -> (state, reason) of this user's queued array tasks; empty where SLURM is absent."""
    try:
        out = subprocess.run(["squeue", "-h", "-r", "--me", "-o", "%i|%t|%r"], capture_output=True, text=True,
                             check=False).stdout
    except FileNotFoundError:
        return {}
    return {i: (t, r) for i, t, r in (line.split("|", 2) for line in out.splitlines() if line.count("|") == 2)}


# ------------------------------------------------------------------------------------------------ ledger
#: what to do with a ledger file that cannot be trusted, for its error line
LEDGER_FIX = ("restore it, or remove ledger.json and attempts.json to start the graph's bookkeeping afresh (jobs "
              "still queued are then not tracked: cancel them with scancel, then re-submit)")
SLURM_ID = re.compile(r"\d+(_\d+)?")


def read_ledger(folder: Path) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """``ledger.json`` (job key -> SLURM id) and ``attempts.json`` (SLURM id -> key, after, state), shape-checked: a
    bad file is one line naming it and the fix (never an empty ledger, which would resubmit every queued job)."""
    ledger, attempts = (_read_json(folder / name) for name in ("ledger.json", "attempts.json"))
    for key, i in ledger.items():
        if not isinstance(i, str) or not SLURM_ID.fullmatch(i):
            _bad(folder / "ledger.json", f"maps job {key!r} to {json.dumps(i)[:60]}, not to a SLURM id like \"123_4\"")
    for i, entry in attempts.items():
        if not isinstance(entry, dict):
            _bad(folder / "attempts.json", f"has {json.dumps(entry)[:60]} for SLURM id {i!r}, not an object with "
                 "key, after and state")
        after, state = entry.get("after") or [], entry.get("state")
        if not isinstance(entry.get("key", ""), str) or not isinstance(after, list) \
                or not all(isinstance(a, str) for a in after) or not isinstance(state, str | None):
            _bad(folder / "attempts.json", f"has {json.dumps(entry)[:80]} for SLURM id {i!r}: key must be a job key, "
                 "after a list of SLURM ids, state a string or null")
    return ledger, attempts


def _read_json(path: Path) -> dict[str, Any]:
    """A ledger file's object ({} where the file is absent)."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        _bad(path, f"cannot be read ({exc.strerror or exc})")
    except ValueError as exc:
        _bad(path, f"is not valid JSON ({' '.join(str(exc).split())})")
    if not isinstance(data, dict):
        _bad(path, f"is a JSON {type(data).__name__}, not an object")
    return data


def _bad(path: Path, what: str) -> NoReturn:
    role = "job key -> SLURM id" if path.name == "ledger.json" else "SLURM id -> its job, waits and final state"
    raise HarnessError(f"{path} {what} (it maps {role}): {LEDGER_FIX}")


def write_ledger(folder: Path, ledger: Mapping[str, str], attempts: Mapping[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(folder / "attempts.json", dict(attempts))
    atomic_write_json(folder / "ledger.json", dict(ledger))


def ended_states(ids: Sequence[str]) -> dict[str, str]:
    """SLURM id -> final state (``FAILED exit 2:0``) of the ended ``ids``, from ``scontrol``, else ``sacct``."""
    out: dict[str, str] = {}
    try:
        text = subprocess.run(["scontrol", "-o", "show", "job"], capture_output=True, text=True, check=False,
                              timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return out
    wanted = set(ids)
    for line in text.splitlines():
        info = dict(f.split("=", 1) for f in line.split() if "=" in f)
        task = info.get("ArrayTaskId")
        i = f"{info.get('ArrayJobId')}_{task}" if task and task.isdigit() else info.get("JobId", "")
        if i in wanted and info.get("JobState") in ENDED:
            out[i] = f"{info['JobState']} exit {info.get('ExitCode', '?')}"
    missing = [i for i in ids if i not in out]
    if missing:
        try:
            text = subprocess.run(["sacct", "-n", "-P", "-X", "-o", "JobID,State,ExitCode", "-j", ",".join(missing)],
                                  capture_output=True, text=True, check=False, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            return out
        for line in text.splitlines():
            i, state, code = [*line.split("|"), "", ""][:3]
            if i in missing and state.split()[:1] and state.split()[0] in ENDED:
                out[i] = f"{state.split()[0]} exit {code}"
    return out


def note_ended(ledger: Mapping[str, str], attempts: dict[str, dict[str, Any]],
               q: Mapping[str, tuple[str, str]]) -> bool:
    """Record the final state of every attempt no longer in the queue ``q``; True when something was noted."""
    for key, i in ledger.items():
        attempts.setdefault(i, {"key": key, "after": [], "state": None})
    gone = [i for i, a in attempts.items() if not a.get("state") and q.get(i, ("", ""))[0] not in LIVE]
    got = ended_states(gone) if gone else {}
    for i, state in got.items():
        attempts[i]["state"] = state
    return bool(got)


def job_states(folder: Path) -> dict[str, str]:
    """Job key -> its current attempt's state for ``--status`` (the queue's, else the noted final state)."""
    ledger, attempts = read_ledger(folder)
    if not ledger:
        return {}
    q = queue()
    if note_ended(ledger, attempts, q):
        write_ledger(folder, ledger, attempts)
    out = {}
    for key, i in ledger.items():
        state, reason = q.get(i, ("", ""))
        out[key] = ("BLOCKED" if reason == NEVER else state) if state in LIVE else attempts[i].get("state") or "ENDED"
    return out


# ------------------------------------------------------------------------------------------------ submission
def _array(i: str) -> str:
    return i.split("_")[0]


def decide(steps: Sequence[Step], states: Mapping[str, JobState], ledger: Mapping[str, str],
           attempts: Mapping[str, Mapping[str, Any]], live: set[str]) -> tuple[set[str], dict[str, list[str]]]:
    """Which jobs are kept (queued or running on current attempts) and which are submitted (step -> keys)."""
    kept: set[str] = set()
    new: dict[str, list[str]] = {}
    for step in steps:
        stale = any(new.get(up) for up, _ in step.after)
        upstream = {_array(ledger[j.key]) for up, _ in step.after for s in steps if s.name == up for j in s.jobs
                    if j.key in kept}
        for j in step.jobs:
            i = ledger.get(j.key)
            after = {_array(a) for a in (attempts.get(i or "", {}).get("after") or [])}
            if i in live and not stale and upstream <= after:
                kept.add(j.key)
            elif stale or i in live or not states[j.key].finished:
                new.setdefault(step.name, []).append(j.key)
    return kept, new


def executor(folder: Path, name: str, cluster: Mapping[str, Any], res: Mapping[str, Any], dependency: str | None
             ) -> Any:
    """A submitit executor of arrays ``name`` asking ``res`` (:meth:`Step.resources`), logs in ``folder/<id>``."""
    import submitit
    ex = submitit.AutoExecutor(folder=folder / "%j", cluster="slurm")
    params: dict[str, Any] = {
        "name": name, "timeout_min": int(res["timeout_min"]), "cpus_per_task": int(res["cpus"]),
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


def _cancel(steps: Sequence[Step], ledger: Mapping[str, str], attempts: dict[str, dict[str, Any]],
            kept: set[str], q: Mapping[str, tuple[str, str]]) -> None:
    """Cancel every queued job not kept, downstream first (no ``afterany`` dependent starts before its own cancel)."""
    for step in reversed(steps):
        doomed = [ledger[j.key] for j in step.jobs if j.key not in kept and q.get(ledger.get(j.key, ""),
                                                                                       ("", ""))[0] in LIVE]
        if doomed:
            subprocess.run(["scancel", *doomed], check=False)
            for i in doomed:
                attempts[i]["state"] = REPLACED


def submit(steps: Sequence[Step], states: Mapping[str, JobState], context: Path, cluster: Mapping[str, Any],
           folder: Path, queued: Mapping[str, tuple[str, str]] | None = None) -> dict[str, list[str]]:
    """Queue every job :func:`decide` picks, writing the ledger after each step; step -> its SLURM ids."""

    ledger, attempts = read_ledger(folder)
    q = queue() if queued is None else queued
    note_ended(ledger, attempts, q)
    live = {i for i in ledger.values() if q.get(i, ("", ""))[0] in LIVE and q[i][1] != NEVER}
    kept, new = decide(steps, states, ledger, attempts, live)
    _cancel(steps, ledger, attempts, kept, q)
    ids: dict[str, list[str]] = {}
    for step in steps:
        ids[step.name] = [ledger[j.key] for j in step.jobs if j.key in kept]
        keys = new.get(step.name)
        if not keys:
            continue
        after = [(cond, ids[up]) for up, cond in step.after if ids.get(up)]
        ex = executor(folder, f"paper-{step.name}", cluster, step.resources(cluster),
                      ",".join(f"{c}:{':'.join(w)}" for c, w in after) or None)
        jobs = _sbatch(ex, step.name, context, keys)
        for key, sj in zip(keys, jobs, strict=True):
            ledger[key] = str(sj.job_id)
            attempts[ledger[key]] = {"key": key, "after": [i for _, w in after for i in w], "state": None}
        ids[step.name].append(_array(str(jobs[0].job_id)))
        write_ledger(folder, ledger, attempts)
    write_ledger(folder, ledger, attempts)
    return ids


def _sbatch(ex: Any, step: str, context: Path, keys: list[str]) -> list[Any]:
    """One step's array through submitit; a refusal is one line (earlier steps stay submitted, a re-submit goes on)."""
    from submitit.core.utils import FailedJobError

    from harness.paper.job import run_job
    try:
        return ex.map_array(run_job, [str(context)] * len(keys), keys)
    except (FailedJobError, OSError) as exc:
        said = " ".join(str(exc).split()) or type(exc).__name__
        raise HarnessError(f"sbatch refused step {step} ({len(keys)} jobs): {said[-300:]}; the steps before it "
                           "are submitted and in the ledger: fix the cause and submit again") from None
