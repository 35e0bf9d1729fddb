"""One training on N processes (``task.devices``) taking the optimizer steps one process would.

What a process of N gets is accelerate's: the trainers' DataLoader is prepared with ``BatchSamplerShard`` (no
``split_batches``), which hands rank r the micro-batches r, r + N, r + 2N, ... of the batch sampler every rank
iterates alike (the same seed and epoch), and transformers' Trainer groups each rank's micro-batches k at a time
into optimizer steps. With k = the configured accumulation / N, optimizer step j of every rank covers the
micro-batches jNk .. (j+1)Nk - 1 of that stream: those of one process's step j at accumulation Nk. Each rank scales
its micro-batch losses by 1/k and DDP averages the ranks' gradients, so every micro-batch counts 1/(Nk), as on one
process.

What accelerate leaves to us (:class:`StepBatches`, wrapped around the trainer's own batch sampler):
- the end of an epoch: one process takes a last, shorter step of R micro-batches (R = the planned batches mod Nk);
  ``BatchSamplerShard`` with ``drop_last`` would drop the R mod N that do not fill a round of ranks. They are kept,
  and the round is filled with copies of the last batch whose loss counts 0, each real micro-batch of that step
  counting 1/R (:meth:`StepBatches.factor`) as it does on one process;
- a shorter epoch than planned (NO_DUPLICATES cannot always fill its last batches): one process computes the
  incomplete group but never applies it (no optimizer step), so it is not handed out here;
- the epoch: accelerate reaches only a wrapped sampler's ``sampler`` to set its epoch, which the NO_DUPLICATES
  sampler does not use (it reseeds with seed + epoch itself): :class:`EpochStart` sets it, as the one-process
  DataLoader does;
- with gathered negatives (``task.gather_across_devices``) a copied batch would be a negative of every rank's
  queries, so the R mod N last micro-batches are dropped instead.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from torch.utils.data import BatchSampler
from transformers import TrainerCallback


def world() -> int:
    """How many processes this training runs on (torch.distributed's launcher sets ``WORLD_SIZE``)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    """This process's rank among them (0: the one that writes)."""
    return int(os.environ.get("RANK", "0"))


def barrier() -> None:
    """Wait for every process of the training (a no-op on one process)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


@dataclass(frozen=True)
class Tail:
    """The last step of an epoch that one process takes shorter: from stream position ``start``, ``real``
    micro-batches, then ``pads`` copies of the last one that count nothing."""

    start: int
    real: int
    pads: int


class StepBatches(BatchSampler):
    """The micro-batch stream of one process (``inner``: the trainer's own batch sampler), cut where the ``world``
    processes can share it: whole optimizer steps of ``group`` (= accumulation x world) micro-batches, then the
    planned last step padded to a multiple of ``world`` (``pad``; else cut to one: gathered negatives)."""

    def __init__(self, inner: Any, world: int, group: int, pad: bool = True) -> None:
        self.inner, self.world, self.group, self.pad = inner, world, group, pad
        self.batch_size = getattr(inner, "batch_size", None)
        self.drop_last = getattr(inner, "drop_last", False)
        self.tail: Tail | None = None

    @property
    def sampler(self) -> Any:
        """The inner sampler's index sampler: accelerate replaces a RandomSampler by its seeded one here, as it does
        on one process (ColBERT KD's shuffle)."""
        return getattr(self.inner, "sampler", None)

    @sampler.setter
    def sampler(self, value: Any) -> None:
        self.inner.sampler = value

    def set_epoch(self, epoch: int) -> None:
        if hasattr(self.inner, "set_epoch"):
            self.inner.set_epoch(epoch)

    def __len__(self) -> int:
        planned = len(self.inner)
        if self.pad:
            return math.ceil(planned / self.world) * self.world
        return planned - (planned % self.group) % self.world

    def __iter__(self) -> Iterator[list[int]]:
        self.tail = None
        planned, done, held = len(self.inner), 0, []
        for batch in self.inner:
            held.append(batch)
            if len(held) == self.group:
                yield from held
                done, held = done + len(held), []
        if not held or done + len(held) != planned:
            return                       # a group one process would not apply (or none): not handed out
        if not self.pad:
            yield from held[: len(held) - len(held) % self.world]
            return
        pads = -len(held) % self.world
        self.tail = Tail(done, len(held), pads)
        yield from held + [held[-1]] * pads

    def factor(self, i: int, rank: int, per_rank: int) -> float:
        """What rank ``rank``'s ``i``-th micro-batch of this epoch's loss is multiplied by, beside the trainer's own
        1/``per_rank`` (the micro-batches it accumulates in this step): 1 in whole steps; in the padded last step,
        world x per_rank / R for its real micro-batches (each then counts 1/R after DDP's mean) and 0 for copies."""
        position = i * self.world + rank
        if self.tail is None or position < self.tail.start:
            return 1.0
        if position - self.tail.start >= self.tail.real:
            return 0.0
        return self.world * per_rank / self.tail.real


class EpochStart(TrainerCallback):
    """At each epoch: the sampler's epoch (as one process's DataLoader sets it) and the trainer's micro-batch count
    restarted; at the end of the last one, the loss logged (gathered over the ranks: a rank's own remainder since
    the last log would otherwise enter the mean training loss)."""

    def __init__(self, trainer: Any) -> None:
        self.trainer, self.epoch = trainer, 0

    def on_train_begin(self, args, state, control, **kwargs):
        self.epoch = 0

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.trainer.micro_batch = 0
        if self.trainer.step_batches is not None:
            self.trainer.step_batches.set_epoch(self.epoch)
        self.epoch += 1

    def on_epoch_end(self, args, state, control, **kwargs):
        if control.should_training_stop or self.epoch >= math.ceil(args.num_train_epochs):
            control.should_log = True
