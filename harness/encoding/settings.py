"""How the encoder batches texts (:class:`Batching`: ``task.batch_tokens``, ``task.max_batch_size``), torch-free."""

from __future__ import annotations

from dataclasses import dataclass

from harness.core.errors import HarnessError
from harness.core.typed import count

#: ``task.batch_tokens=auto`` where no GPU measurement applies (a CPU, whose worker threads share it; planning
#: shards; ColBERT's encoders): the budget every retrieval task used before ``auto`` existed
AUTO_BATCH_TOKENS = 16384


@dataclass(kw_only=True)
class Batching:
    """How an encoder batches texts (longest first, up to a token budget): changes no number."""

    batch_tokens: int | str = count(excluded="how texts are batched for the encoder")
    max_batch_size: int = count(excluded="how texts are batched for the encoder")

    def __post_init__(self) -> None:
        if isinstance(self.batch_tokens, str) and self.batch_tokens != "auto":
            raise HarnessError(f"task.batch_tokens={self.batch_tokens!r}: use a number of tokens per batch (>= 1) "
                               "or auto (from the GPU's memory; 16384 on a CPU)")

    @property
    def fixed_tokens(self) -> int:
        """The budget where nothing is measured: the number given, or :data:`AUTO_BATCH_TOKENS` for ``auto``."""
        return AUTO_BATCH_TOKENS if self.batch_tokens == "auto" else int(self.batch_tokens)
