"""The ``train.<name>`` stages of a retrieval run: the ``train.*`` stage a task's spec lists fine-tunes the
loaded model when the run trains (``task.train``; MLDR: ``task.setting=id``). A trainer gets the run's
:class:`~harness.stages.context.StageContext` (its ``training`` node, the resolved learning rate, the precision
and device) and the rows the runner loaded from the task's ``train_data`` source; it says under which key its
trained model is kept, how it fits and how a finished training reloads. Which task keys count only when training
follows from the settings (their ``train`` nodes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness import results

if TYPE_CHECKING:
    from harness.models import ModelSpec
    from harness.runplan import Cell
    from harness.stages.context import StageContext
    from harness.training.settings import DenseTraining, KdTraining


class DenseTask(Protocol):
    training: DenseTraining


class KdTask(Protocol):
    training: KdTraining


class DenseTrainer:
    """``train.dense``: sentence-transformers' trainer, (Cached)MNRL on (query, positive, negative) triplets; its
    model is kept under the run id."""

    loader = "load.encoder"     # how its model loads (the ranks of task.devices load the run's weights with it)

    def key(self, cell: Cell, train_keys: Sequence[str]) -> str:
        return cell.run_id

    def load_trained(self, ctx: StageContext[DenseTask], model_dir: str) -> Any:
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(model_dir, device=ctx.device)

    def fit(self, ctx: StageContext[DenseTask], model: Any, data: Any, facts: Mapping[str, Any] | None,
            out_dir: Path, tracker: Any, spec: ModelSpec) -> dict[str, Any]:
        info = fit(self, ctx, model, data, spec, out_dir, tracker, "harness.training.seeding:train_dense")
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

    def load_trained(self, ctx: StageContext[KdTask], model_dir: str) -> Any:
        from pylate.models import ColBERT

        return ColBERT(model_dir, device=ctx.device)

    def fit(self, ctx: StageContext[KdTask], model: Any, data: Any, facts: Mapping[str, Any] | None,
            out_dir: Path, tracker: Any, spec: ModelSpec) -> dict[str, Any]:
        info = fit(self, ctx, model, data, spec, out_dir, tracker, "harness.training.seeding:train_kd")
        return {**info, "data": facts}


def fit(trainer: Any, ctx: StageContext[Any], model: Any, data: Any, spec: ModelSpec, out_dir: Path, tracker: Any,
        train: str) -> dict[str, Any]:
    """``train`` (``module:function``) on this process, or on the N processes of ``task.devices``
    (:mod:`~harness.stages.train_ranks`); ``spec``: the model as the run loaded it."""
    if ctx.settings.training.devices > 1:
        from harness.stages.train_ranks import fit_on_devices

        return fit_on_devices(ctx, trainer, model, data, spec, out_dir, tracker, train)
    from harness.registry import load_target

    return load_target(train)(model, data, ctx.settings.training, ctx.train_run(), out_dir, tracker)


DENSE = DenseTrainer()
KD = KdTrainer()
