"""DPR fine-tuning: a thin adapter over sentence-transformers' trainer and (Cached)MNRL loss."""

from __future__ import annotations

import logging
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
    from sentence_transformers.training_args import BatchSamplers

    from harness.training.seeding import SeededTrainer

    output_dir = Path(output_dir)
    check_batchable(train_dataset, cfg.batch_size)
    model.max_seq_length = cfg.max_seq_length
    steps_per_epoch = max(1, len(train_dataset) // (cfg.batch_size * cfg.gradient_accumulation_steps))
    args = training_arguments(
        cfg, output_dir / "checkpoints", use_cpu=cfg.use_cpu, tracker=tracker,
        batch_sampler=BatchSamplers.NO_DUPLICATES,
        logging_steps=max(1, min(50, steps_per_epoch // 10)),
        dataloader_drop_last=True,
    )
    trainer = SeededTrainer(
        model=model,
        args=args,
        train_dataset=train_dataset.select_columns(["anchor", "positive", "negative"]),
        loss=make_loss(model, cfg),
        callbacks=[NaNLossGuard(), ProgressLines("DPR training"), *tracker.callbacks()],
    )
    with tracker.session(), discard_unfinished(output_dir / "checkpoints"):
        result = trainer.train()
    return finish_training(model, result, output_dir, cfg=cfg, n_rows=len(train_dataset), rows="triplets",
                           tracker=tracker)
