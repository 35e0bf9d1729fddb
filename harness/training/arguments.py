"""Training arguments, built once: the fields every trainer here shares, read from its settings node; each
trainer (DPR, ColBERT KD, GLUE classification) adds only what differs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness.training import tracking
from harness.training.callbacks import bars

if TYPE_CHECKING:
    from harness.training.tracking import Tracker


class TrainingSettings(Protocol):
    """What a trainer's settings node holds for the shared arguments."""

    lr: float
    epochs: float
    warmup_ratio: float
    batch_size: int
    gradient_accumulation_steps: int
    seed: int
    precision: str      # fp32 | bf16 | fp16 (mixed-precision training)


def training_arguments(cfg: TrainingSettings, output_dir: str | Path, *, use_cpu: bool, tracker: Tracker | None = None,
                       sentence_transformers: bool = True, **fields: Any) -> Any:
    """``SentenceTransformerTrainingArguments`` (``sentence_transformers=False``: transformers'
    ``TrainingArguments``) with the shared fields from ``cfg``: epochs, batch size, accumulation, learning rate,
    warmup ratio, mixed precision, seeds (model and data order), the CPU flag, the tracker's ``report_to`` and run
    name (``logger=``), NaN losses logged (the NaN guard must see them) and no checkpoints (the caller saves the
    model it keeps). ``fields``: what the caller adds or sets differently."""
    if sentence_transformers:
        from sentence_transformers import SentenceTransformerTrainingArguments as Arguments
    else:
        from transformers import TrainingArguments as Arguments

    shared: dict[str, Any] = {
        "output_dir": str(output_dir),
        "num_train_epochs": cfg.epochs,
        "per_device_train_batch_size": cfg.batch_size,
        "gradient_accumulation_steps": cfg.gradient_accumulation_steps,
        "learning_rate": cfg.lr,
        # transformers 5: a float < 1 is a ratio of the total steps
        "warmup_steps": float(cfg.warmup_ratio) if cfg.warmup_ratio > 0 else 0,
        "bf16": cfg.precision == "bf16",
        "fp16": cfg.precision == "fp16",
        "logging_nan_inf_filter": False,
        "save_strategy": "no",
        "seed": cfg.seed,
        "data_seed": cfg.seed,
        "use_cpu": use_cpu,
        "disable_tqdm": not bars(),     # off a terminal: the trainer's ProgressLines callback prints instead
        **(tracker or tracking.NONE).training_args(),
    }
    return Arguments(**(shared | fields))
