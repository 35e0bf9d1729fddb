"""Fast encoding: tokenise once, sort by length, fill batches up to a token budget, inference mode + autocast.

Why not ``SentenceTransformer.encode``: it re-tokenises per fixed-size batch and runs in the weights'
dtype; a token budget keeps short-text batches large and long-text batches within memory.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np
import torch
from tqdm.auto import tqdm

from harness.models import autocast

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)


def token_budget_batches(lengths: np.ndarray, batch_tokens: int, max_batch_size: int) -> list[np.ndarray]:
    """Indices grouped into batches, longest first, with ``len(batch) * longest <= batch_tokens``.

    A single text longer than the budget still gets a batch of its own.
    """
    order = np.argsort(-lengths, kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    n = len(order)
    while start < n:
        longest = max(int(lengths[order[start]]), 1)
        size = max(1, min(max_batch_size, batch_tokens // longest))
        batches.append(order[start : start + size])
        start += size
    return batches


def _transformer_module(model: SentenceTransformer):
    return model[0]


def encode(
    model: SentenceTransformer,
    texts: list[str],
    *,
    device: str,
    precision: str = "fp32",
    batch_tokens: int = 16384,
    max_batch_size: int = 512,
    desc: str = "encoding",
    show_progress: bool = True,
) -> np.ndarray:
    """Embeddings (float32, shape [len(texts), dim]) in input order."""
    if not texts:
        return np.zeros((0, model.get_sentence_embedding_dimension() or 0), dtype=np.float32)
    module = _transformer_module(model)
    tokenizer = module.tokenizer
    stripped = [str(t).strip() for t in texts]
    if getattr(module, "do_lower_case", False):
        stripped = [t.lower() for t in stripped]
    enc = tokenizer(stripped, truncation="longest_first", max_length=model.max_seq_length, padding=False)
    input_ids: list[list[int]] = enc["input_ids"]
    has_type_ids = "token_type_ids" in enc
    lengths = np.fromiter((len(x) for x in input_ids), dtype=np.int64, count=len(input_ids))
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    model.eval()
    out: np.ndarray | None = None
    batches = token_budget_batches(lengths, batch_tokens, max_batch_size)
    bar = tqdm(total=len(texts), desc=desc, unit="text", disable=not show_progress, leave=False)
    with torch.inference_mode(), autocast(precision, device):
        for idx in batches:
            width = int(lengths[idx].max())
            ids = np.full((len(idx), width), pad_id, dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                seq = input_ids[i]
                ids[row, : len(seq)] = seq
                mask[row, : len(seq)] = 1
            features = {
                "input_ids": torch.from_numpy(ids).to(device),
                "attention_mask": torch.from_numpy(mask).to(device),
            }
            if has_type_ids:
                features["token_type_ids"] = torch.zeros_like(features["input_ids"])
            emb = model(features)["sentence_embedding"].float().cpu().numpy()
            if out is None:
                out = np.empty((len(texts), emb.shape[1]), dtype=np.float32)
            out[idx] = emb
            bar.update(len(idx))
    bar.close()
    assert out is not None
    return out
