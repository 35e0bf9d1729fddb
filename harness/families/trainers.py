"""The ``train.<name>`` stages of the retrieval runner: the ``train.*`` stage a task's spec lists fine-tunes the
loaded model when the run trains (``task.train``; MLDR: ``task.setting=id``). A trainer says which task keys only
matter when training (left out of an evaluation-only run's identity), where its trained model goes, how it fits
and how a finished training reloads. The rows come from the task's ``train_data`` source: the registry its typed
node names (``sources``), the entry ``task.train_data.source`` names."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness import layout, results


class DenseTrainer:
    """``train.dense``: sentence-transformers' trainer, (Cached)MNRL on (query, positive, negative) triplets."""

    def train_dir(self, task: Any, todo: Sequence[Any]) -> Path:
        return layout.trained_model_dir(str(task.cfg.paths.outputs), task.name, task.model_name, todo[0].run_id)

    def load_trained(self, task: Any, model_dir: str) -> Any:
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(model_dir, device=task.device)

    def fit(self, task: Any, model: Any, todo: Sequence[Any], out_dir: Path) -> dict[str, Any]:
        from harness.training.dense import DenseTrainingConfig, train_dense

        s = task.settings.training
        data, facts = task.training_source.load(task, model)
        tcfg = DenseTrainingConfig(
            lr=task.lr, epochs=s.epochs, warmup_ratio=s.warmup_ratio, batch_size=s.batch_size,
            gradient_accumulation_steps=s.gradient_accumulation_steps, loss=s.loss, mini_batch_size=s.mini_batch_size,
            max_seq_length=s.max_seq_length, seed=s.train_seed, precision=task.precision, use_cpu=task.device == "cpu",
        )
        info = train_dense(model, data, tcfg, out_dir, task.tracker(todo[0]))
        return {**info, "data": facts} if facts else info


#: task keys besides the training's that the weights train.kd produces depend on: the new projection's size, the task
TRAINED_WEIGHTS_ALSO = ("embedding_size", "name")


class KdTrainer:
    """``train.kd``: PyLate's KL distillation of teacher scores. Its folder is keyed by :meth:`training_key`, so runs
    that differ only in evaluation keys (index, top-k, query and document length) share one trained model."""

    def train_dir(self, task: Any, todo: Sequence[Any]) -> Path:
        return layout.trained_model_dir(str(task.cfg.paths.outputs), task.name, task.model_name,
                                        self.training_key(task.train_keys(), todo))

    def training_key(self, train_keys: Sequence[str], todo: Sequence[Any]) -> str:
        """Hash of what the trained weights depend on: the run identity with, of its task keys, only those of the
        training (``train_keys``: its ``train`` nodes), the projection's size and the task's name."""
        ident = dict(todo[0].identity)
        task = ident.get("task", {})
        names = (*(t.split(".", 1)[1] for t in train_keys), *TRAINED_WEIGHTS_ALSO)
        kept = {k: task[k] for k in names if k in task}
        return "train-" + results.stable_hash({**ident, "task": kept}, length=16)

    def load_trained(self, task: Any, model_dir: str) -> Any:
        from pylate.models import ColBERT

        return ColBERT(model_dir, device=task.device)

    def fit(self, task: Any, model: Any, todo: Sequence[Any], out_dir: Path) -> dict[str, Any]:
        from harness.evaluation.colbert_model import capped_length
        from harness.models import usable_positions
        from harness.training.late_interaction import KdTrainingConfig, train_kd

        s = task.settings.training
        data, facts = task.training_source.load(task, model)
        limit = usable_positions(model)
        tcfg = KdTrainingConfig(
            lr=task.lr, epochs=s.epochs, warmup_ratio=s.warmup_ratio, batch_size=s.batch_size,
            gradient_accumulation_steps=s.gradient_accumulation_steps, seed=s.train_seed,
            query_length=capped_length(s.train_query_length, limit),
            document_length=capped_length(s.train_document_length, limit), normalize_scores=s.normalize_scores,
            precision=task.precision, use_cpu=task.device == "cpu",
        )
        return {**train_kd(model, data, tcfg, out_dir, task.tracker(todo[0])), "data": facts}


DENSE = DenseTrainer()
KD = KdTrainer()
