"""The SLURM path on a real cluster (slurm/local-cluster.sh: one node, partition `local`, no GPUs, no accounting):
multiruns submitted through `hydra/launcher=slurm_cpu`, what SLURM says of their jobs, what they leave behind.

Every test names its jobs uniquely and cancels them when it ends, passed or not. Jobs run this checkout's code
(PYTHONPATH) with this interpreter (submitit submits `sys.executable`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_glue_runs import ENV, REPO, tiny_overrides, write_tiny_glue

from harness.core import results

pytestmark = pytest.mark.slurm
JOB_ENV = {**ENV, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), ENV.get("PYTHONPATH")) if p)}
DONE_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
               "DEADLINE"}


@pytest.fixture()
def job_name() -> Iterator[str]:
    """A unique SLURM job name; every job of it is cancelled when the test ends."""
    name = f"harness-test-{uuid.uuid4().hex[:8]}"
    try:
        yield name
    finally:
        subprocess.run(["scancel", f"--name={name}"], capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def glue(tmp_path_factory) -> Path:
    return write_tiny_glue(tmp_path_factory.mktemp("glue"))


def slurm_multirun(work: Path, name: str, *overrides: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """``python -m harness -m ...`` on the local cluster's CPU partition (blocks until the jobs have ended)."""
    cmd = [sys.executable, "-m", "harness", "-m", *overrides, "hydra/launcher=slurm_cpu",
           "hydra.launcher.partition=local", f"hydra.launcher.name={name}", f"hydra.sweep.dir={work}/multirun"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO, env=JOB_ENV)


def job_ids(work: Path) -> list[str]:
    """The SLURM ids (``<array>_<task>``) of the jobs submitit submitted for this multirun."""
    folder = work / "multirun" / ".submitit"
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name.partition("_")[0].isdigit())


def job_state(job: str) -> dict[str, str]:
    """``scontrol show job``'s fields (accounting is off here, so no sacct)."""
    out = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, timeout=30).stdout
    return dict(f.split("=", 1) for f in out.split() if "=" in f)


def final_state(job: str, wait: float = 60) -> dict[str, str]:
    """The job's fields once it has ended (a job can still be exiting when submitit has read its result)."""
    deadline = time.monotonic() + wait
    while True:
        state = job_state(job)
        if state.get("JobState") in DONE_STATES or time.monotonic() > deadline:
            return state
        time.sleep(1)


def wait_for(condition, what: str, wait: float = 120) -> None:
    deadline = time.monotonic() + wait
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.5)


def point(glue: Path, work: Path, *extra: str) -> list[str]:
    return [*tiny_overrides(glue, work), "task.tasks=rte", "task.weight_decay=0", "task.epochs=1", "task.seed=1", *extra]


def test_cpu_profile_runs_a_multirun_and_records_scheduler_facts(glue, tmp_path, job_name):
    """Defect 1 (no CPU profile: every job asked for a GPU) and 5 (records carry no scheduler facts)."""
    done = slurm_multirun(tmp_path, job_name, *point(glue, tmp_path, "task.lr=1e-4,3e-4"))
    assert done.returncode == 0, done.stderr[-3000:]
    recs = [r for _, r in results.iter_records(tmp_path / "results")]
    assert sorted(r.hyperparameters["lr"] for r in recs) == [1e-4, 3e-4] and {r.status for r in recs} == {"ok"}
    jobs = job_ids(tmp_path)
    array = jobs[0].split("_")[0]
    for r in recs:
        slurm = r.scheduler["slurm"]
        assert slurm["array_job_id"] == array and f"{array}_{slurm['array_task_id']}" in jobs
        assert slurm["partition"] == "local" and r.scheduler["node"] and r.scheduler["submitit"]["executor"] == "slurm"
        assert r.scheduler["hydra"]["num"] in (0, 1)
    assert {final_state(j)["JobState"] for j in jobs} == {"COMPLETED"}

    # the scheduler facts are not part of the run identity: the same sweep in-process finds every record
    again = subprocess.run([sys.executable, "-m", "harness", "-m", *point(glue, tmp_path, "task.lr=1e-4,3e-4"),
                            f"hydra.sweep.dir={tmp_path}/again"], capture_output=True, text=True, timeout=600,
                           cwd=REPO, env=JOB_ENV)
    assert again.returncode == 0, again.stderr[-3000:]
    assert {(r.run_id, r.created_at) for _, r in results.iter_records(tmp_path / "results")} == \
        {(r.run_id, r.created_at) for r in recs}


def test_job_with_a_failed_cell_ends_failed(glue, tmp_path, job_name):
    """Defect 3: a job whose cell failed (a diverged run) ends FAILED in SLURM, its sibling COMPLETED, and the
    submitting multirun exits non-zero."""
    done = slurm_multirun(tmp_path, job_name, *point(glue, tmp_path, "task.lr=1e-4,1e30"))
    assert done.returncode == 2, done.stderr[-3000:]
    assert "diverged" in done.stderr.splitlines()[-1]
    recs = {r.hyperparameters["lr"]: r for _, r in results.iter_records(tmp_path / "results")}
    assert recs[1e-4].status == "ok" and recs[1e30].status == "failed"
    states = {}
    for job in job_ids(tmp_path):
        state = final_state(job)
        states[state["ArrayTaskId"]] = (state["JobState"], state["ExitCode"])
    by_lr = {str(r.scheduler["slurm"]["array_task_id"]): lr for lr, r in recs.items()}
    assert {by_lr[t]: s for t, s in states.items()} == {1e-4: ("COMPLETED", "0:0"), 1e30: ("FAILED", "2:0")}


def test_staging_check_refuses_before_submitting(glue, tmp_path, job_name):
    """Defect 2 on the cluster: a GLUE sweep that would start RTE beside MNLI submits nothing."""
    done = slurm_multirun(tmp_path, job_name, "sweep=glue-paper", *tiny_overrides(glue, tmp_path),
                          "task.tasks=mnli,rte", "hydra.sweeper.max_batch_size=null", timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("error: this multirun would start MNLI-chained jobs")
    assert not (tmp_path / "multirun" / ".submitit").exists() and not list(tmp_path.rglob("*.json"))
    queued = subprocess.run(["squeue", "-h", f"--name={job_name}"], capture_output=True, text=True, timeout=30)
    assert queued.stdout.strip() == ""


def test_scancel_releases_the_lock_and_removes_the_unfinished_checkpoint(glue, tmp_path, job_name):
    """Defect 5: a cancelled run leaves no ``.lock`` and no half-written ``trainer/`` folder."""
    run = subprocess.Popen(
        [sys.executable, "-m", "harness", "-m", *point(glue, tmp_path, "task.lr=1e-4", "task.epochs=1000",
                                                       "task.early_stopping.patience=1000",
                                                       "task.scoring_protocol=best_epoch"),   # checkpoints
         "hydra/launcher=slurm_cpu", "hydra.launcher.partition=local", f"hydra.launcher.name={job_name}",
         f"hydra.sweep.dir={tmp_path}/multirun"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO, env=JOB_ENV)
    try:
        locks = lambda: list((tmp_path / "results").rglob(".lock"))   # noqa: E731
        trainers = lambda: list((tmp_path / "outputs").rglob("trainer"))   # noqa: E731
        wait_for(lambda: locks() and trainers() and any(trainers()[0].iterdir()), "a checkpoint being written")
        subprocess.run(["scancel", f"--name={job_name}"], check=True, timeout=30)
        assert final_state(job_ids(tmp_path)[0])["JobState"] in DONE_STATES
        wait_for(lambda: not locks() and not trainers(), "the cancelled run's lock and trainer/ to go", wait=60)
        assert not list((tmp_path / "results").rglob("*.json"))   # and it wrote no record
    finally:
        run.kill()
        run.wait(timeout=30)
