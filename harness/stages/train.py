"""The ``train.<name>`` stages of a retrieval run: the ``train.*`` stage a task's spec lists fine-tunes the
loaded model when the run trains (``task.train``; MLDR: ``task.setting=id``). A trainer gets the run's
:class:`~harness.runplan.RunPlan` (its ``training`` node, the resolved learning rate, the precision and device)
and the rows the runner loaded from the task's ``train_data`` source; it says under which key its
trained model is kept, how it fits and how a finished training reloads. Which task keys count only when training
follows from the settings (their ``train`` nodes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import results

if TYPE_CHECKING:
    from harness.models import ModelSpec
    from harness.runplan import Cell, RunPlan
    from harness.training.settings import TrainRun


class DenseTrainer:
    """``train.dense``: sentence-transformers' trainer, (Cached)MNRL on (query, positive, negative) triplets; its
    model is kept under the run id."""

    loader = "load.encoder"     # how its model loads (the ranks of task.devices load the run's weights with it)

    def key(self, cell: Cell, train_keys: Sequence[str]) -> str:
        return cell.run_id

    def load_trained(self, plan: RunPlan, model_dir: str) -> Any:
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(model_dir, device=plan.device)

    def fit(self, plan: RunPlan, model: Any, data: Any, facts: Mapping[str, Any] | None,
            out_dir: Path, tracker: Any, spec: ModelSpec) -> dict[str, Any]:
        info = fit(self, plan, model, data, spec, out_dir, tracker, "harness.training.seeding:train_dense")
        return {**info, "data": facts} if facts else info


#: task keys besides the training's that the weights train.kd produces depend on: the new projection's size, the task
TRAINED_WEIGHTS_ALSO = ("embedding_size", "name")


class KdTrainer:
    """``train.kd``: PyLate's KL distillation of teacher scores. Its model is kept under :meth:`key`, so runs that
    differ only in evaluation keys (index, top-k, query and document length) share one trained model."""

    loader = "load.colbert"

    def key(self, cell: Cell, train_keys: Sequence[str]) -> str:
        """Hash of what the trained weights depend on: the run identity with, of its task keys, only those of the
        training (``train_keys``: its ``train`` nodes), the projection's size and the task's name."""
        ident = dict(cell.identity)
        task = ident.get("task", {})
        names = (*(t.split(".", 1)[1] for t in train_keys), *TRAINED_WEIGHTS_ALSO)
        kept = {k: task[k] for k in names if k in task}
        return "train-" + results.stable_hash({**ident, "task": kept}, length=16)

    def load_trained(self, plan: RunPlan, model_dir: str) -> Any:
        from pylate.models import ColBERT

        return ColBERT(model_dir, device=plan.device)

    def fit(self, plan: RunPlan, model: Any, data: Any, facts: Mapping[str, Any] | None,
            out_dir: Path, tracker: Any, spec: ModelSpec) -> dict[str, Any]:
        info = fit(self, plan, model, data, spec, out_dir, tracker, "harness.training.seeding:train_kd")
        return {**info, "data": facts}


def fit(trainer: Any, plan: RunPlan, model: Any, data: Any, spec: ModelSpec, out_dir: Path, tracker: Any,
        train: str) -> dict[str, Any]:
    """``train`` (``module:function``) on this process, or on the N processes of ``task.devices``
    (:mod:`~harness.stages.train_ranks`); ``spec``: the model as the run loaded it."""
    run = train_run(plan)
    if plan.settings.training.devices > 1:
        from harness.stages.train_ranks import fit_on_devices

        return fit_on_devices(plan, trainer, model, data, spec, out_dir, tracker, train, run)
    from harness.registry import load_target

    return load_target(train)(model, data, plan.settings.training, run, out_dir, tracker)


def train_run(plan: RunPlan) -> TrainRun:
    """The values a training run resolves: the learning rate, the epochs and seed of the training node, where it
    runs."""
    from harness.training.settings import TrainRun

    t = plan.settings.training
    assert plan.lr is not None, "a run that trains has a learning rate"
    return TrainRun(lr=plan.lr, epochs=t.epochs, seed=t.train_seed, precision=plan.precision, device=plan.device)


DENSE = DenseTrainer()
KD = KdTrainer()
