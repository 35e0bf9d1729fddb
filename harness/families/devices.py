"""``task.shard_launcher=devices``: a run's missing corpus shards over every visible GPU, one process per device
(``torch.multiprocessing.spawn``), each running the shard jobs of its share (``task.shard=<i>``) one after another.
A run that trains on N GPUs (``task.devices=N``) evaluates the same way over them (:func:`over_training_devices`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from harness.errors import HarnessError

log = logging.getLogger(__name__)


def visible_devices() -> list[str]:
    """The devices shard processes run on: every visible GPU (``CUDA_VISIBLE_DEVICES`` picks them)."""
    import torch

    return [f"cuda:{i}" for i in range(torch.cuda.device_count())]


def launcher(cfg: Any, shards: int | None = None) -> Callable[[list[int]], None]:
    """What computes the shards ``todo`` of the run ``cfg``: shard i on device ``i mod n`` (n visible GPUs).
    ``shards``: the run's shard count where it is not ``cfg``'s own ``task.shards`` (:func:`over_training_devices`)."""
    import torch
    from omegaconf import OmegaConf

    devices = visible_devices()
    if not devices:
        raise HarnessError("task.shard_launcher=devices needs visible GPUs (none found); use sequential, or external "
                           "with a scheduler running task.shard=<i> jobs")
    config = OmegaConf.to_container(cfg, resolve=True)
    if shards is not None:
        config["task"]["shards"] = shards

    def launch(todo: list[int]) -> None:
        share = [todo[d::len(devices)] for d in range(min(len(devices), len(todo)))]
        log.info("shards %s over %d devices, one process each", todo, len(share))
        torch.multiprocessing.spawn(_device_shards, args=(config, devices, share), nprocs=len(share), join=True)

    return launch


def _device_shards(rank: int, config: dict[str, Any], devices: list[str], share: list[list[int]]) -> None:
    """One device's process: its shard jobs, on ``devices[rank]``."""
    from omegaconf import OmegaConf

    from harness import families
    from harness.families.parts import run_part
    from harness.specs import spec_from

    for shard in share[rank]:
        cfg = OmegaConf.create(config)
        cfg.device = devices[rank]
        cfg.task.shard, cfg.task.shard_launcher = shard, "sequential"
        spec = spec_from(cfg.task.get("spec") or {}, str(cfg.task.name), f"task {cfg.task.name!r}, spec")
        run_part(families.get(spec.runner)(cfg), str(cfg.paths.results), bool(cfg.overwrite))


def over_training_devices(task: Any, retriever: Any) -> tuple[Any, Callable[[list[int]], None]] | None:
    """The evaluation of a run that trains on N GPUs (``task.devices=N``, ``task.shards`` left at 1): its corpora in
    N shards, one process per GPU, merged into exactly the unsharded ranking; (shard settings, launcher). None where
    it stays in this process, said once: one device, the CPU (N processes would share the cores one process already
    uses), or a retriever that cannot be sharded (PLAID, Voyager: exact MaxSim and single-vector search can)."""
    n = task.settings.training.devices
    if n == 1 or not task.trains:
        return None
    device = task.context().device
    if not device.startswith("cuda"):
        log.info("task.devices=%d: the evaluation runs in this process on the %s (on GPUs it is sharded over the %d "
                 "devices)", n, device, n)
        return None
    if not hasattr(retriever, "search_shard") or getattr(retriever, "cache_dir", None) is None:
        log.info("task.devices=%d: %s cannot be sharded over the devices (or the embedding cache is off); the "
                 "evaluation runs on one GPU", n, type(retriever).__name__)
        return None
    return replace(task.settings.sharding, shards=n, shard_launcher="devices"), launcher(task.cfg, shards=n)
