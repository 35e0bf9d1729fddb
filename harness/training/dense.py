"""DPR fine-tuning: a thin adapter over sentence-transformers' trainer and (Cached)MNRL loss."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError

if TYPE_CHECKING:
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer

    from harness.training.settings import DenseTraining, TrainRun
    from harness.training.tracking import Tracker


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


def make_loss(model: SentenceTransformer, node: DenseTraining):
    from sentence_transformers import losses

    gather = {"gather_across_devices": True} if node.gather_across_devices else {}   # a pool of N micro-batches
    if node.loss == "cached_mnrl":
        return losses.CachedMultipleNegativesRankingLoss(model, mini_batch_size=node.mini_batch_size, **gather)
    if node.loss == "mnrl":
        return losses.MultipleNegativesRankingLoss(model, **gather)
    raise HarnessError(f"unknown task.loss {node.loss!r}: use cached_mnrl or mnrl")


def train_dense(model: SentenceTransformer, train_dataset: Dataset, node: DenseTraining, run: TrainRun,
                output_dir: str | Path, tracker: Tracker | None = None) -> dict[str, Any]:
    """Fine-tune ``model`` in place on (anchor, positive, negative) triplets as ``node`` (the task's ``train.dense``
    settings) says, at ``run``'s learning rate, seed and precision; save it to ``output_dir``; the training facts for
    the record (steps, loss, effective batch size, where the curves are). ``tracker``: ``logger=``'s (or none)."""
    from sentence_transformers.training_args import BatchSamplers

    from harness.training.seeding import train_seeded

    check_batchable(train_dataset, node.batch_size)
    model.max_seq_length = node.max_seq_length
    steps_per_epoch = max(1, len(train_dataset) // (node.batch_size * node.gradient_accumulation_steps))
    arguments = {"batch_sampler": BatchSamplers.NO_DUPLICATES, "dataloader_drop_last": True,
                 "logging_steps": max(1, min(50, steps_per_epoch // 10))}
    return train_seeded(model, node, run, output_dir, tracker, desc="DPR training", rows="triplets",
                        n_rows=len(train_dataset), arguments=arguments,
                        train_dataset=train_dataset.select_columns(["anchor", "positive", "negative"]),
                        loss=make_loss(model, node), gather=node.gather_across_devices)
