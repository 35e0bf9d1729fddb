"""``task.shard_launcher=devices``: a run's missing corpus shards over every visible GPU, one process per device
(``torch.multiprocessing.spawn``), each running the shard jobs of its share (``task.shard=<i>``) one after another."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from harness.errors import HarnessError
from harness.runplan import RunPlan, pending

log = logging.getLogger(__name__)


def visible_devices() -> list[str]:
    """The devices shard processes run on: every visible GPU (``CUDA_VISIBLE_DEVICES`` picks them)."""
    import torch

    return [f"cuda:{i}" for i in range(torch.cuda.device_count())]


def launcher(plan: RunPlan) -> Callable[[list[int]], None]:
    """What computes the shards ``todo`` of ``plan``'s run: shard i on device ``i mod n`` (n visible GPUs)."""
    import torch

    devices = visible_devices()
    if not devices:
        raise HarnessError("task.shard_launcher=devices needs visible GPUs (none found); use sequential, or external "
                           "with a scheduler running task.shard=<i> jobs")

    def launch(todo: list[int]) -> None:
        share = [todo[d::len(devices)] for d in range(min(len(devices), len(todo)))]
        log.info("shards %s over %d devices, one process each", todo, len(share))
        torch.multiprocessing.spawn(_device_shards, args=(plan, devices, share), nprocs=len(share), join=True)

    return launch


def shard_plan(plan: RunPlan, shard: int, device: str) -> RunPlan:
    """``plan`` as the part job of one shard on ``device`` (what ``task.shard=<i> device=<device>`` plans)."""
    sharding = replace(plan.settings.sharding, shard=shard, shard_launcher="sequential")
    settings = replace(plan.settings, sharding=sharding)
    stages = replace(plan.stages, ctx=replace(plan.stages.ctx, device=device, settings=settings))
    return replace(plan, device=device, settings=settings, stages=stages, part=True)


def _device_shards(rank: int, plan: RunPlan, devices: list[str], share: list[list[int]]) -> None:
    """One device's process: its shard jobs, on ``devices[rank]``."""
    from harness.stages.retrieval import run_part

    for shard in share[rank]:
        job = shard_plan(plan, shard, devices[rank])
        todo = pending(job, job.cells)
        if todo:
            run_part(job, todo)
