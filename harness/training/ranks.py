"""``task.devices=N``: a training on N processes of this node, started by torch.distributed's elastic launcher as
``torchrun --standalone`` does (it sets every rank's environment, stops the others when one fails and says which),
each a rank of the trainers' own data parallelism (DDP over gloo on CPU, NCCL on GPUs), taking one process's steps.

Accelerate's ``BatchSamplerShard`` hands rank r the micro-batches r, r + N, ... of the sampler every rank iterates
alike, k = accumulation / N per step, so every rank's step j covers one process's step j. What accelerate leaves to
us (:class:`StepBatches`): an epoch's last, shorter step of R micro-batches (the round filled with copies counting 0,
each real one 1/R; gathered negatives: the R mod N last dropped); a shorter epoch than planned (NO_DUPLICATES: the
incomplete group is not handed out); the epoch of a sampler accelerate does not wrap (:class:`EpochStart`)."""

from __future__ import annotations

import logging
import math
import os
import signal
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import BatchSampler
from transformers import TrainerCallback

from harness.core.console import configure
from harness.core.errors import HarnessError, TrainingDivergedError, one_line

log = logging.getLogger(__name__)

#: the signals torch's elastic agent takes over while it runs (restored after: the harness's own SIGTERM handler)
SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")


def check_devices(n: int, device: str) -> None:
    """Before any work: N processes need N visible GPUs on CUDA (CPU: cores shared); else one line with the fix."""
    if n == 1:
        return
    if device.startswith("cuda"):
        if ":" in device and device != "cuda:0":
            raise HarnessError(f"task.devices={n} trains on GPUs 0..{n - 1}, not from {device}: set device=cuda and "
                               "pick the GPUs with CUDA_VISIBLE_DEVICES")
        visible = torch.cuda.device_count()
        if visible < n:
            raise HarnessError(f"task.devices={n} needs {n} GPUs but {visible} are visible: set task.devices<="
                               f"{visible}, or make more visible (CUDA_VISIBLE_DEVICES, SLURM's --gpus)")
    elif device != "cpu":
        raise HarnessError(f"task.devices={n} runs one process per GPU (CUDA) or on the CPU (gloo), not on "
                           f"device={device}: set device=cuda or device=cpu, or task.devices=1")


def run_on_devices(fn: Callable[..., Any], args: tuple[Any, ...], n: int, device: str, workdir: Path) -> Any:
    """``fn(*args)`` in ``n`` processes on ``device``'s GPUs 0..n-1 or the CPU; rank 0's value, or the error."""
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
    level = int(os.environ.get("HARNESS_RANK_LOG_LEVEL", logging.INFO)) if rank() == 0 else logging.ERROR
    logging.basicConfig(level=level, format="%(message)s")
    configure()
    return fn(*args)


@contextmanager
def _launching(n: int, device: str) -> Iterator[None]:
    """While the agent runs: the ranks' log level and threads set, the launcher's failure log quiet; then restored."""
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
SECONDARY = ("DistBackendError", "gloo", "NCCL", "Connection closed by peer", "Connection reset by peer", "Broken pipe")


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
    """A failed rank's error line: its exception (``Type: message``) or the signal (``Signal 9 (SIGKILL) ...``)."""
    message = f.message.get("message") if isinstance(f.message, dict) else f.message
    return one_line(message or f"exit code {f.exitcode}")


def _subclasses(cls: type) -> list[type]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_subclasses(sub))]


# ------------------------------------------------------------------------------------------ one rank
def world() -> int:
    """How many processes this training runs on (torch.distributed's launcher sets ``WORLD_SIZE``)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    """This process's rank among them (0: the one that writes)."""
    return int(os.environ.get("RANK", "0"))


def barrier() -> None:
    """Wait for every process of the training (a no-op on one process)."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


@dataclass(frozen=True)
class Tail:
    """An epoch's shorter last step: from ``start``, ``real`` micro-batches, then ``pads`` copies counting nothing."""

    start: int
    real: int
    pads: int


class StepBatches(BatchSampler):
    """One process's micro-batches cut where ``world`` processes can share them (the last step padded, or cut)."""

    def __init__(self, inner: Any, world: int, group: int, pad: bool = True) -> None:
        self.inner, self.world, self.group, self.pad = inner, world, group, pad
        self.batch_size = getattr(inner, "batch_size", None)
        self.drop_last = getattr(inner, "drop_last", False)
        self.tail: Tail | None = None

    @property
    def sampler(self) -> Any:
        """The inner index sampler: accelerate replaces a RandomSampler by its seeded one here, as on one process."""
        return getattr(self.inner, "sampler", None)

    @sampler.setter
    def sampler(self, value: Any) -> None:
        self.inner.sampler = value

    def set_epoch(self, epoch: int) -> None:
        if hasattr(self.inner, "set_epoch"):
            self.inner.set_epoch(epoch)

    def __len__(self) -> int:
        planned = len(self.inner)
        if self.pad:
            return math.ceil(planned / self.world) * self.world
        return planned - (planned % self.group) % self.world

    def __iter__(self) -> Iterator[list[int]]:
        self.tail = None
        planned, done, held = len(self.inner), 0, []
        for batch in self.inner:
            held.append(batch)
            if len(held) == self.group:
                yield from held
                done, held = done + len(held), []
        if not held or done + len(held) != planned:
            return                       # a group one process would not apply (or none): not handed out
        if not self.pad:
            yield from held[: len(held) - len(held) % self.world]
            return
        pads = -len(held) % self.world
        self.tail = Tail(done, len(held), pads)
        yield from held + [held[-1]] * pads

    def factor(self, i: int, rank: int, per_rank: int) -> float:
        """What rank ``rank``'s ``i``-th micro-batch loss is multiplied by beside the trainer's 1/``per_rank``: 1 in
        whole steps; in the padded last step, world x per_rank / R for real ones (1/R after DDP's mean), 0 for
        copies."""
        position = i * self.world + rank
        if self.tail is None or position < self.tail.start:
            return 1.0
        if position - self.tail.start >= self.tail.real:
            return 0.0
        return self.world * per_rank / self.tail.real


class EpochStart(TrainerCallback):
    """Each epoch: the sampler's epoch set, micro-batches counted anew; at the end, the loss logged gathered."""

    def __init__(self, trainer: Any) -> None:
        self.trainer, self.epoch = trainer, 0

    def on_train_begin(self, args, state, control, **kwargs):
        self.epoch = 0

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.trainer.micro_batch = 0
        if self.trainer.step_batches is not None:
            self.trainer.step_batches.set_epoch(self.epoch)
        self.epoch += 1

    def on_epoch_end(self, args, state, control, **kwargs):
        if control.should_training_stop or self.epoch >= math.ceil(args.num_train_epochs):
            control.should_log = True
