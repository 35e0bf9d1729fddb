"""ColBERT knowledge distillation: a thin adapter over PyLate (``models.ColBERT``, ``losses.Distillation``,
``utils.ColBERTCollator``) and the sentence-transformers trainer, configured as ModernBERT's
``examples/train_pylate.py`` (batch 16, 5% warmup, 1 epoch, bf16 where precision=auto picks it)."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError
from harness.training import tracking
from harness.training.arguments import training_arguments
from harness.training.callbacks import NaNLossGuard, ProgressLines, discard_unfinished
from harness.training.finish import finish_training

if TYPE_CHECKING:
    from datasets import Dataset
    from pylate.models import ColBERT

    from harness.training.tracking import Tracker

log = logging.getLogger(__name__)


@dataclass
class KdTrainingConfig:
    lr: float
    epochs: float = 1
    warmup_ratio: float = 0.05
    batch_size: int = 16
    gradient_accumulation_steps: int = 1
    seed: int = 12
    query_length: int = 32          # PyLate's training defaults (ModernBERT's train_pylate.py leaves them)
    document_length: int = 180
    normalize_scores: bool = True   # Distillation: min-max normalise student scores before the KL
    precision: str = "fp32"         # bf16 | fp16 | fp32 (mixed-precision training)
    use_cpu: bool = True


def train_kd(model: ColBERT, train_dataset: Dataset, cfg: KdTrainingConfig, output_dir: str | Path,
             tracker: Tracker | None = None) -> dict[str, Any]:
    """Distil teacher scores into ``model`` in place; save it to ``output_dir/model``. Returns training facts.
    ``tracker``: the experiment tracker the run reports to (``logger=``; default none)."""
    tracker = tracker or tracking.NONE
    from pylate import losses, utils

    from harness.training.seeding import SeededTrainer

    output_dir = Path(output_dir)
    if len(train_dataset) == 0:
        raise HarnessError("the KD training set is empty: provide rows or raise task.train_data.max_samples.")
    model.query_length, model.document_length = cfg.query_length, cfg.document_length
    steps = max(1, math.ceil(len(train_dataset) / cfg.batch_size) // cfg.gradient_accumulation_steps)
    args = training_arguments(
        cfg, output_dir / "checkpoints", use_cpu=cfg.use_cpu, tracker=tracker,
        logging_steps=max(1, min(10, steps // 10)),
        remove_unused_columns=False,     # KDProcessing adds query/documents on the fly from the id columns
    )
    trainer = SeededTrainer(
        model=model,
        args=args,
        train_dataset=train_dataset,
        loss=losses.Distillation(model=model, normalize_scores=cfg.normalize_scores),
        data_collator=utils.ColBERTCollator(tokenize_fn=model.tokenize),
        callbacks=[NaNLossGuard(), ProgressLines("ColBERT KD training"), *tracker.callbacks()],
    )
    with tracker.session(), discard_unfinished(output_dir / "checkpoints"):
        result = trainer.train()
    loss = ("pylate.losses.Distillation (KL, min-max normalised student scores)" if cfg.normalize_scores
            else "pylate.losses.Distillation (KL)")
    facts = {"query_length": cfg.query_length, "document_length": cfg.document_length, "loss": loss,
             "report_to": tracker.settings.name}   # the logger= tracker (none, tensorboard, wandb, mlflow)
    return finish_training(model, result, output_dir, cfg=cfg, n_rows=len(train_dataset), rows="samples",
                           tracker=tracker, facts=facts)
