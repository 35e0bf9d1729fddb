"""DPR fine-tuning: a thin adapter over sentence-transformers' trainer and (Cached)MNRL loss."""

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
    from sentence_transformers import SentenceTransformer

    from harness.training.tracking import Tracker

log = logging.getLogger(__name__)


@dataclass
class DenseTrainingConfig:
    lr: float
    epochs: float = 1
    warmup_ratio: float = 0.05
    batch_size: int = 16
    gradient_accumulation_steps: int = 1
    loss: str = "cached_mnrl"
    mini_batch_size: int = 16
    max_seq_length: int = 512
    seed: int = 12
    precision: str = "fp32"     # bf16 | fp16 | fp32 (mixed precision training)
    use_cpu: bool = True


def check_batchable(train_dataset: Dataset, batch_size: int) -> None:
    """NO_DUPLICATES batches need ``batch_size`` distinct anchors; otherwise the sampler silently yields
    nothing and training would do zero steps."""
    distinct = len(set(train_dataset["anchor"]))
    if distinct < batch_size:
        raise HarnessError(
            f"the training data has {distinct} distinct queries ({len(train_dataset)} triplets), fewer than "
            f"task.batch_size={batch_size}: NO_DUPLICATES batching cannot fill one batch. "
            f"Set task.batch_size<={distinct} or provide more data."
        )


def make_loss(model: SentenceTransformer, cfg: DenseTrainingConfig):
    from sentence_transformers import losses

    if cfg.loss == "cached_mnrl":
        return losses.CachedMultipleNegativesRankingLoss(model, mini_batch_size=cfg.mini_batch_size)
    if cfg.loss == "mnrl":
        return losses.MultipleNegativesRankingLoss(model)
    raise HarnessError(f"unknown task.loss {cfg.loss!r}: use cached_mnrl or mnrl")


def train_dense(
    model: SentenceTransformer, train_dataset: Dataset, cfg: DenseTrainingConfig, output_dir: str | Path,
    tracker: Tracker | None = None,
) -> dict[str, Any]:
    """Fine-tune ``model`` in place on (anchor, positive, negative) triplets; save it to ``output_dir``.
    ``tracker``: the experiment tracker the run reports to (``logger=``; default none).

    Returns training facts for the record (steps, loss, effective batch size, where the curves are).
    """
    tracker = tracker or tracking.NONE
    from sentence_transformers import SentenceTransformerTrainingArguments
    from sentence_transformers.training_args import BatchSamplers

    from harness.training.seeding import SeededTrainer

    output_dir = Path(output_dir)
    check_batchable(train_dataset, cfg.batch_size)
    model.max_seq_length = cfg.max_seq_length
    steps_per_epoch = max(1, len(train_dataset) // (cfg.batch_size * cfg.gradient_accumulation_steps))
    args = SentenceTransformerTrainingArguments(
        output_dir=str(output_dir / "checkpoints"),
        num_train_epochs=cfg.epochs,
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        learning_rate=cfg.lr,
        warmup_steps=cfg.warmup_ratio,   # transformers 5: a float < 1 is a ratio of the total steps
        bf16=cfg.precision == "bf16",
        fp16=cfg.precision == "fp16",
        batch_sampler=BatchSamplers.NO_DUPLICATES,
        logging_steps=max(1, min(50, steps_per_epoch // 10)),
        logging_nan_inf_filter=False,   # the NaN guard must see NaN losses
        save_strategy="no",
        seed=cfg.seed,
        data_seed=cfg.seed,
        use_cpu=cfg.use_cpu,
        dataloader_drop_last=True,
        disable_tqdm=not bars(),        # off a terminal: ProgressLines
        **tracker.training_args(),
    )
    trainer = SeededTrainer(
        model=model,
        args=args,
        train_dataset=train_dataset.select_columns(["anchor", "positive", "negative"]),
        loss=make_loss(model, cfg),
        callbacks=[NaNLossGuard(), ProgressLines("DPR training"), *tracker.callbacks()],
    )
    with tracker.session():
        result = trainer.train()
    if result.global_step == 0:
        raise HarnessError(
            f"training ran 0 optimisation steps on {len(train_dataset)} triplets (batch {cfg.batch_size} x "
            f"accumulation {cfg.gradient_accumulation_steps}): lower task.batch_size or "
            "task.gradient_accumulation_steps, or provide more data."
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
        "n_triplets": len(train_dataset),
        "effective_batch_size": cfg.batch_size * cfg.gradient_accumulation_steps,
        "model_dir": str(final),
        **({"tracking": tracker.describe()} if tracker.enabled else {}),
    }
