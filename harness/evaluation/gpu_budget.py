"""``task.batch_tokens=auto`` on a GPU: the encoder's token budget from the device's memory, measured.

As the efficiency task's max-batch search does, the budget comes from what the device holds rather than a number
written for the smallest machine: one forward of a calibration batch (sequences of the model's longest length,
about :data:`CALIBRATION_TOKENS` tokens, in the run's layout and precision) gives the model's peak memory per
token; the budget is the largest power of two whose batches take at most :data:`MEMORY_SHARE` of the memory free
now, capped at :data:`MAX_BATCH_TOKENS`. Measured once per (model, device, layout, precision) and kept on the
model; :func:`facts` is what records carry (``details.batch_tokens``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

#: tokens of the calibration forward (whole sequences of the model's longest length; at least one)
CALIBRATION_TOKENS = 8192
#: the share of the free memory batches may take: the rest is the embeddings, pinned copies in flight, the
#: allocator's fragmentation
MEMORY_SHARE = 0.5
#: the most tokens a batch holds: beyond this an encoder-sized model gains nothing per token, and a larger batch
#: only delays the pipeline's first batch (its first chunk of text is about one batch)
MAX_BATCH_TOKENS = 1 << 18


def _cache(model: Any) -> dict[tuple, dict[str, Any]]:
    if getattr(model, "_harness_batch_tokens", None) is None:
        model._harness_batch_tokens = {}
    return model._harness_batch_tokens


def facts(model: Any) -> dict[str, Any]:
    """What ``auto`` chose for ``model`` on a GPU, per setting (empty where it never ran there)."""
    return {entry["key"]: {k: v for k, v in entry.items() if k != "key"} for entry in _cache(model).values()}


def gpu_batch_tokens(model: Any, device: str, mode: str | None, precision: str, *, forward: Any,
                     host_batch: Any, pad_id: int, type_ids: bool) -> int:
    """The budget ``auto`` gives ``model`` on CUDA ``device`` (``mode``: the batches' layout, see
    :func:`harness.evaluation.encode.pack_mode`); ``forward``/``host_batch`` are the encoder's own."""
    key = (device, mode, precision)
    cache = _cache(model)
    if key in cache:
        return int(cache[key]["batch_tokens"])
    from harness.models import autocast_for

    length = max(1, int(model.max_seq_length or 512))
    n = max(1, CALIBRATION_TOKENS // length)
    seqs = [[pad_id + 1] * length for _ in range(n)]
    batch = host_batch(seqs, np.arange(n), mode, pad_id)
    torch.cuda.synchronize(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    with torch.inference_mode(), autocast_for(model, precision, device):
        forward(model, batch, mode, device, type_ids)
    torch.cuda.synchronize(device)
    per_token = max(1.0, (torch.cuda.max_memory_allocated(device) - base) / (n * length))
    free, total = torch.cuda.mem_get_info(device)
    fits = MEMORY_SHARE * free / per_token
    budget = int(min(MAX_BATCH_TOKENS, 2 ** max(0, math.floor(math.log2(max(fits, 1.0))))))
    budget = max(budget, length)               # one longest text per batch at least
    cache[key] = {"key": f"{device}/{'packed' if mode else 'padded'}/{precision}", "batch_tokens": budget,
                  "bytes_per_token": round(per_token), "free_bytes": int(free), "total_bytes": int(total),
                  "calibration": f"{n} x {length} tokens", "memory_share": MEMORY_SHARE, "cap": MAX_BATCH_TOKENS}
    return budget
