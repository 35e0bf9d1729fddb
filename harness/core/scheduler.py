"""What a job owes its scheduler (SLURM through submitit, or Hydra's launcher): the facts recorded with each record, a
clean stop on ``scancel`` (``SystemExit``: ``finally`` blocks release locks), a non-zero exit when its cells failed."""

from __future__ import annotations

import atexit
import functools
import logging
import os
import signal
import socket
import sys
import threading
from typing import Any

log = logging.getLogger(__name__)

#: exit status of a job (or a multirun) whose cells failed, as a single run that fails exits
FAILED_STATUS = 2
#: SLURM's environment variables kept in records, under these names
SLURM_VARS = {"job_id": "SLURM_JOB_ID", "array_job_id": "SLURM_ARRAY_JOB_ID", "array_task_id": "SLURM_ARRAY_TASK_ID",
              "partition": "SLURM_JOB_PARTITION", "restart_count": "SLURM_RESTART_COUNT"}

_FAILED: dict[str, str] = {}   # failed jobs seen by this process: job label -> one-line error


def in_submitit_job() -> bool:
    """True inside a job that submitit started (a SLURM array task, or a submitit_local subprocess)."""
    return bool(os.environ.get("SUBMITIT_EXECUTOR"))


def facts() -> dict[str, Any]:
    """Where and as what this run executes: never part of the run identity."""
    out: dict[str, Any] = {"node": os.environ.get("SLURMD_NODENAME") or socket.gethostname()}
    slurm = {k: os.environ[v] for k, v in SLURM_VARS.items() if os.environ.get(v)}
    if slurm:
        out["slurm"] = slurm
    if in_submitit_job():
        out["submitit"] = {"executor": os.environ["SUBMITIT_EXECUTOR"], "folder": os.environ.get("SUBMITIT_FOLDER")}
    hydra_job = _hydra_job()
    if hydra_job:
        out["hydra"] = hydra_job
    torch = sys.modules.get("torch")   # only when the run loaded it: a record never imports torch for this
    if torch is not None and torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(torch.cuda.current_device())
    return out


def _hydra() -> Any:
    """The running Hydra job's config (None outside the CLI, e.g. in tests)."""
    from hydra.core.hydra_config import HydraConfig
    return HydraConfig.get() if HydraConfig.initialized() else None


def sweep_name() -> str | None:
    """The ``sweep=`` config this run was composed with, if any."""
    hydra = _hydra()
    return hydra.runtime.choices.get("sweep") if hydra is not None else None


def is_multirun() -> bool:
    hydra = _hydra()
    return hydra is not None and str(hydra.mode) == "RunMode.MULTIRUN"


def _hydra_job() -> dict[str, Any]:
    """Hydra's job number and id in a multirun (empty outside one)."""
    from omegaconf import OmegaConf
    hydra = _hydra()
    if hydra is None:
        return {}
    got = {k: OmegaConf.select(hydra.job, k, default=None, throw_on_missing=False) for k in ("num", "id")}
    return {k: v for k, v in got.items() if v is not None}


def _stop(signum: int, frame: Any) -> None:
    name = signal.Signals(signum).name
    log.warning("received %s: stopping; run locks are released and unfinished checkpoints removed", name)
    raise SystemExit(128 + signum)


def stop_on_signals() -> None:
    """SIGTERM unwinds the run (``SystemExit``) instead of being ignored (submitit) or killing it on the spot."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stop)


class JobFailed:
    """A multirun job's return value when its cells failed; unpickling it registers the failure in the launcher."""

    def __init__(self, label: str, error: str) -> None:
        self.label, self.error = label, error

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return _arrived, (self.label, self.error)

    def __repr__(self) -> str:
        return f"JobFailed({self.label!r}: {self.error})"


def _arrived(label: str, error: str) -> JobFailed:
    _FAILED[label] = error
    return JobFailed(label, error)


def job_failed(error: str) -> JobFailed:
    """Note that this multirun job's cells failed; in a submitit job, make the process exit non-zero."""
    label = _label()
    _FAILED[label] = error
    if in_submitit_job():
        exit_nonzero_at_exit()
    return JobFailed(label, error)


def _label() -> str:
    try:
        hydra = _hydra()
        return f"#{hydra.job.num} {' '.join(hydra.overrides.task)}"
    except AttributeError:   # outside Hydra (None), or a job without these
        return "#?"


@functools.cache   # registered once
def exit_nonzero_at_exit() -> None:
    """Exit with :data:`FAILED_STATUS` after a normal finish (submitit's result is written, the launcher reads it)."""
    atexit.register(_exit_failed)


def _exit_failed() -> None:
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(FAILED_STATUS)


def failed_jobs() -> dict[str, str]:
    """The failed jobs this process ran or launched: job label -> one-line error."""
    return dict(_FAILED)
