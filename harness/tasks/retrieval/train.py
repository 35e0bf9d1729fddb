"""The ``train.<name>`` stages: fine-tune the loaded model when the run trains, from the rows of its ``train_data``
source; each says under which key its model is kept, how it fits and how it reloads."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core import results

if TYPE_CHECKING:
    from harness.models import ModelSpec
    from harness.tasks.runplan import Cell, RunPlan
    from harness.training.settings import TrainRun


@dataclass(frozen=True)
class Trainer:
    """A ``train.*`` stage: its load stage, training function, reloader and the key its trained model is kept under."""

    loader: str
    train: str
    reload: str
    key: Callable[[Cell, Sequence[str]], str]

    def load_trained(self, plan: RunPlan, model_dir: str) -> Any:
        from harness.core.registry import load_target
        return load_target(self.reload)(model_dir, device=plan.device)

    def fit(self, plan: RunPlan, model: Any, data: Any, out_dir: Path, tracker: Any, spec: ModelSpec) -> dict[str, Any]:
        """``train`` here, or on ``task.devices``' N processes, at the run's resolved values; the training facts."""
        from harness.core.registry import load_target
        from harness.training.settings import TrainRun
        t = plan.settings.training
        assert plan.lr is not None, "a run that trains has a learning rate"
        run = TrainRun(lr=plan.lr, epochs=t.epochs, seed=t.train_seed, precision=plan.precision, device=plan.device)
        if t.devices > 1:
            return fit_on_devices(plan, self, model, data, spec, out_dir, tracker, run)
        return load_target(self.train)(model, data, t, run, out_dir, tracker)


#: task keys besides the training's that the weights train.kd produces depend on: the new projection's size, the task
TRAINED_WEIGHTS_ALSO = ("embedding_size", "name")


def kd_key(cell: Cell, train_keys: Sequence[str]) -> str:
    """Hash of what the trained weights depend on (the training's keys only: evaluations share a model)."""
    ident = dict(cell.identity)
    task = ident.get("task", {})
    names = (*(t.split(".", 1)[1] for t in train_keys), *TRAINED_WEIGHTS_ALSO)
    kept = {k: task[k] for k in names if k in task}
    return "train-" + results.stable_hash({**ident, "task": kept}, length=16)


#: ``train.dense``: sentence-transformers' (Cached)MNRL on (query, positive, negative) triplets; kept under the run id
DENSE = Trainer("load.encoder", "harness.tasks.retrieval.seeding:train_dense", "sentence_transformers:SentenceTransformer",
                lambda cell, train_keys: cell.run_id)
#: ``train.kd``: PyLate's KL distillation of teacher scores; its model is kept under :func:`kd_key`
KD = Trainer("load.colbert", "harness.tasks.retrieval.seeding:train_kd", "pylate.models:ColBERT", kd_key)


# -------------------------------------------------------------------------------- task.devices: the N processes
# One writer: the run's process stages its loaded weights and the training rows in ``<trained model
# folder>/staging``, launches the ranks, loads the weights rank 0 saved once every rank ended well, and alone writes
# the training marker and the records; a failed rank fails the run with its error line (staging removed).


@dataclass(frozen=True)
class RankJob:
    """Everything a rank needs, picklable: plan, model loading, staged rows, training function, run, output."""

    plan: Any
    loader: str
    spec: Any
    rows: str
    rows_format: Mapping[str, Any]
    train: str
    out_dir: str
    tracker: Any
    run: Any


def fit_on_devices(plan: RunPlan, trainer: Trainer, model: Any, data: Any, spec: ModelSpec, out_dir: Path,
                   tracker: Any, run: TrainRun) -> dict[str, Any]:
    """Train ``model`` on ``task.devices`` processes, load the trained weights into it; rank 0's facts."""
    from harness.training.arguments import discard_unfinished
    from harness.training.ranks import run_on_devices
    staging = Path(out_dir) / "staging"
    shutil.rmtree(staging, ignore_errors=True)
    job = RankJob(plan=plan, loader=trainer.loader, spec=replace(spec, path=str(staging / "initial"), keep_layers=None),
                  rows=str(staging / "rows"), rows_format=dict(data.format), train=trainer.train, out_dir=str(out_dir),
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
    """One rank: the staged weights loaded as the run loads its model, on its device; its share; rank 0's facts."""
    import os

    from datasets import load_from_disk

    from harness.core.registry import load_target
    from harness.specs.stages import code_of
    from harness.tasks.retrieval import stages
    from harness.training import ranks
    device = f"cuda:{os.environ.get('LOCAL_RANK', '0')}" if job.plan.device.startswith("cuda") else job.plan.device
    plan = replace(job.plan, device=device)
    run = replace(job.run, device=device)
    model, _ = code_of(stages.STAGES, job.loader)(plan, job.spec)
    rows = load_from_disk(job.rows)
    fmt = job.rows_format
    if fmt.get("type") is not None:
        rows.set_format(type=fmt["type"], columns=fmt["columns"], output_all_columns=fmt["output_all_columns"],
                        **fmt["format_kwargs"])
    writer = ranks.rank() == 0
    facts = load_target(job.train)(model, rows, plan.settings.training, run, job.out_dir,
                                   job.tracker if writer else None)
    return facts if writer else None
