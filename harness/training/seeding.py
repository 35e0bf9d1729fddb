"""The sentence-transformers trainer with the run's seed reaching its batch sampler (DPR and ColBERT KD use it), and,
on N processes (``task.devices``), the micro-batches and steps of one process (:mod:`harness.training.ranks`).

The other sources of randomness already follow the seed: transformers' ``Trainer.__init__`` calls
``set_seed(args.seed)`` (dropout, CachedMNRL's replayed RNG states); the default batch sampler's shuffle (ColBERT KD)
is accelerate's ``SeedableRandomSampler`` seeded with ``args.data_seed``; the data samples and the fresh heads are
seeded by the callers (``triplets.sample``, ``kd.sample``, ``load_colbert(seed=task.train_seed)``, task=glue's
``set_seed`` before ``load_classifier``). On N processes every rank seeds alike, so dropout masks differ from one
process's (a rank's first micro-batch draws what one process's first draws): the equality holds without dropout.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentence_transformers import SentenceTransformerTrainer

from harness.training import ranks, tracking
from harness.training.arguments import finish_training, training_arguments
from harness.training.callbacks import NaNLossGuard, ProgressLines, discard_unfinished

if TYPE_CHECKING:
    from collections.abc import Mapping

    import torch
    from datasets import Dataset
    from torch.utils.data import BatchSampler

    from harness.training.settings import Training, TrainRun
    from harness.training.tracking import Tracker


class SeededTrainer(SentenceTransformerTrainer):
    """``SentenceTransformerTrainer`` whose batch samplers (e.g. NO_DUPLICATES) are seeded with ``args.seed``; on
    several processes, each takes its share of one process's micro-batches (``gather``: gathered negatives)."""

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
                 desc: str, rows: str, n_rows: int, arguments: Mapping[str, Any],
                 facts: Mapping[str, Any] | None = None, **trainer: Any) -> dict[str, Any]:
    """The training DPR and ColBERT KD share: :class:`SeededTrainer` (``trainer``: its dataset, loss, ...) under
    the shared arguments (``arguments``: what the caller adds), the NaN guard, progress lines (``desc``) and the
    tracker's callbacks; an unfinished run's checkpoints removed; :func:`finish_training`'s facts returned."""
    tracker = tracker or tracking.NONE
    output_dir = Path(output_dir)
    args = training_arguments(node, run, output_dir / "checkpoints", tracker=tracker, **arguments)
    seeded = SeededTrainer(model=model, args=args, callbacks=[NaNLossGuard(), ProgressLines(desc),
                                                              *tracker.callbacks()], **trainer)
    with tracker.session(), discard_unfinished(output_dir / "checkpoints"):
        result = seeded.train()
    return finish_training(model, result, output_dir, cfg=node, n_rows=n_rows, rows=rows, tracker=tracker,
                           facts=facts)
