"""``task.devices=N``: a training on N processes of this node, started by torch.distributed's elastic launcher as
``torchrun --standalone`` starts them (a c10d rendezvous on a free local port, one worker per device, no restarts);
under SLURM, inside the job's own allocation (one task holding N GPUs, or N CPUs). Each worker is a rank of the
trainers' own data parallelism (transformers' Trainer through accelerate: DDP over gloo on CPU, NCCL on GPUs);
:mod:`harness.training.ranks` makes the N processes take one process's micro-batches and steps.

Why the elastic launcher and not ``torch.multiprocessing.spawn``: it sets every rank's environment (``RANK``,
``WORLD_SIZE``, the rendezvous) as torchrun does, watches the workers, stops the others when one fails, and reports
which rank failed with its error (its ``@record`` error file), which is what the run's error line says.
"""

from __future__ import annotations

import logging
import os
import signal
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.console import configure
from harness.errors import HarnessError, TrainingDivergedError, one_line

log = logging.getLogger(__name__)

#: the signals torch's elastic agent takes over while it runs (restored after: the harness's own SIGTERM handler)
SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")


def check_devices(n: int, device: str) -> None:
    """Before any work: N processes need N visible GPUs on a CUDA device (GPUs 0..N-1 of ``CUDA_VISIBLE_DEVICES``);
    on CPU they share the cores. One line naming the fix otherwise."""
    if n == 1:
        return
    if device.startswith("cuda"):
        if ":" in device and device != "cuda:0":
            raise HarnessError(f"task.devices={n} trains on GPUs 0..{n - 1}, not from {device}: set device=cuda and "
                               "pick the GPUs with CUDA_VISIBLE_DEVICES")
        import torch

        visible = torch.cuda.device_count()
        if visible < n:
            raise HarnessError(f"task.devices={n} needs {n} GPUs but {visible} are visible: set task.devices<="
                               f"{visible}, or make more visible (CUDA_VISIBLE_DEVICES, SLURM's --gpus)")
    elif device != "cpu":
        raise HarnessError(f"task.devices={n} runs one process per GPU (CUDA) or on the CPU (gloo), not on "
                           f"device={device}: set device=cuda or device=cpu, or task.devices=1")


def run_on_devices(fn: Callable[..., Any], args: tuple[Any, ...], n: int, device: str, workdir: Path) -> Any:
    """``fn(*args)`` in ``n`` processes (ranks 0..n-1; ``fn`` must be importable: a module-level function), on
    ``device``'s GPUs 0..n-1 or on the CPU; returns rank 0's return value. A rank that fails stops the others and
    raises here with its error line (:class:`TrainingDivergedError` where it diverged). ``workdir``: the
    launcher's logs and error files (the caller removes it)."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=n, run_id=str(uuid.uuid4()),
                          rdzv_backend="c10d", rdzv_endpoint="localhost:0", max_restarts=0, monitor_interval=0.5,
                          start_method="spawn", logs_specs=DefaultLogsSpecs(log_dir=str(workdir / "ranks")))
    log.info("training on %d processes (%s)", n, "GPUs 0.." + str(n - 1) if device.startswith("cuda") else "CPU, gloo")
    with _launching(n, device):
        try:
            out = elastic_launch(config, _rank)(fn, args)
        except ChildFailedError as exc:
            raise failure(exc, n) from None
        except SignalException as exc:     # SIGTERM (scancel): the agent stopped the ranks; unwind as the harness does
            raise SystemExit(128 + int(exc.sigval)) from None
    return out[0]


def _rank(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """One rank: its console (rank 0 speaks, the others only on errors), then ``fn``."""
    rank = int(os.environ.get("RANK", "0"))
    level = int(os.environ.get("HARNESS_RANK_LOG_LEVEL", logging.INFO)) if rank == 0 else logging.ERROR
    logging.basicConfig(level=level, format="%(message)s")
    configure()
    return fn(*args)


@contextmanager
def _launching(n: int, device: str) -> Iterator[None]:
    """While the agent runs. What the ranks inherit besides the launcher's variables: the level of this run's
    progress lines (rank 0 prints them) and, on CPU, an equal share of this process's threads (``OMP_NUM_THREADS``,
    unless set: else accelerate gives each rank the machine's physical cores / N, however few of them this job
    holds). The launcher's own log of a failure (tracebacks of the agent) off the console: the run's error line says
    it. Afterwards, the process's signal handlers as they were before the elastic agent set its own."""
    import torch

    env = {"HARNESS_RANK_LOG_LEVEL": str(logging.getLogger("harness.progress").getEffectiveLevel())}
    if device == "cpu" and not os.environ.get("OMP_NUM_THREADS"):
        env["OMP_NUM_THREADS"] = str(max(1, torch.get_num_threads() // n))
    before = {k: os.environ.get(k) for k in env}
    kept = {name: signal.getsignal(getattr(signal, name)) for name in SIGNALS if hasattr(signal, name)}
    agent = logging.getLogger("torch.distributed.elastic")
    level = agent.level
    os.environ.update(env)
    agent.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        agent.setLevel(level)
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        for name, handler in kept.items():
            if handler is not None:
                signal.signal(getattr(signal, name), handler)


#: what a rank says when another rank is gone (the collective it waited in broke): never the root cause
SECONDARY = ("DistBackendError", "gloo", "NCCL", "Connection closed by peer", "Connection reset by peer",
             "Broken pipe")


def failure(exc: Any, n: int) -> HarnessError:
    """The run's error for a failed launch: the root cause's error line (a rank's own error, or the signal that
    killed it, before the errors of ranks whose collective broke because of it), and which ranks failed."""
    failed = sorted(((r, _said(f), f.timestamp) for r, f in exc.failures.items()),
                    key=lambda x: (any(s in x[1] for s in SECONDARY), x[2], x[0]))
    rank, said, _ = failed[0]
    harness = {c.__name__ for c in (HarnessError, *_subclasses(HarnessError))}
    name, _, rest = said.partition(": ")
    cls = TrainingDivergedError if name == TrainingDivergedError.__name__ else HarnessError
    said = rest if name in harness and rest else said
    others = "".join(f"; then rank {r}: {_short(m)}" for r, m, _ in failed[1:])
    return cls(f"training process rank {rank} of {n} failed: {said}{others} (the other processes were stopped; "
               "nothing was saved)")


def _short(message: str, limit: int = 160) -> str:
    return message if len(message) <= limit else message[: limit - 3] + "..."


def _said(f: Any) -> str:
    """A failed rank's error line: its exception (``Type: message``, from its error file), or the signal that killed
    it (``Signal 9 (SIGKILL) received by PID ...``)."""
    message = f.message.get("message") if isinstance(f.message, dict) else f.message
    return one_line(message or f"exit code {f.exitcode}")


def _subclasses(cls: type) -> list[type]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_subclasses(sub))]
