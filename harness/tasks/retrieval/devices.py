"""``task.shard_launcher=devices``: a run's missing corpus shards over every visible GPU, one process per device, each
running its share of shard jobs; a run training on N GPUs evaluates the same way over them."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from harness.core.errors import HarnessError
from harness.tasks.runplan import Cell, RunPlan, pending

log = logging.getLogger(__name__)

#: a part job: one shard of the run's corpora into the cache (:func:`harness.tasks.retrieval.compute.run_part`)
Part = Callable[[RunPlan, Sequence[Cell]], None]


def visible_devices() -> list[str]:
    """The devices shard processes run on: every visible GPU (``CUDA_VISIBLE_DEVICES`` picks them)."""
    import torch
    return [f"cuda:{i}" for i in range(torch.cuda.device_count())]


def launcher(plan: RunPlan, part: Part, shards: int | None = None) -> Callable[[list[int]], None]:
    """What computes the shards ``todo`` of ``plan``'s run: shard i on device ``i mod n``, each a part job."""
    import torch
    devices = visible_devices()
    if not devices:
        raise HarnessError("task.shard_launcher=devices needs visible GPUs (none found); use sequential, or external "
                           "with a scheduler running task.shard=<i> jobs")
    if shards is not None:
        plan = with_sharding(plan, shards=shards)

    def launch(todo: list[int]) -> None:
        share = [todo[d::len(devices)] for d in range(min(len(devices), len(todo)))]
        log.info("shards %s over %d devices, one process each", todo, len(share))
        torch.multiprocessing.spawn(_device_shards, args=(plan, part, devices, share), nprocs=len(share), join=True)

    return launch


def with_sharding(plan: RunPlan, device: str | None = None, part: bool | None = None, **sharding: Any) -> RunPlan:
    """``plan`` with its ``task.shards`` settings replaced (and its device, and whether it is a part job)."""
    settings = replace(plan.settings, sharding=replace(plan.settings.sharding, **sharding))
    device = device or plan.device
    return replace(plan, device=device, settings=settings, part=plan.part if part is None else part)


def _device_shards(rank: int, plan: RunPlan, part: Part, devices: list[str], share: list[list[int]]) -> None:
    """One device's process: its shard jobs (what ``task.shard=<i> device=<device>`` plans), on ``devices[rank]``."""
    for shard in share[rank]:
        job = with_sharding(plan, devices[rank], True, shard=shard, shard_launcher="sequential")
        todo = pending(job, job.cells)
        if todo:
            part(job, todo)


def over_training_devices(plan: RunPlan, retriever: Any, part: Part) -> tuple[Any, Callable[[list[int]], None]] | None:
    """(shard settings, launcher) evaluating a run trained on N GPUs in N shards; None where unshardable."""
    n = plan.settings.training.devices
    if n == 1 or not plan.trains:
        return None
    if not plan.device.startswith("cuda"):
        log.info("task.devices=%d: the evaluation runs in this process on the %s (on GPUs it is sharded over the %d "
                 "devices)", n, plan.device, n)
        return None
    if not hasattr(retriever, "search_shard") or getattr(retriever, "cache_dir", None) is None:
        log.info("task.devices=%d: %s cannot be sharded over the devices (or the embedding cache is off); the "
                 "evaluation runs on one GPU", n, type(retriever).__name__)
        return None
    return replace(plan.settings.sharding, shards=n, shard_launcher="devices"), launcher(plan, part, shards=n)
