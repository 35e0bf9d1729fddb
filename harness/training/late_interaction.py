"""ColBERT knowledge distillation: a thin adapter over PyLate (``models.ColBERT``, ``losses.Distillation``,
``utils.ColBERTCollator``) and the sentence-transformers trainer, configured as ModernBERT's
``examples/train_pylate.py`` (batch 16, 5% warmup, 1 epoch, bf16 where precision=auto picks it)."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError, TrainingDivergedError
from harness.training import tracking
from harness.training.callbacks import NaNLossGuard, ProgressLines, bars

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


def training_arguments(cfg: KdTrainingConfig, output_dir: Path, n_rows: int, tracker: Tracker = tracking.NONE):
    from sentence_transformers import SentenceTransformerTrainingArguments

    steps = max(1, math.ceil(n_rows / cfg.batch_size) // cfg.gradient_accumulation_steps)
    return SentenceTransformerTrainingArguments(
        output_dir=str(output_dir / "checkpoints"),
        num_train_epochs=cfg.epochs,
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        learning_rate=cfg.lr,
        warmup_steps=cfg.warmup_ratio,   # transformers 5: a float < 1 is a ratio of the total steps
        bf16=cfg.precision == "bf16",
        fp16=cfg.precision == "fp16",
        logging_steps=max(1, min(10, steps // 10)),
        logging_nan_inf_filter=False,    # the NaN guard must see NaN losses
        save_strategy="no",
        seed=cfg.seed,
        data_seed=cfg.seed,
        use_cpu=cfg.use_cpu,
        remove_unused_columns=False,     # KDProcessing adds query/documents on the fly from the id columns
        disable_tqdm=not bars(),         # off a terminal: ProgressLines
        **tracker.training_args(),       # report_to and run name (logger=)
    )


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
    trainer = SeededTrainer(
        model=model,
        args=training_arguments(cfg, output_dir, len(train_dataset), tracker),
        train_dataset=train_dataset,
        loss=losses.Distillation(model=model, normalize_scores=cfg.normalize_scores),
        data_collator=utils.ColBERTCollator(tokenize_fn=model.tokenize),
        callbacks=[NaNLossGuard(), ProgressLines("ColBERT KD training"), *tracker.callbacks()],
    )
    with tracker.session():
        result = trainer.train()
    if result.global_step == 0:
        raise HarnessError(
            f"training ran 0 optimisation steps on {len(train_dataset)} rows (batch {cfg.batch_size} x accumulation "
            f"{cfg.gradient_accumulation_steps}): lower task.batch_size or task.gradient_accumulation_steps."
        )
    if not math.isfinite(result.training_loss):
        raise TrainingDivergedError(
            f"training loss is {result.training_loss}: the run diverged. Lower task.lr or use precision=fp32."
        )
    final = output_dir / "model"
    model.save(str(final))
    return {
        "steps": result.global_step,
        "train_loss": float(result.training_loss),
        "n_samples": len(train_dataset),
        "effective_batch_size": cfg.batch_size * cfg.gradient_accumulation_steps,
        "query_length": cfg.query_length,
        "document_length": cfg.document_length,
        "loss": "pylate.losses.Distillation (KL, min-max normalised student scores)"
                if cfg.normalize_scores else "pylate.losses.Distillation (KL)",
        "report_to": tracker.settings.name,    # the logger= tracker (none, tensorboard, wandb, mlflow)
        "model_dir": str(final),
        **({"tracking": tracker.describe()} if tracker.enabled else {}),
    }
