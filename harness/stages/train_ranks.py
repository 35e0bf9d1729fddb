"""A ``train.*`` stage on N processes (``task.devices``): what the run hands its ranks, and what a rank does.

One writer. The run's own process (the one holding its run lock) stages the weights it loaded and the training rows
in ``<trained model folder>/staging``, launches the ranks (:func:`harness.training.launch.run_on_devices`) and,
once every rank has ended well, loads the weights rank 0 saved into its model: it alone then writes the training
marker and the records (:mod:`~harness.stages.retrieval`). A rank loads the staged weights through the run's
own load stage (the same attention, unpadding and head as the run's model), trains its share, and only rank 0 saves
(the others wait at a barrier). A failed rank fails the run with its error line: no marker, no record, the staging
removed; a re-run trains again, as after any interrupted training.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.models import ModelSpec
    from harness.runplan import RunPlan
    from harness.training.settings import TrainRun


@dataclass(frozen=True)
class RankJob:
    """Everything a rank needs, picklable: the run's plan, how it loaded its model (``loader``: the load
    stage, ``spec`` pointing at the staged weights), the staged rows and their format (a transform such as PyLate's
    KDProcessing is not saved with them), the training function (``train``: ``module:function``) and the values
    it resolves (``run``: on each rank's own device), where the trained model goes and the tracker (rank 0 reports)."""

    plan: Any
    loader: str
    spec: Any
    rows: str
    rows_format: Mapping[str, Any]
    train: str
    out_dir: str
    tracker: Any
    run: Any


def fit_on_devices(plan: RunPlan, trainer: Any, model: Any, data: Any, spec: ModelSpec, out_dir: Path,
                   tracker: Any, train: str, run: TrainRun) -> dict[str, Any]:
    """Train ``model`` on ``plan.settings.training.devices`` processes with ``train`` (``module:function``, as the
    one-process stage calls it); the trained weights are loaded into ``model``; returns rank 0's training facts.
    A failure removes the trainers' checkpoint folder, as on one process (ranks stopped mid-way cannot)."""
    from harness.training.arguments import discard_unfinished
    from harness.training.launch import run_on_devices

    staging = Path(out_dir) / "staging"
    shutil.rmtree(staging, ignore_errors=True)
    job = RankJob(plan=plan, loader=trainer.loader, spec=replace(spec, path=str(staging / "initial"), keep_layers=None),
                  rows=str(staging / "rows"), rows_format=dict(data.format), train=train, out_dir=str(out_dir),
                  tracker=tracker, run=run)
    home = plan.device
    with discard_unfinished(Path(out_dir) / "checkpoints"):
        try:
            model.save(str(staging / "initial"))
            data.with_format(None).save_to_disk(str(staging / "rows"))
            if home.startswith("cuda"):   # rank 0 trains on the GPU this process holds its copy on: off it meanwhile
                model.to("cpu")
            info = run_on_devices(train_rank, (job,), plan.settings.training.devices, home, staging)
            model.load_state_dict(trainer.load_trained(plan, info["model_dir"]).state_dict())
        finally:
            model.to(home)
            shutil.rmtree(staging, ignore_errors=True)
    return info


def train_rank(job: RankJob) -> dict[str, Any] | None:
    """One rank: the staged weights loaded as the run loaded its model, on this rank's device; its share of the
    training; rank 0's facts (the others return None)."""
    import os

    from datasets import load_from_disk

    from harness.registry import load_target
    from harness.stages import code_of
    from harness.training import ranks

    device = f"cuda:{os.environ.get('LOCAL_RANK', '0')}" if job.plan.device.startswith("cuda") else job.plan.device
    plan = replace(job.plan, device=device)
    run = replace(job.run, device=device)
    model, _ = code_of(job.loader)(plan, job.spec)
    rows = load_from_disk(job.rows)
    fmt = job.rows_format
    if fmt.get("type") is not None:
        rows.set_format(type=fmt["type"], columns=fmt["columns"], output_all_columns=fmt["output_all_columns"],
                        **fmt["format_kwargs"])
    writer = ranks.rank() == 0
    facts = load_target(job.train)(model, rows, plan.settings.training, run, job.out_dir,
                                   job.tracker if writer else None)
    return facts if writer else None
