"""The sentence-transformers trainer with the run's seed reaching its batch sampler and, on N processes, one process's
micro-batches and steps; DPR (:func:`train_dense`) and ColBERT distillation (:func:`train_kd`) on it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentence_transformers import SentenceTransformerTrainer
from sentence_transformers.training_args import BatchSamplers

from harness.core.errors import HarnessError
from harness.models import usable_positions
from harness.tasks.retrieval.retrievers.colbert_model import capped_length
from harness.training import arguments, ranks, tracking

if TYPE_CHECKING:
    from collections.abc import Mapping

    import torch
    from datasets import Dataset
    from pylate.models import ColBERT
    from sentence_transformers import SentenceTransformer
    from torch.utils.data import BatchSampler

    from harness.training.settings import DenseTraining, KdTraining, Training, TrainRun
    from harness.training.tracking import Tracker


class SeededTrainer(SentenceTransformerTrainer):
    """``SentenceTransformerTrainer`` whose batch samplers are seeded, sharing micro-batches across ranks."""

    def __init__(self, *args: Any, gather: bool = False, **kwargs: Any) -> None:
        self.gather = gather
        self.step_batches: ranks.StepBatches | None = None
        self.micro_batch = 0            # this rank's micro-batches so far in the epoch (ranks.EpochStart restarts it)
        self.factor = 1.0               # the current micro-batch's loss factor (ranks.StepBatches.factor)
        super().__init__(*args, **kwargs)
        n = self.args.world_size
        if n > 1:
            self.add_callback(ranks.EpochStart(self))
            # transformers 5.3 divides a micro-batch's loss by the accumulation, then accelerate's backward divides
            # it by its own (the trainer's): one process by G x G (G = the configured accumulation). A rank's trainer
            # accumulates G / N, so its accelerate divides by G, as one process's does (tests/test_train_devices.py)
            if self.accelerator.gradient_accumulation_steps == self.args.gradient_accumulation_steps:
                self.accelerator.gradient_accumulation_steps = self.args.gradient_accumulation_steps * n

    def get_batch_sampler(
        self, dataset: Dataset, batch_size: int, drop_last: bool, valid_label_columns: list[str] | None = None,
        generator: torch.Generator | None = None, seed: int = 0,
    ) -> BatchSampler | None:
        # sentence-transformers 5.3 calls this without seed, so NO_DUPLICATES reshuffled from seed 0 for every run
        sampler = super().get_batch_sampler(
            dataset, batch_size, drop_last, valid_label_columns=valid_label_columns, generator=generator,
            seed=self.args.seed,
        )
        n = self.args.world_size
        if n == 1 or sampler is None:
            return sampler
        self.step_batches = ranks.StepBatches(sampler, n, self.args.gradient_accumulation_steps * n, pad=not self.gather)
        return self.step_batches

    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> torch.Tensor:
        self.factor = 1.0
        if self.step_batches is not None:
            self.factor = self.step_batches.factor(self.micro_batch, self.args.process_index,
                                                   self.current_gradient_accumulation_steps)
            self.micro_batch += 1
        return super().training_step(model, inputs, num_items_in_batch)

    def compute_loss(self, model: Any, inputs: Any, return_outputs: bool = False, num_items_in_batch: Any = None
                     ) -> Any:
        out = super().compute_loss(model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch)
        if self.step_batches is None or not model.training or self.factor == 1.0:
            return out
        return (out[0] * self.factor, out[1]) if return_outputs else out * self.factor


def train_seeded(model: Any, node: Training, run: TrainRun, output_dir: str | Path, tracker: Tracker | None, *,
                 desc: str, rows: str, n_rows: int, fields: Mapping[str, Any],
                 facts: Mapping[str, Any] | None = None, **trainer: Any) -> dict[str, Any]:
    """The training DPR and ColBERT KD share; returns :func:`finish_training`'s facts."""
    tracker = tracker or tracking.NONE
    output_dir = Path(output_dir)
    args = arguments.training_arguments(node, run, output_dir / "checkpoints", tracker=tracker, **fields)
    seeded = SeededTrainer(model=model, args=args, callbacks=[arguments.NaNLossGuard(), arguments.ProgressLines(desc),
                                                              *tracker.callbacks()], **trainer)
    with tracker.session(), arguments.discard_unfinished(output_dir / "checkpoints"):
        result = seeded.train()
    return arguments.finish_training(model, result, output_dir, cfg=node, n_rows=n_rows, rows=rows,
                                     tracker=tracker, facts=facts)


def check_batchable(train_dataset: Dataset, batch_size: int) -> None:
    """NO_DUPLICATES batches need ``batch_size`` distinct anchors, else the sampler yields nothing (zero steps)."""
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
    """Fine-tune ``model`` in place on triplets per ``node`` and ``run``, save it, return the training facts."""
    check_batchable(train_dataset, node.batch_size)
    model.max_seq_length = node.max_seq_length
    steps_per_epoch = max(1, len(train_dataset) // (node.batch_size * node.gradient_accumulation_steps))
    fields = {"batch_sampler": BatchSamplers.NO_DUPLICATES, "dataloader_drop_last": True,
              "logging_steps": max(1, min(50, steps_per_epoch // 10))}
    return train_seeded(model, node, run, output_dir, tracker, desc="DPR training", rows="triplets",
                        n_rows=len(train_dataset), fields=fields,
                        train_dataset=train_dataset.select_columns(["anchor", "positive", "negative"]),
                        loss=make_loss(model, node), gather=node.gather_across_devices)


def train_kd(model: ColBERT, train_dataset: Dataset, node: KdTraining, run: TrainRun, output_dir: str | Path,
             tracker: Tracker | None = None) -> dict[str, Any]:
    """Distil teacher scores into ``model`` in place per ``node`` and ``run``, save it; the training facts."""
    tracker = tracker or tracking.NONE
    from pylate import losses, utils
    if len(train_dataset) == 0:
        raise HarnessError("the KD training set is empty: provide rows or raise task.train_data.max_samples.")
    limit = usable_positions(model)
    query_length = capped_length(node.train_query_length, limit)
    document_length = capped_length(node.train_document_length, limit)
    model.query_length, model.document_length = query_length, document_length
    steps = max(1, math.ceil(len(train_dataset) / node.batch_size) // node.gradient_accumulation_steps)
    fields = {"logging_steps": max(1, min(10, steps // 10)),
              "remove_unused_columns": False}   # KDProcessing adds query/documents on the fly from the id columns
    loss = ("pylate.losses.Distillation (KL, min-max normalised student scores)" if node.normalize_scores
            else "pylate.losses.Distillation (KL)")
    facts = {"query_length": query_length, "document_length": document_length, "loss": loss,
             "report_to": tracker.settings.name}   # the logger= tracker (none, tensorboard, wandb, mlflow)
    return train_seeded(model, node, run, output_dir, tracker, desc="ColBERT KD training", rows="samples",
                        n_rows=len(train_dataset), fields=fields, facts=facts, train_dataset=train_dataset,
                        loss=losses.Distillation(model=model, normalize_scores=node.normalize_scores),
                        data_collator=utils.ColBERTCollator(tokenize_fn=model.tokenize))
