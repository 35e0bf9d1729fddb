"""The sentence-transformers trainer with the run's seed reaching its batch sampler (DPR and ColBERT KD use it).

The other sources of randomness already follow the seed: transformers' ``Trainer.__init__`` calls
``set_seed(args.seed)`` (dropout, CachedMNRL's replayed RNG states); the default batch sampler's shuffle (ColBERT KD)
is accelerate's ``SeedableRandomSampler`` seeded with ``args.data_seed``; the data samples and the fresh heads are
seeded by the callers (``triplets.sample``, ``kd.sample``, ``load_colbert(seed=task.train_seed)``, task=glue's
``set_seed`` before ``load_classifier``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sentence_transformers import SentenceTransformerTrainer

if TYPE_CHECKING:
    import torch
    from datasets import Dataset
    from torch.utils.data import BatchSampler


class SeededTrainer(SentenceTransformerTrainer):
    """``SentenceTransformerTrainer`` whose batch samplers (e.g. NO_DUPLICATES) are seeded with ``args.seed``."""

    def get_batch_sampler(
        self, dataset: Dataset, batch_size: int, drop_last: bool, valid_label_columns: list[str] | None = None,
        generator: torch.Generator | None = None, seed: int = 0,
    ) -> BatchSampler | None:
        # sentence-transformers 5.3 calls this without seed, so NO_DUPLICATES reshuffled from seed 0 for every run
        return super().get_batch_sampler(
            dataset, batch_size, drop_last, valid_label_columns=valid_label_columns, generator=generator,
            seed=self.args.seed,
        )
