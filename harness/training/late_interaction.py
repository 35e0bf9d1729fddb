"""ColBERT knowledge distillation: a thin adapter over PyLate (``models.ColBERT``, ``losses.Distillation``,
``utils.ColBERTCollator``) and the sentence-transformers trainer, configured as ModernBERT's
``examples/train_pylate.py`` (batch 16, 5% warmup, 1 epoch, bf16 where precision=auto picks it)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError
from harness.training import tracking

if TYPE_CHECKING:
    from datasets import Dataset
    from pylate.models import ColBERT

    from harness.training.settings import KdTraining, TrainRun
    from harness.training.tracking import Tracker


def train_kd(model: ColBERT, train_dataset: Dataset, node: KdTraining, run: TrainRun, output_dir: str | Path,
             tracker: Tracker | None = None) -> dict[str, Any]:
    """Distil teacher scores into ``model`` in place as ``node`` (the task's ``train.kd`` settings) says, at
    ``run``'s learning rate, seed and precision, with query and document lengths capped at the model's positions;
    save it to ``output_dir/model``; the training facts. ``tracker``: ``logger=``'s (or none)."""
    tracker = tracker or tracking.NONE
    from pylate import losses, utils

    from harness.evaluation.colbert_model import capped_length
    from harness.models import usable_positions
    from harness.training.seeding import train_seeded

    if len(train_dataset) == 0:
        raise HarnessError("the KD training set is empty: provide rows or raise task.train_data.max_samples.")
    limit = usable_positions(model)
    query_length = capped_length(node.train_query_length, limit)
    document_length = capped_length(node.train_document_length, limit)
    model.query_length, model.document_length = query_length, document_length
    steps = max(1, math.ceil(len(train_dataset) / node.batch_size) // node.gradient_accumulation_steps)
    arguments = {"logging_steps": max(1, min(10, steps // 10)),
                 "remove_unused_columns": False}   # KDProcessing adds query/documents on the fly from the id columns
    loss = ("pylate.losses.Distillation (KL, min-max normalised student scores)" if node.normalize_scores
            else "pylate.losses.Distillation (KL)")
    facts = {"query_length": query_length, "document_length": document_length, "loss": loss,
             "report_to": tracker.settings.name}   # the logger= tracker (none, tensorboard, wandb, mlflow)
    return train_seeded(model, node, run, output_dir, tracker, desc="ColBERT KD training", rows="samples",
                        n_rows=len(train_dataset), arguments=arguments, facts=facts, train_dataset=train_dataset,
                        loss=losses.Distillation(model=model, normalize_scores=node.normalize_scores),
                        data_collator=utils.ColBERTCollator(tokenize_fn=model.tokenize))
